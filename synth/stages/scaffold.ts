import { InvalidReply } from "../llm/llm-client.js";
import { collectionsOf } from "./repair-hints.js";

/**
 * Synth's scaffolded code mode (`--code-mode scaffold`): everything about the env class that the
 * plan decides is written here, with no LLM call — the constructor, the collections as objects keyed
 * by record id, small helpers for them, and for each tool a method that takes its arguments out of
 * the one object it is called with and checks them against the tool's JSON Schema. The model then
 * writes only what the plan cannot say: each tool's body (its logic and the rules it enforces).
 *
 * Why: on Qwen2.5-Coder 1.5B the code stage is where envs died (docs/local-model.md): a tool that
 * called `.filter` on a collection, which is an object keyed by id, threw TypeError on the simplest
 * arguments three times, then twice more one method at a time. A body written against helpers that
 * already do the state handling (`this._list("trials", { stage })`) has much less to get wrong.
 */

type Json = Record<string, unknown>;

export interface PlanLike {
  state_schema: Json;
  initial_state: Json;
  tools: { name: string; description: string; kind: "query" | "change"; parameters: { properties?: Record<string, Json>; required?: string[] } & Json }[];
}

/** A top-level state key that holds records keyed by id, and how a new record gets its id. */
export interface Collection {
  name: string;
  /** The record field that repeats its key (`id`, `appointment_id`), or null when records carry none. */
  idField: string | null;
  /** Ids are numbers in the records (keys are strings all the same): a new record's id field is a number. */
  numericIds: boolean;
  /** A new key is `prefix` + the next number, zero-padded to `width` (as the plan's own keys are: A1, P001, 3). */
  prefix: string;
  width: number;
}

const isObject = (v: unknown): v is Json => v !== null && typeof v === "object" && !Array.isArray(v);

/** The state's collections: what repairHints calls collections (non-empty record maps), plus empty objects the schema says hold records. */
export function scaffoldCollections(plan: Pick<PlanLike, "state_schema" | "initial_state">): Collection[] {
  const props = isObject(plan.state_schema.properties) ? plan.state_schema.properties : {};
  const names = new Set(collectionsOf(plan.initial_state));
  for (const [name, value] of Object.entries(plan.initial_state)) {
    const schema = props[name];
    if (isObject(value) && Object.keys(value).length === 0 && isObject(schema) && isObject(schema.additionalProperties)) names.add(name);
  }
  return [...names].map((name) => collectionOf(name, plan.initial_state[name] as Json, props[name]));
}

function collectionOf(name: string, records: Json, schema: unknown): Collection {
  const entries = Object.entries(records).filter((e): e is [string, Json] => isObject(e[1]));
  const fields = entries.length ? Object.keys(entries[0]![1]) : [];
  // only a string or number can repeat a key (an object field would stringify to "[object Object]")
  const repeatsKey = (f: string) => entries.length > 0 && entries.every(([k, r]) => (typeof r[f] === "string" || typeof r[f] === "number") && String(r[f]) === k);
  const recordSchema = isObject(schema) && isObject(schema.additionalProperties) ? schema.additionalProperties : {};
  const schemaProps = isObject(recordSchema.properties) ? recordSchema.properties : {};
  const idField = repeatsKey("id") ? "id" : (fields.find(repeatsKey) ?? ("id" in schemaProps ? "id" : null));
  const idSchema = idField && isObject(schemaProps[idField]) ? schemaProps[idField] : {};
  const numericIds = idField !== null && (entries.some(([, r]) => typeof r[idField] === "number") || idSchema.type === "integer" || idSchema.type === "number");
  const keys = entries.map(([k]) => /^(.*?)(\d+)$/.exec(k)).filter((m): m is RegExpExecArray => m !== null);
  const prefixes = new Map<string, number>();
  for (const m of keys) prefixes.set(m[1]!, (prefixes.get(m[1]!) ?? 0) + 1);
  const prefix = keys.length ? [...prefixes].sort((a, b) => b[1] - a[1])[0]![0] : numericIds ? "" : name.charAt(0).toUpperCase();
  const padded = keys.filter((m) => m[1] === prefix && m[2]!.startsWith("0") && m[2]!.length > 1);
  return { name, idField, numericIds: numericIds && prefix === "", prefix, width: padded.length ? Math.max(...padded.map((m) => m[2]!.length)) : 0 };
}

const RESERVED = new Set(
  "args arguments await break case catch class const continue debugger default delete do else enum eval export extends false finally for function if implements import in instanceof interface let new null package private protected public return static super switch this throw true try typeof var void while with yield undefined NaN Infinity".split(" "),
);
/** A property name that can be a local variable (destructured from `args`); any other is read as args["…"]. */
const isLocal = (name: string) => /^[A-Za-z_$][\w$]*$/.test(name) && !RESERVED.has(name);
const refOf = (name: string) => (isLocal(name) ? name : `args[${JSON.stringify(name)}]`);

const TYPE_TESTS: Record<string, (ref: string) => string> = {
  string: (r) => `typeof ${r} === "string"`,
  integer: (r) => `Number.isInteger(${r})`,
  number: (r) => `(typeof ${r} === "number" && Number.isFinite(${r}))`,
  boolean: (r) => `typeof ${r} === "boolean"`,
  array: (r) => `Array.isArray(${r})`,
  object: (r) => `(${r} !== null && typeof ${r} === "object" && !Array.isArray(${r}))`,
  null: (r) => `${r} === null`,
};
const TYPE_NAMES: Record<string, string> = { string: "a string", integer: "an integer", number: "a number", boolean: "true or false", array: "an array", object: "an object", null: "null" };

/** The first lines of a tool's method: its arguments taken out of `args` and checked against its schema (required present, JSON type, enum). */
function argumentLines(tool: PlanLike["tools"][number]): string[] {
  const props = isObject(tool.parameters.properties) ? tool.parameters.properties : {};
  const required = new Set(Array.isArray(tool.parameters.required) ? tool.parameters.required : []);
  const lines = ['if (args === null || typeof args !== "object" || Array.isArray(args)) return this._fail("the arguments must be an object");'];
  const locals = Object.keys(props).filter(isLocal);
  if (locals.length) lines.push(`const { ${locals.join(", ")} } = args;`);
  for (const [name, schema] of Object.entries(props)) {
    const ref = refOf(name);
    if (required.has(name)) lines.push(`if (${ref} === undefined || ${ref} === null) return this._fail(${JSON.stringify(`missing required argument ${name}`)});`);
    const types = (Array.isArray(schema.type) ? schema.type : [schema.type]).filter((t): t is string => typeof t === "string" && t in TYPE_TESTS);
    if (types.length) {
      const test = types.map((t) => TYPE_TESTS[t]!(ref)).join(" || ");
      const present = required.has(name) ? "" : `${ref} !== undefined && `; // a required one is there by now
      lines.push(`if (${present}!(${test})) return this._fail(${JSON.stringify(`${name} must be ${types.map((t) => TYPE_NAMES[t]).join(" or ")}`)});`);
    }
    if (Array.isArray(schema.enum) && schema.enum.length) {
      lines.push(`if (${ref} !== undefined && !${JSON.stringify(schema.enum)}.includes(${ref})) return this._fail(${JSON.stringify(`${name} must be one of ${schema.enum.map((v) => JSON.stringify(v)).join(", ")}`)});`);
    }
  }
  return lines;
}

/** The collection a word names: `appointment`, `appointments`, `category` → `categories`; null when none or ambiguous. */
function collectionNamed(word: string, collections: Collection[]): string | null {
  const forms = new Set([word, `${word}s`, `${word}es`, word.replace(/y$/, "ies")]);
  const hits = collections.filter((c) => forms.has(c.name));
  return hits.length === 1 ? hits[0]!.name : null;
}

/**
 * The body of a query tool that is unambiguously a plain lookup or listing, or null. A lookup:
 * `get_<record>` (or view_, show_, fetch_, lookup_, retrieve_, read_; an optional _details / _info
 * / _by_id tail) with one argument, the record's id (`<record>_id` or `id`), and the collection the
 * name says. A listing: `list_<collection>` (or get_, show_, view_, list_all_, get_all_) with no
 * arguments. Anything with a filter, a rule or a second argument is the model's to write.
 */
export function plainQueryBody(tool: PlanLike["tools"][number], collections: Collection[]): string | null {
  if (tool.kind !== "query") return null;
  const props = Object.keys(isObject(tool.parameters.properties) ? tool.parameters.properties : {});
  if (props.length === 0) {
    const m = /^(?:list|get|show|view)_(?:all_)?([a-z0-9_]+)$/.exec(tool.name);
    const c = m ? collections.find((x) => x.name === m[1]) : undefined;
    return c ? `// filled by the scaffold: a plain listing (no LLM call)\nreturn this._ok(this._list(${JSON.stringify(c.name)}));` : null;
  }
  if (props.length !== 1) return null;
  const [arg] = props as [string];
  const required = Array.isArray(tool.parameters.required) && tool.parameters.required.includes(arg);
  const m = /^(?:get|view|show|fetch|lookup|retrieve|read)_([a-z0-9_]+?)(?:_details|_info|_by_id)?$/.exec(tool.name);
  const byArg = /^([a-z0-9_]+)_id$/.exec(arg);
  if (!m || !required || !(arg === "id" || byArg)) return null;
  const c = collectionNamed(m[1]!, collections);
  if (!c || (byArg && collectionNamed(byArg[1]!, collections) !== c)) return null;
  const ref = refOf(arg);
  return [
    "// filled by the scaffold: a plain lookup by id (no LLM call)",
    `const record = this._get(${JSON.stringify(c)}, ${ref});`,
    `if (!record) return this._notFound(${JSON.stringify(c)}, ${ref});`,
    "return this._ok(record);",
  ].join("\n");
}

/** What the scaffold's helpers are, for the body prompt (kept next to their source so the two agree). */
export const HELPER_DOCS = [
  'this._get("name", id): the record with that id in collection `name`, or null (never throws)',
  'this._notFound("name", id): the standard failure for an unknown id: return this._notFound("patients", patient_id)',
  'this._list("name", where?): the records of a collection as an ARRAY (live records: changing one changes the state); `where` is an object of field values ({ status: "open" }) or a function (r) => boolean',
  'this._add("name", fields): stores a new record under the next free id (its id field set) and returns it',
  'this._nextId("name"): the next free id of a collection, when you need it before storing',
  "this._ok(data): { success: true, data }; this._fail(error): { success: false, error }",
  "`name` is a collection's name exactly as in the state (plural: \"books\", not \"book\"); any other name throws TypeError",
];

function helperSource(className: string): string {
  return `// ---- helpers (written by the scaffold; not tools: their names start with _)

_ok(data) {
  return data === undefined ? { success: true } : { success: true, data };
}

_fail(error) {
  return { success: false, error: String(error) };
}

/**
 * The records object of a collection; null for one the plan has but this state lacks (empty). A
 * name that is no collection (a typo, a singular) throws TypeError naming them, so the check's call
 * fails and the model is told, instead of a silently empty answer.
 */
_records(name) {
  const records = this[name];
  if (records !== null && typeof records === "object") return records;
  if (Object.prototype.hasOwnProperty.call(${className}.COLLECTIONS, name)) return null;
  throw new TypeError("no collection " + JSON.stringify(name) + " in the state; its collections: " + Object.keys(${className}.COLLECTIONS).join(", "));
}

/** The record with this id, or null. */
_get(name, id) {
  const records = this._records(name);
  if (records === null || id === undefined || id === null) return null;
  // own keys only: an id such as "constructor" names no record
  if (!Object.prototype.hasOwnProperty.call(records, String(id))) return null;
  const record = records[id];
  return record === undefined ? null : record;
}

_notFound(name, id) {
  return this._fail("no record " + JSON.stringify(id) + " in " + name);
}

/** The records of a collection as an array (the live records), optionally filtered. */
_list(name, where) {
  const records = this._records(name);
  if (records === null) return [];
  const all = Array.isArray(records) ? records.slice() : Object.values(records);
  if (typeof where === "function") return all.filter(where);
  if (where !== null && typeof where === "object") {
    const pairs = Object.entries(where).filter(([, v]) => v !== undefined);
    return all.filter((r) => r !== null && typeof r === "object" && pairs.every(([k, v]) => r[k] === v));
  }
  return all;
}

/** The next free id of a collection: the plan's prefix and the next number. */
_nextId(name) {
  const info = ${className}.COLLECTIONS[name] || { prefix: "", width: 0 };
  const records = this._records(name) || {};
  const keys = Object.keys(records);
  let n = keys.length;
  for (const k of keys) {
    const m = /(\\d+)$/.exec(k);
    if (m && Number(m[1]) > n) n = Number(m[1]);
  }
  for (;;) {
    n += 1;
    const id = info.prefix + String(n).padStart(info.width, "0");
    if (!Object.prototype.hasOwnProperty.call(records, id)) return id;
  }
}

/** Stores a new record under the next free id, with its id field set, and returns it. */
_add(name, fields) {
  if (this._records(name) === null) this[name] = {};
  const info = ${className}.COLLECTIONS[name];
  const key = this._nextId(name);
  const record = Object.assign({}, fields);
  if (info && info.idField) record[info.idField] = info.numericIds ? Number(key) : key;
  this[name][key] = record;
  return this[name][key];
}`;
}

/** The marker the body prompt puts where the model's code goes. */
export const BODY_MARKER = "/* YOUR CODE: the body of this tool */";
const NOT_WRITTEN = 'return this._fail("not written yet");';

export interface Scaffold {
  collections: Collection[];
  /** Bodies the scaffold wrote itself (plain lookups and listings), by tool name. */
  filled: Map<string, string>;
  /** The class with these bodies; a tool without one returns {success: false, error: "not written yet"}. */
  source(bodies: ReadonlyMap<string, string>): string;
  /** The class as the body prompt shows it: helpers whole, this tool's method with the marker, the others' bodies left out. */
  skeleton(tool: string, bodies: ReadonlyMap<string, string>): string;
}

const indent = (text: string, n: number) =>
  text
    .split("\n")
    .map((l) => (l.trim() ? " ".repeat(n) + l : ""))
    .join("\n");

export function scaffoldFor(plan: PlanLike, className: string): Scaffold {
  const collections = scaffoldCollections(plan);
  const filled = new Map<string, string>();
  for (const t of plan.tools) {
    const body = plainQueryBody(t, collections);
    if (body) filled.set(t.name, body);
  }
  const table = Object.fromEntries(collections.map((c) => [c.name, { idField: c.idField, numericIds: c.numericIds, prefix: c.prefix, width: c.width }]));
  const head = [
    `// Scaffolded by envscaler synth (code_mode "scaffold"): the constructor, the helpers and each tool's`,
    "// argument checks come from the plan; each tool's inner block is its logic, written by the model",
    "// unless it says it was filled by the scaffold.",
    `class ${className} {`,
    "  // the state's collections (objects keyed by record id) and how a new record's id is made",
    `  static COLLECTIONS = ${JSON.stringify(table)};`,
    "",
    "  constructor(state) {",
    "    // the state's top-level keys are the instance's fields (the bridge also assigns them after construction)",
    "    Object.assign(this, state);",
    "  }",
    "",
    indent(helperSource(className), 2),
  ].join("\n");
  const method = (tool: PlanLike["tools"][number], inner: string) =>
    indent(
      [
        `/** ${tool.description.replace(/\*\//g, "* /").replace(/\n/g, " ")} */`,
        `${tool.name}(args = {}) {`,
        "  // the arguments, checked against the tool's JSON Schema (written by the scaffold)",
        ...argumentLines(tool).map((l) => `  ${l}`),
        "  {",
        indent(inner, 4),
        "  }",
        "}",
      ].join("\n"),
      2,
    );
  return {
    collections,
    filled,
    source(bodies) {
      const methods = plan.tools.map((t) => method(t, bodies.get(t.name) ?? NOT_WRITTEN));
      return `${head}\n\n  // ---- tools\n\n${methods.join("\n\n")}\n}`;
    },
    skeleton(tool, bodies) {
      // compact: the helpers by name (the prompt says what each does), the other tools by their arguments
      const fields = Object.keys(plan.initial_state).map((k) => `this.${k}`).join(", ");
      const methods = plan.tools.map((t) => {
        if (t.name === tool) return `\n${method(t, BODY_MARKER)}\n`;
        const locals = Object.keys(t.parameters.properties ?? {}).filter(isLocal);
        return `  ${t.name}(args = {}) { ${locals.length ? `const { ${locals.join(", ")} } = args; ` : ""}/* ${bodies.has(t.name) ? "written" : "to be written"} */ }`;
      });
      return [
        `class ${className} {`,
        `  constructor(state) { Object.assign(this, state); } // the state's fields: ${fields}`,
        `  // helpers (written): _ok(data), _fail(error), _get(name, id), _notFound(name, id), _list(name, where), _nextId(name), _add(name, fields); collections: ${collections.map((c) => JSON.stringify(c.name)).join(", ") || "none"}`,
        ...methods,
        "}",
      ].join("\n");
    },
  };
}

/**
 * The index just past the bracket that closes the one at `open` (`(`, `[` or `{`), or -1 when it
 * never closes (a reply cut short) or a bracket of another kind closes first. Strings, template literals (with their `${}`) and comments are
 * skipped; a regular expression literal holding a bracket is not told apart (rare in tool bodies).
 */
export function closeOf(text: string, open: number): number {
  const stack: string[] = [];
  const pairs: Record<string, string> = { "(": ")", "[": "]", "{": "}" };
  let i = open;
  while (i < text.length) {
    const c = text[i]!;
    if (c === '"' || c === "'") {
      i++;
      while (i < text.length && text[i] !== c && text[i] !== "\n") i += text[i] === "\\" ? 2 : 1;
    } else if (c === "`") {
      // a template: its ${...} parts are code, pushed as a "}" to close
      i++;
      while (i < text.length && text[i] !== "`") {
        if (text[i] === "\\") i++;
        else if (text[i] === "$" && text[i + 1] === "{") {
          const end = closeOf(text, i + 1);
          if (end < 0) return -1;
          i = end - 1;
        }
        i++;
      }
    } else if (c === "/" && text[i + 1] === "/") {
      while (i < text.length && text[i] !== "\n") i++;
    } else if (c === "/" && text[i + 1] === "*") {
      const end = text.indexOf("*/", i + 2);
      if (end < 0) return -1;
      i = end + 1;
    } else if (c in pairs) stack.push(pairs[c]!);
    else if (c === ")" || c === "]" || c === "}") {
      if (stack.pop() !== c) return -1;
      if (stack.length === 0) return i + 1;
    }
    i++;
  }
  return -1;
}

/** The code in a reply: a closed ``` block's content; an unclosed one (a reply cut short) from its first line on; else the whole reply. */
function codeOf(reply: string): string {
  const fenced = /```[\w-]*[^\S\n]*\n([\s\S]*?)```/.exec(reply);
  if (fenced) return fenced[1]!.trim();
  const open = /```[\w-]*[^\S\n]*\n([\s\S]*)$/.exec(reply);
  return (open ? open[1]! : reply).trim();
}

/** A method definition `name(params) {…}` in `code` (not a call: a `{` follows the parameters): its parameters and body, or null. */
function methodIn(code: string, name: string): { params: string; body: string } | null {
  const def = new RegExp(`(?:^|[\\s;{}])(?:async\\s+)?(?:function\\s+)?${name}\\s*(?:=\\s*(?:function\\s*)?)?\\(`, "g");
  for (const m of code.matchAll(def)) {
    const paren = m.index + m[0].length - 1;
    const closeParen = closeOf(code, paren);
    if (closeParen < 0) return null;
    const after = /^\s*(?:=>\s*)?\{/.exec(code.slice(closeParen));
    if (!after) continue; // a call (this.name(...)), not the definition
    const brace = closeParen + after[0].length - 1;
    const end = closeOf(code, brace);
    if (end < 0) throw new InvalidReply(`the method ${name} in the reply is not closed: it looks cut off. Reply with the body of ${name} only, complete and shorter`);
    return { params: code.slice(paren + 1, closeParen - 1).trim(), body: code.slice(brace + 1, end - 1) };
  }
  return null;
}

/**
 * The body as it goes inside the method: a method's own parameter becomes a local bound to `args`,
 * so its code runs as written. Positional parameters that are all the tool's argument names
 * (`search_trials(location, stage)`) are taken as those arguments; any other list is re-asked.
 */
function asBody(method: { params: string; body: string }, name: string, argNames: readonly string[]): string {
  const params = method.params.replace(/\s*=\s*\{\s*\}\s*$/, ""); // ({ a } = {})
  const body = dedent(method.body);
  if (!params || params === "args") return body;
  if (/^\{[\s\S]*\}$/.test(params)) return `const ${params} = args;\n${body}`;
  const names = params.split(",").map((p) => p.trim());
  if (names.length === 1 && isLocal(names[0]!) && !argNames.includes(names[0]!)) return `const ${names[0]} = args;\n${body}`; // (params) => params.x
  if (!names.every((n) => argNames.includes(n) && isLocal(n))) throw new InvalidReply(`${name} takes ONE object of named arguments, not (${params}); reply with its body only`);
  return `const { ${names.join(", ")} } = args;\n${body}`;
}

function dedent(text: string): string {
  const lines = text.replace(/^\s*\n/, "").trimEnd().split("\n");
  const pad = Math.min(...lines.filter((l) => l.trim()).map((l) => /^ */.exec(l)![0].length));
  return lines.map((l) => l.slice(Number.isFinite(pad) ? pad : 0)).join("\n");
}

/**
 * The tool body in a model's reply. Taken as meant: a fenced block (closed or not); a reply that
 * holds the method's definition (`name({ a }) {…}`, `function name(…) {…}`, alone or in a whole
 * class): its body, with its parameter bound to `args` (the rest is dropped: the scaffold's class is
 * the class). Re-asked (InvalidReply): a class without the method, brackets that never close (a
 * reply cut short), no code, or no return.
 */
export function bodyOf(reply: string, name: string, argNames: readonly string[] = []): string {
  const code = codeOf(reply);
  if (!code) throw new InvalidReply(`the reply has no code; reply with the body of ${name} in a \`\`\`js block`);
  const isClass = /^\s*(?:export\s+)?class\s+\w+/m.test(code) && /\bclass\s+\w+[^{]*\{/.test(code);
  const method = methodIn(code, name);
  let body: string;
  if (method) body = asBody(method, name, argNames);
  else if (isClass) throw new InvalidReply(`reply with the body of ${name} only, not a class (and that class has no method ${name})`);
  else {
    body = code;
    // the closing braces of the inner block and the method, written after the body as the skeleton
    // shows them: dropped (two at most), as meant
    for (let i = 0; i < 2 && brackets(body) === "extra" && /\}\s*$/.test(body); i++) body = body.replace(/\}\s*$/, "").trimEnd();
    const state = brackets(body);
    if (state === "open") throw new InvalidReply(`the body's brackets, strings or comments do not close: it looks cut off. Reply with the whole body of ${name}, complete and shorter`);
    if (state === "extra") throw new InvalidReply(`a closing bracket in the body of ${name} has no opening one; reply with the body's statements only`);
  }
  if (!/\breturn\b/.test(body)) throw new InvalidReply(`the body of ${name} never returns: end each path with return this._ok(...) or return this._fail("...")`);
  return body;
}

/** Whether a body's brackets balance ("ok"), leave some open ("open": a reply cut short), or close one never opened ("extra"). */
function brackets(body: string): "ok" | "open" | "extra" {
  const wrapped = `{${body}\n}`;
  const end = closeOf(wrapped, 0);
  return end === wrapped.length ? "ok" : end < 0 ? "open" : "extra";
}
