// Synth's scaffolded code mode (issue 33): the class, its helpers and each tool's argument checks
// come from the plan; the model writes only each tool's body. Replayed here with the failure shapes
// the real small models gave the code stage (docs/local-model.md).
import { spawn } from "node:child_process";
import { mkdtempSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect, test } from "vitest";
import { EnvSession } from "../../bridge/core/episode/env-session.js";
import { bundleStateBase } from "../../bridge/core/state/bundle-state.js";
import { checkBundleIsolated } from "../../bridge/tools/check/check-isolated.js";
import { BUNDLED_ENVS } from "../../envs/bundled.js";
import { loadBundle } from "../../envs/format/load-bundle.js";
import { InvalidReply, LlmClient, type LlmEvent } from "../../synth/llm/llm-client.js";
import { runSynth } from "../../synth/pipeline.js";
import { buildEnv, EnvPlan, manifestFor, writeBundle } from "../../synth/stages/build-env.js";
import { bodyOf, closeOf, scaffoldFor } from "../../synth/stages/scaffold.js";
import { fileSandboxHost } from "../helpers.js";
import { OpenAIFixture, type FixtureRequest, type Scripted } from "../openai-fixture.js";
import { GOOD_CODE, synthResponder } from "../synth-fixture.js";

const sandboxes = fileSandboxHost();

const tmp = () => mkdtempSync(join(tmpdir(), "envscaler-synth-scaffold-"));
const MINED = { topic: "dental clinic scheduling", description: "A dental clinic appointment book.", source_tasks: ["t"] };

/** A library plan: ids repeated in the records (zero-padded string keys, numeric member ids), an empty collection, two plain queries. */
const LIBRARY = EnvPlan.parse({
  env_name: "library",
  title: "A small library",
  introduction: "Books, members and loans.",
  rules: ["A book on loan cannot be lent again."],
  state_schema: {
    type: "object",
    properties: {
      books: { type: "object", additionalProperties: { type: "object", properties: { id: { type: "string" }, title: { type: "string" }, genre: { type: "string" }, available: { type: "boolean" } }, required: ["id", "title"] } },
      members: { type: "object", additionalProperties: { type: "object", properties: { id: { type: "integer" }, name: { type: "string" } }, required: ["id", "name"] } },
      loans: { type: "object", additionalProperties: { type: "object", properties: { id: { type: "string" }, book_id: { type: "string" }, member_id: { type: "integer" } } } },
    },
  },
  initial_state: {
    books: { B01: { id: "B01", title: "Dune", genre: "sf", available: true }, B02: { id: "B02", title: "Emma", genre: "novel", available: true } },
    members: { "1": { id: 1, name: "Ada" }, "2": { id: 2, name: "Bo" } },
    loans: {},
  },
  tools: [
    { name: "get_book", description: "One book by id.", kind: "query", parameters: { type: "object", properties: { book_id: { type: "string" } }, required: ["book_id"] } },
    { name: "list_books", description: "Every book.", kind: "query", parameters: { type: "object", properties: {} } },
    { name: "search_books", description: "Books of a genre.", kind: "query", parameters: { type: "object", properties: { genre: { type: "string", enum: ["sf", "novel"] } } } },
    { name: "checkout_book", description: "Lend a book to a member.", kind: "change", parameters: { type: "object", properties: { book_id: { type: "string" }, member_id: { type: "integer" } }, required: ["book_id", "member_id"] } },
    { name: "add_member", description: "Register a member.", kind: "change", parameters: { type: "object", properties: { name: { type: "string" } }, required: ["name"] } },
  ],
});

/** Bodies a test writes for the library's non-plain tools, each using a helper. */
const LIBRARY_BODIES = new Map([
  ["search_books", 'return this._ok(this._list("books", { genre }));'],
  [
    "checkout_book",
    'const book = this._get("books", book_id);\nif (!book) return this._notFound("books", book_id);\nif (!this._get("members", member_id)) return this._notFound("members", member_id);\nif (!book.available) return this._fail("on loan");\nbook.available = false;\nreturn this._ok(this._add("loans", { book_id, member_id }));',
  ],
  ["add_member", 'return this._ok(this._add("members", { name }));'],
]);

function libraryBundle(bodies: ReadonlyMap<string, string>): string {
  const dir = join(tmp(), "library");
  const scaffold = scaffoldFor(LIBRARY, "LibraryEnv");
  writeBundle(dir, manifestFor(LIBRARY, "library-v1", "LibraryEnv"), scaffold.source(new Map([...scaffold.filled, ...bodies])), [{ id: "library-probe", env_id: "library-v1", task: "Probe.", max_steps: 5 }]);
  return dir;
}

test("the scaffold alone (no LLM): the skeleton of a plan loads in the sandbox and passes check; plain lookups and listings are filled; the collections' ids follow the plan's", async () => {
  const scaffold = scaffoldFor(LIBRARY, "LibraryEnv");
  expect([...scaffold.filled.keys()]).toEqual(["get_book", "list_books"]);
  expect(scaffold.collections).toEqual([
    { name: "books", idField: "id", numericIds: false, prefix: "B", width: 2 },
    { name: "members", idField: "id", numericIds: true, prefix: "", width: 0 },
    { name: "loans", idField: "id", numericIds: false, prefix: "L", width: 0 },
  ]);
  // every body still to write: a stub that answers, so the skeleton passes the same gate a class does
  const bare = libraryBundle(new Map());
  // no problem and no warning: the helpers start with _, so they are not taken for tools without a schema
  const report = await checkBundleIsolated(bare);
  expect(report.problems).toEqual([]);
  expect(report.warnings.filter((w) => !/library-probe/.test(w))).toEqual([]); // the probe scenario has no checks, as synth's does before the scenario stage
  const source = readFileSync(join(bare, "env.js"), "utf8");
  expect(source).toContain("filled by the scaffold: a plain lookup by id");
  expect(source.match(/not written yet/g)).toHaveLength(3);
  // the prompt's skeleton: this tool's checks and the marker, the others by their arguments
  const skeleton = scaffold.skeleton("checkout_book", scaffold.filled);
  expect(skeleton).toContain("/* YOUR CODE: the body of this tool */");
  expect(skeleton).toContain('if (!(Number.isInteger(member_id))) return this._fail("member_id must be an integer");');
  expect(skeleton).toContain("  search_books(args = {}) { const { genre } = args; /* to be written */ }");
  expect(skeleton).toContain("  get_book(args = {}) { const { book_id } = args; /* written */ }");
  // argument names that cannot be locals (a reserved word, a dash) are read from args and still checked
  const odd = EnvPlan.parse({ ...LIBRARY, tools: [...LIBRARY.tools, { name: "find_by_class", description: "By class.", kind: "query", parameters: { type: "object", properties: { class: { type: "string" }, "max-results": { type: "integer" } }, required: ["class"] } }] });
  const oddSource = scaffoldFor(odd, "LibraryEnv").source(new Map([["find_by_class", 'return this._ok([args["class"], args["max-results"]]);']]));
  expect(oddSource).toContain('if (args["class"] === undefined || args["class"] === null) return this._fail("missing required argument class");');
  expect(oddSource).toContain('if (args["max-results"] !== undefined && !(Number.isInteger(args["max-results"]))) return this._fail("max-results must be an integer");');
  const oddDir = join(tmp(), "odd");
  writeBundle(oddDir, manifestFor(odd, "library-v1", "LibraryEnv"), oddSource, [{ id: "library-probe", env_id: "library-v1", task: "Probe.", max_steps: 5 }]);
  expect((await checkBundleIsolated(oddDir)).problems).toEqual([]);
  // a query with a filter, or whose name names no collection, is not plain
  expect(scaffoldFor({ ...LIBRARY, tools: [{ ...LIBRARY.tools[0]!, name: "get_member_loans" }, { ...LIBRARY.tools[1]!, name: "list_shelves" }, { ...LIBRARY.tools[0]!, kind: "change" }] }, "X").filled.size).toBe(0);
});

test("the skeleton of each bundled env's plan (its manifest read as a plan) passes the code stage's gate with every body still to write", async () => {
  const filled: string[] = [];
  for (const name of ["bank", "clinic", "helpdesk", "hotel", "library", "projects", "school", "warehouse"]) {
    const m = JSON.parse(readFileSync(join(BUNDLED_ENVS, name, "manifest.json"), "utf8")) as { name: string; introduction: string; state_schema?: Record<string, unknown>; default_state: Record<string, unknown>; tools: { function: { name: string; description: string; parameters: Record<string, unknown> } }[] };
    const tools = m.tools.map((t) => ({ name: t.function.name, description: t.function.description, kind: /^(get|list|search|find|view|show|check)_/.test(t.function.name) ? ("query" as const) : ("change" as const), parameters: { properties: {}, ...t.function.parameters } }));
    const plan = { env_name: name, title: m.name, introduction: m.introduction, rules: ["r"], state_schema: m.state_schema ?? { type: "object" }, initial_state: m.default_state, tools };
    const scaffold = scaffoldFor(plan, "ScaffoldEnv");
    const dir = join(tmp(), name);
    writeBundle(dir, manifestFor(EnvPlan.parse(plan), `${name}-v1`, "ScaffoldEnv"), scaffold.source(scaffold.filled), [{ id: `${name}-probe`, env_id: `${name}-v1`, task: "Probe.", max_steps: 5 }]);
    expect((await checkBundleIsolated(dir)).problems, name).toEqual([]);
    filled.push(...[...scaffold.filled.keys()].map((t) => `${name}.${t}`));
  }
  // the plain lookups and listings among their 167 tools (the rest have filters, rules or other arguments)
  expect(filled).toHaveLength(24);
  expect(filled).toContain("hotel.list_room_types");
  expect(filled).toContain("library.get_loan");
}, 120_000);

test("the scaffold's helpers and argument checks behave in the sandbox", async () => {
  const dir = libraryBundle(LIBRARY_BODIES);
  expect((await checkBundleIsolated(dir)).problems).toEqual([]);
  const bundle = loadBundle(dir);
  using s = await EnvSession.open(bundle, bundleStateBase(bundle), { seed: 1, sandboxes });
  const call = (name: string, args: Record<string, unknown>) => {
    const out = s.call(name, args);
    if (out.kind !== "result") throw new Error(`${name} threw ${JSON.stringify(out.error)}`);
    return JSON.parse(out.json) as { success: boolean; data?: unknown; error?: string };
  };
  expect(call("get_book", { book_id: "B01" })).toEqual({ success: true, data: { id: "B01", title: "Dune", genre: "sf", available: true } });
  // _get reads own keys only: ids that name an Object.prototype member are unknown, not a function
  expect(call("get_book", { book_id: "constructor" })).toEqual({ success: false, error: 'no record "constructor" in books' });
  expect(call("list_books", {})).toMatchObject({ success: true, data: [{ id: "B01" }, { id: "B02" }] });
  expect(call("search_books", { genre: "novel" })).toMatchObject({ success: true, data: [{ id: "B02" }] });
  expect(call("search_books", {})).toMatchObject({ data: [{ id: "B01" }, { id: "B02" }] }); // an unset filter field is no filter
  // the argument checks, before the body: required, JSON type, enum (the bridge validates too; these hold when called directly)
  expect(call("checkout_book", { member_id: 1 })).toEqual({ success: false, error: "missing required argument book_id" });
  expect(call("checkout_book", { book_id: "B01", member_id: "1" })).toEqual({ success: false, error: "member_id must be an integer" });
  expect(call("search_books", { genre: "poetry" })).toEqual({ success: false, error: 'genre must be one of "sf", "novel"' });
  // _add: the next free id after the plan's keys, with the id field set (a number where the plan's are)
  expect(call("checkout_book", { book_id: "B01", member_id: 1 })).toEqual({ success: true, data: { id: "L1", book_id: "B01", member_id: 1 } });
  expect(call("checkout_book", { book_id: "B01", member_id: 2 })).toEqual({ success: false, error: "on loan" });
  expect(call("checkout_book", { book_id: "B02", member_id: 9 })).toEqual({ success: false, error: "no record 9 in members" });
  expect(call("checkout_book", { book_id: "B02", member_id: 2 })).toMatchObject({ data: { id: "L2" } });
  expect(call("add_member", { name: "Cy" })).toEqual({ success: true, data: { id: 3, name: "Cy" } });
  const state = JSON.parse(s.stateJson());
  // a helper given a name that is no collection (a small model's singular) throws TypeError naming them, so the check catches it
  const typo = libraryBundle(new Map([...LIBRARY_BODIES, ["search_books", 'return this._ok(this._list("book", { genre }));']]));
  expect((await checkBundleIsolated(typo)).problems).toEqual([
    'env.js: tool search_books throws TypeError when called with {}: no collection "book" in the state; its collections: books, members, loans (no reference solution calls it; a tool answers bad input with {success: false, error})',
  ]);
  expect(Object.keys(state.loans)).toEqual(["L1", "L2"]);
  expect(state.members["3"]).toEqual({ id: 3, name: "Cy" });
  expect(state.books.B01.available).toBe(false);
});

test("bodyOf takes replies as meant (a fence, an unclosed fence, the method, a whole class) and re-asks a class without the method, a body cut short, no return", () => {
  const body = 'const a = this._get("appointments", appointment_id);\nif (!a) return this._notFound("appointments", appointment_id);\nreturn this._ok(a);';
  expect(bodyOf("```js\n" + body + "\n```", "cancel")).toBe(body);
  expect(bodyOf("Here it is:\n```javascript\n" + body + "\n```\nIt returns the record.", "cancel")).toBe(body);
  expect(bodyOf("```js\n" + body, "cancel")).toBe(body); // the fence never closed, the code did
  expect(bodyOf(body, "cancel")).toBe(body);
  // the method itself: its parameter bound to args, so its body runs as written
  expect(bodyOf("cancel({ appointment_id }) {\n  " + body.replace(/\n/g, "\n  ") + "\n}", "cancel")).toBe(`const { appointment_id } = args;\n${body}`);
  expect(bodyOf("function cancel(params) {\n  return this._ok(params.appointment_id);\n}", "cancel")).toBe("const params = args;\nreturn this._ok(params.appointment_id);");
  expect(bodyOf("cancel(args) { return this._ok(args); }", "cancel")).toBe("return this._ok(args);");
  // a whole class: the method's body, not a call to it
  const cls = "class X {\n  constructor(s) { this.s = s; }\n  other() { return this.cancel({ appointment_id: 1 }); }\n  cancel({ appointment_id }) {\n    return this._ok(`${appointment_id} {`);\n  }\n}";
  expect(bodyOf(cls, "cancel")).toBe("const { appointment_id } = args;\nreturn this._ok(`${appointment_id} {`);");
  const reask = (reply: string) => {
    try {
      bodyOf(reply, "cancel");
    } catch (e) {
      expect(e).toBeInstanceOf(InvalidReply);
      return (e as Error).message;
    }
    return "accepted";
  };
  expect(reask("class X {\n  other() { return 1; }\n}")).toMatch(/reply with the body of cancel only, not a class/);
  expect(reask("```js\nconst a = this._get(\"appointments\", id);\nif (!a) {\n  return this._fail(\"x\");\n")).toMatch(/brackets, strings or comments do not close: it looks cut off/);
  expect(reask("cancel({ id }) {\n  if (id) {\n    return 1;\n")).toMatch(/method cancel in the reply is not closed/);
  expect(reask("const a = 1; } return a;")).toMatch(/closing bracket in the body of cancel has no opening one/);
  // the block's and the method's closing braces copied after the body (as the skeleton shows them) are dropped
  expect(bodyOf("```js\nif (!x) {\n  return 1;\n}\nreturn 2;\n  }\n}\n```", "cancel")).toBe("if (!x) {\n  return 1;\n}\nreturn 2;");
  expect(reask("return 1; } } }")).toMatch(/has no opening one/);
  expect(reask("```js\nthis._fail('x');\n```")).toMatch(/never returns/);
  expect(reask("```js\n```")).toMatch(/no code/);
  expect(reask("cancel(a, b) { return a; }")).toMatch(/ONE object of named arguments/);
  // positional parameters that are the tool's argument names (a small model's habit) are those arguments
  expect(bodyOf("search(location, stage) { return this._ok([location, stage]); }", "search", ["location", "stage", "type"])).toBe("const { location, stage } = args;\nreturn this._ok([location, stage]);");
  expect(bodyOf("search(location) { return this._ok(location); }", "search", ["location"])).toBe("const { location } = args;\nreturn this._ok(location);");
  // brackets inside strings, templates and comments do not count
  const tricky = "{ const s = \"}\"; const t = '{'; const u = `${ { a: 1 }.a } }`; // }\n /* { */ }";
  expect(closeOf(tricky, 0)).toBe(tricky.length);
  expect(closeOf("{ `${ {` }", 0)).toBe(-1);
});

/** The fixture's good class, cut into its methods (each starts at two spaces of indent with its name). */
function methodsOf(code: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const m of code.matchAll(/^ {2}(\w+)\(\{[^\n]*\n[\s\S]*?^ {2}\}$/gm)) if (m[1] !== "constructor") out.set(m[1]!, m[0].replace(/^ {2}/gm, ""));
  return out;
}
const innerOf = (method: string) => method.slice(method.indexOf("{\n") + 2, method.lastIndexOf("}")).replace(/^ {2}/gm, "").trim();

/**
 * The body stage as the small models answer it: the 1.5B's `.filter` on a collection (TypeError on
 * the simplest arguments), then fixed; a whole class instead of a body; a reply cut at the token cap,
 * then one that stopped mid-body, then an unfenced body.
 */
function bodyResponder(asked: string[]): (req: FixtureRequest) => Scripted {
  const methods = methodsOf(GOOD_CODE);
  return (req) => {
    const system = req.messages[0]?.content ?? "";
    if (!/\[envscaler synth: body\]/.test(system)) return synthResponder(req);
    const name = /Write the BODY of the tool (\w+):/.exec(system)![1]!;
    const attempt = req.messages.filter((m) => m.role === "assistant").length;
    asked.push(`${name}#${attempt}`);
    if (name === "list_appointments") {
      if (attempt === 0) return "```js\nreturn this._ok(this.appointments.filter((a) => a.patient_id === patient_id));\n```";
      return '```js\nif (!this._get("patients", patient_id)) return this._notFound("patients", patient_id);\nreturn this._ok(this._list("appointments", { patient_id }));\n```';
    }
    if (name === "book_appointment") return "```js\n" + GOOD_CODE + "\n```";
    if (name === "cancel_appointment") {
      const inner = innerOf(methods.get(name)!);
      if (attempt === 0) return { content: "```js\n" + inner.slice(0, 40), finish_reason: "length" };
      if (attempt === 1) return "```js\n" + inner.slice(0, inner.indexOf('error: "no appointment'));
      return inner;
    }
    return 400;
  };
}

test("a scaffold run: the scripted model writes each tool's body, bad bodies re-asked with the exception, the arguments and the hint; the bundle passes check and the dual-agent test; code_mode scaffold", async () => {
  const asked: string[] = [];
  const fixture = await OpenAIFixture.start(bodyResponder(asked));
  try {
    const out = tmp();
    const llm = new LlmClient({ endpoints: { default: { model: "fixture-model", baseURL: fixture.baseURL, apiKey: "test" } }, cacheDir: join(out, ".cache"), concurrency: 1, maxRetries: 0 });
    const built = await buildEnv(llm, MINED, { outDir: out, rounds: 4, codeMode: "scaffold", codeFallback: "none" });
    expect(built).toMatchObject({ code_mode: "scaffold", kept: true, pass_rate: 1 });
    expect(asked).toEqual(["list_appointments#0", "list_appointments#1", "book_appointment#0", "cancel_appointment#0", "cancel_appointment#1", "cancel_appointment#2"]);
    // no whole-class or method call: the scaffold is the class
    expect(fixture.requests.filter((r) => /envscaler synth: (code|method)\]/.test(r.messages[0]!.content))).toHaveLength(0);
    const bodyAsks = fixture.requests.filter((r) => /envscaler synth: body\]/.test(r.messages[0]!.content));
    expect(bodyAsks.every((r) => r.max_tokens === 1024)).toBe(true);
    // the prompt shows the skeleton, the helpers, the state schema and the tool
    const first = bodyAsks[0]!.messages;
    expect(first[0]!.content).toContain('this._list("name", where?)');
    expect(first[1]!.content).toMatch(/State schema:\n\{"type":"object"/);
    expect(first[1]!.content).toContain("/* YOUR CODE: the body of this tool */");
    // the 1.5B's failure: the exact exception, the arguments that raised it, the hint naming the expression
    const filterReask = bodyAsks[1]!.messages.at(-1)!.content;
    expect(filterReask).toMatch(/the body does not work: env\.js: tool list_appointments throws TypeError when called with \{"patient_id":"x"\}/);
    expect(filterReask).toContain("Likely cause: this.appointments is an object keyed by record id, not an array, so this.appointments.filter fails");
    // a cut reply is re-asked by the client; a body that stopped mid-way by its brackets
    const cancelAsks = bodyAsks.filter((r) => /tool cancel_appointment:/.test(r.messages[0]!.content));
    expect(cancelAsks[1]!.messages.at(-1)!.content).toMatch(/cut off at the token limit \(max_tokens 1024\)/);
    expect(cancelAsks[2]!.messages.at(-1)!.content).toMatch(/brackets, strings or comments do not close/);
    expect(llm.usage.body).toMatchObject({ calls: 6, reasks: 3, truncated: 1, invalid: 0 });
    const source = readFileSync(join(built.dir, "env.js"), "utf8");
    expect(source).toContain('// Scaffolded by envscaler synth (code_mode "scaffold")');
    expect(source).toContain('return this._ok(this._list("appointments", { patient_id }));');
    expect(source).toContain("if (Object.values(this.appointments).some("); // the whole class's book_appointment, taken as meant
    expect(source).not.toContain("not written yet");
    expect(source).not.toContain("this.appointments.filter");
    expect((await checkBundleIsolated(built.dir)).problems).toEqual([]);
    const report = JSON.parse(readFileSync(join(built.dir, "build-report.json"), "utf8"));
    expect(report).toMatchObject({ code_mode: "scaffold", kept: true });
    // the dual-agent test ran the scaffolded tools: the booking made A2, the unknown id was refused by the body
    expect(report.cases[2]).toMatchObject({ tool: "book_appointment", result: "pass" });
    expect(report.cases[2].diff[0]).toMatchObject({ op: "add", path: "/appointments/A2", value: { patient_id: "P2", day: "friday", status: "booked" } });
    expect(JSON.parse(report.cases[1].observation)).toEqual({ success: false, error: "no appointment A99" });
  } finally {
    await fixture.close();
  }
});

test("--code-fallback scaffold: a whole class still broken after its re-asks is written in the scaffold; runSynth records code_mode scaffold in report.json", async () => {
  const asked: string[] = [];
  const bodies = bodyResponder(asked);
  const fixture = await OpenAIFixture.start((req) => (/\[envscaler synth: code\]/.test(req.messages[0]!.content) ? "```js\nclass DentalClinicEnv { constructor() { throw new Error('not ready'); } }\n```" : bodies(req)));
  const events: LlmEvent[] = [];
  try {
    const out = tmp();
    writeFileSync(join(out, "mined.json"), JSON.stringify({ envs: [MINED], rejected: [] }));
    const llm = new LlmClient({ endpoints: { default: { model: "m", baseURL: fixture.baseURL, apiKey: "k" } }, cacheDir: join(out, ".cache"), concurrency: 1, maxRetries: 0, onEvent: (e) => events.push(e) });
    const report = await runSynth(llm, { stage: "build", out, rounds: 4, codeMode: "whole", codeFallback: "scaffold" });
    expect(report.build!.envs).toEqual([{ env_id: "dental-clinic-v1", topic: MINED.topic, code_mode: "scaffold", pass_rate: 1, kept: true, cases: 4 }]);
    expect(JSON.parse(readFileSync(join(out, "report.json"), "utf8")).build.envs[0].code_mode).toBe("scaffold");
    expect(events.filter((e) => e.kind === "fallback").map((e) => [e.stage, e.message.replace(/ \(.*\)/, "")])).toEqual([["code", "the whole class failed; writing it as tool bodies in the plan's scaffold"]]);
    expect(llm.usage.code).toMatchObject({ calls: 3, invalid: 1 });
    expect(llm.usage.method).toBeUndefined();
  } finally {
    await fixture.close();
  }
});

test("`envscaler synth build --code-mode scaffold --code-fallback none` reaches the build; a scaffold whose bodies never work rejects the env with the reason", async () => {
  const out = tmp();
  mkdirSync(out, { recursive: true });
  writeFileSync(join(out, "mined.json"), JSON.stringify({ envs: [MINED], rejected: [] }));
  // every body throws on the simplest arguments, every time
  const fixture = await OpenAIFixture.start((req) => (/\[envscaler synth: body\]/.test(req.messages[0]!.content) ? "```js\nreturn this._ok(this.appointments.filter(() => true));\n```" : synthResponder(req)));
  const cli = join(import.meta.dirname, "..", "..", "cli", "main.ts");
  try {
    const args = ["--import", "tsx", cli, "synth", "build", "--out", out, "--base-url", fixture.baseURL, "--model", "m", "--rounds", "2", "--code-mode", "scaffold", "--code-fallback", "none", "--max-retries", "0", "--no-progress"];
    const child = spawn(process.execPath, args, { env: { ...process.env, OPENAI_API_KEY: "test" }, stdio: ["ignore", "pipe", "pipe"] });
    let stderr = "";
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    expect(await new Promise<number | null>((r) => child.on("exit", (c) => r(c))), stderr).toBe(1);
    const report = JSON.parse(readFileSync(join(out, "report.json"), "utf8"));
    expect(report.build.rejected).toEqual([{ item: MINED.topic, reason: expect.stringMatching(/^body: still invalid after 2 re-asks: the body does not work: .*list_appointments throws TypeError/) }]);
    // the flag reached the build: body calls only, three per tool tried (the first tool's), none of the whole class
    expect(report.usage.body).toMatchObject({ calls: 3, invalid: 1 });
    expect(report.usage.code).toBeUndefined();
    expect(fixture.requests.some((r) => /envscaler synth: method\]/.test(r.messages[0]!.content))).toBe(false);
  } finally {
    await fixture.close();
  }
}, 60_000);
