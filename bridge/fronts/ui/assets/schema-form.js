// A form for one tool, generated from its parameters' JSON Schema. Strings, numbers, integers,
// booleans and enums get their own inputs; arrays and objects a JSON text box. Optional fields
// left empty are not sent, so the tool sees its own defaults.
import { h } from "./dom.js";
import { typeOf } from "./schema-view.js";

let uid = 0;

function field(name, s, required) {
  const id = `f-${++uid}-${name}`;
  const t = Array.isArray(s?.type) ? s.type.find((x) => x !== "null") : s?.type;
  let input;
  let read;
  if (s?.enum) {
    input = h("select", { id, name }, required ? null : h("option", { value: "" }, "(not set)"), ...s.enum.map((v, i) => h("option", { value: String(i) }, JSON.stringify(v))));
    read = () => (input.value === "" ? undefined : s.enum[Number(input.value)]);
  } else if (t === "boolean") {
    input = h("select", { id, name }, required ? null : h("option", { value: "" }, "(not set)"), h("option", { value: "true" }, "true"), h("option", { value: "false" }, "false"));
    read = () => (input.value === "" ? undefined : input.value === "true");
  } else if (t === "integer" || t === "number") {
    input = h("input", { id, name, type: "number", step: t === "integer" ? "1" : "any", placeholder: t });
    // an unparsable number goes through as text: the tool's schema check answers it, as it would a model's
    read = () => (input.value.trim() === "" ? undefined : Number.isNaN(Number(input.value)) ? input.value : Number(input.value));
  } else if (t === "array" || t === "object" || (!t && !s?.enum)) {
    input = h("textarea", { id, name, rows: 2, placeholder: t === "array" ? "[ … ] as JSON" : t === "object" ? "{ … } as JSON" : "any JSON value", spellcheck: false });
    read = () => {
      const v = input.value.trim();
      if (v === "") return undefined;
      try {
        return JSON.parse(v);
      } catch {
        return v;
      }
    };
  } else {
    input = h("input", { id, name, type: "text", placeholder: s?.format ?? "text", autocomplete: "off", spellcheck: false });
    read = () => (input.value === "" ? undefined : input.value);
  }
  const label = h("label", { htmlFor: id }, h("code", name), required ? h("span.req", { title: "required" }, "*") : null, h("span.ftype", typeOf(s)));
  const row = h("div.field", label, input, s?.description ? h("div.fdesc", s.description) : null);
  return { row, input, read, name };
}

/** Returns the form element and `read()`, which gives `{name, arguments}`. */
export function toolForm(tool, onSubmit) {
  const fn = tool.function;
  const params = fn.parameters ?? {};
  const required = new Set(params.required ?? []);
  const fields = Object.entries(params.properties ?? {}).map(([n, s]) => field(n, s, required.has(n)));
  const read = () => {
    const args = {};
    for (const f of fields) {
      const v = f.read();
      if (v !== undefined) args[f.name] = v;
    }
    return { name: fn.name, arguments: args };
  };
  const form = h(
    "form.tool-form",
    {
      onsubmit: (ev) => {
        ev.preventDefault();
        onSubmit(read());
      },
    },
    h("div.tool-desc", fn.description),
    fields.length ? fields.map((f) => f.row) : h("p.muted", "no parameters"),
    h("div.form-actions", h("button.primary", { type: "submit", title: "Ctrl+Enter" }, `Call ${fn.name}`)),
  );
  // Ctrl/Cmd+Enter submits from any field, including the JSON boxes
  form.addEventListener("keydown", (ev) => {
    if (ev.key === "Enter" && (ev.ctrlKey || ev.metaKey)) {
      ev.preventDefault();
      form.requestSubmit();
    }
  });
  return { form, read, first: fields[0]?.input };
}
