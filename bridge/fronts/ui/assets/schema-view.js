// JSON Schemas as people read them: a table of properties with types, required marks, enums and
// descriptions, nested objects and arrays indented under their parent.
import { h, json } from "./dom.js";

export function typeOf(s) {
  if (!s || typeof s !== "object") return "any";
  if (s.enum) return "enum";
  if (Array.isArray(s.type)) return s.type.join(" | ");
  if (s.type === "array") return `array of ${typeOf(s.items)}`;
  if (s.type) return s.type;
  if (s.anyOf || s.oneOf) return (s.anyOf ?? s.oneOf).map(typeOf).join(" | ");
  if (s.properties) return "object";
  return "any";
}

function constraints(s) {
  const out = [];
  if (s.enum) out.push(h("span.enum", "one of ", ...s.enum.flatMap((v, i) => [i ? ", " : "", h("code", json(v, 0))])));
  for (const k of ["minimum", "maximum", "minLength", "maxLength", "pattern", "format", "minItems", "maxItems"]) if (s[k] !== undefined) out.push(h("span.constraint", `${k} ${s[k]}`));
  if (s.default !== undefined) out.push(h("span.constraint", "default ", h("code", json(s.default, 0))));
  return out;
}

function rows(schema, depth, out) {
  const props = schema?.properties ?? {};
  const required = new Set(schema?.required ?? []);
  for (const [name, s] of Object.entries(props)) {
    out.push(
      h("tr", { class: `depth-${Math.min(depth, 4)}` },
        h("td.pname", h("code", name), required.has(name) ? h("span.req", { title: "required" }, "*") : null),
        h("td.ptype", h("code", typeOf(s))),
        h("td.pdesc", s?.description ?? "", ...constraints(s ?? {})),
      ),
    );
    if (s?.properties) rows(s, depth + 1, out);
    else if (s?.items?.properties) rows(s.items, depth + 1, out);
    else if (s?.additionalProperties && typeof s.additionalProperties === "object") {
      out.push(h("tr", { class: `depth-${Math.min(depth + 1, 4)}` }, h("td.pname", h("code", "{key}")), h("td.ptype", h("code", typeOf(s.additionalProperties))), h("td.pdesc", "each entry, keyed by id", ...constraints(s.additionalProperties))));
      rows(s.additionalProperties, depth + 2, out);
    }
  }
  // a record's required fields without property schemas still say what a record holds
  if (!schema?.properties && schema?.required?.length) {
    out.push(h("tr", h("td.pname", h("em", "fields")), h("td.ptype", ""), h("td.pdesc", "required: ", ...schema.required.flatMap((r, i) => [i ? ", " : "", h("code", r)]))));
  }
  return out;
}

export function schemaTable(schema, emptyText = "no parameters") {
  const body = rows(schema, 0, []);
  if (!body.length) return h("p.muted", emptyText);
  return h("table.schema", h("thead", h("tr", h("th", "name"), h("th", "type"), h("th", "description"))), h("tbody", body));
}

/** The raw schema, folded away under the readable view. */
export function rawSchema(schema) {
  return h("details.raw", h("summary", "raw JSON Schema"), h("pre", json(schema)));
}
