// Synth's fallback for a class that does not come out whole: one method per tool, as the original
// writes them, each checked in the sandbox as the class grows.
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect, test } from "vitest";
import { checkBundleIsolated } from "../../bridge/tools/check/check-isolated.js";
import { LlmClient, type LlmEvent } from "../../synth/llm/llm-client.js";
import { buildEnv, EnvPlan } from "../../synth/stages/build-env.js";
import { OpenAIFixture, type FixtureRequest } from "../openai-fixture.js";
import { GOOD_CODE, PLAN, synthResponder } from "../synth-fixture.js";

/** The fixture's good class, cut into its methods (each starts at two spaces of indent with its name). */
function methodsOf(code: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const m of code.matchAll(/^ {2}(\w+)\(\{[^\n]*\n[\s\S]*?^ {2}\}$/gm)) if (m[1] !== "constructor") out.set(m[1]!, m[0].replace(/^ {2}/gm, ""));
  return out;
}

test("a class that stays broken is written one method at a time: bad methods are re-asked with the reason, near-misses taken as meant", async () => {
  const methods = methodsOf(GOOD_CODE);
  expect([...methods.keys()]).toEqual(["list_appointments", "book_appointment", "cancel_appointment"]);
  const asked: string[] = [];
  const fixture = await OpenAIFixture.start((req: FixtureRequest) => {
    const system = req.messages[0]?.content ?? "";
    const attempt = req.messages.filter((m) => m.role === "assistant").length;
    const stage = /\[envscaler synth: (\w+)\]/.exec(system)?.[1];
    if (stage === "code") {
      // what a small model does to a whole class: a syntax error, a reply cut mid-method, a tool that throws
      return ["```js\nclass DentalClinicEnv { list_appointments({ patient_id }) { return {success: true, data: [} }\n```", "```js\nclass DentalClinicEnv {\n  list_appointments({ patient_id }) {\n    return", "```js\n" + GOOD_CODE.replace("if (!this.patients[patient_id]) return { success: false, error: \"no patient \" + patient_id };\n    return { success: true, data: Object", "if (!this.patientz[patient_id]) return { success: false };\n    return { success: true, data: Object") + "\n```"][Math.min(attempt, 2)]!;
    }
    if (stage === "method") {
      const name = /the tool (\w+)\./.exec(system)![1]!;
      asked.push(`${name}#${attempt}`);
      if (name === "list_appointments" && attempt === 0) return "```js\n" + GOOD_CODE + "\n```"; // a whole class again
      if (name === "book_appointment" && attempt === 0) return "```js\n" + methods.get(name)!.replace("this.patients[", "this.patientz[") + "\n```"; // throws on any call
      if (name === "cancel_appointment") return "```js\nfunction " + methods.get(name)! + "\n```"; // a declaration: taken as the method
      return "```js\n" + methods.get(name)! + "\n```";
    }
    return synthResponder(req);
  });
  const events: LlmEvent[] = [];
  try {
    const out = mkdtempSync(join(tmpdir(), "envscaler-synth-methods-"));
    const llm = new LlmClient({ endpoints: { default: { model: "fixture-model", baseURL: fixture.baseURL, apiKey: "test" } }, cacheDir: join(out, ".cache"), concurrency: 2, maxRetries: 0, onEvent: (e) => events.push(e) });
    const built = await buildEnv(llm, { topic: "dental clinic scheduling", description: "A dental clinic appointment book.", source_tasks: ["t"] }, { outDir: out, rounds: 4 });
    expect(built).toMatchObject({ code_mode: "methods", kept: true });
    expect(asked).toEqual(["list_appointments#0", "list_appointments#1", "book_appointment#0", "book_appointment#1", "cancel_appointment#0"]);
    const reasks = fixture.requests.filter((r) => /envscaler synth: method/.test(r.messages[0]!.content) && r.messages.length > 2).map((r) => r.messages.at(-1)!.content);
    expect(reasks[0]).toMatch(/reply with the method list_appointments only, not a class/);
    expect(reasks[1]).toMatch(/the method does not work: .*book_appointment throws TypeError/);
    expect(events.filter((e) => e.kind === "fallback").map((e) => e.stage)).toEqual(["code"]);
    const source = readFileSync(join(built.dir, "env.js"), "utf8");
    for (const name of methods.keys()) expect(source).toContain(`  ${name}({`);
    expect(source).not.toContain("not written yet");
    expect((await checkBundleIsolated(built.dir)).problems).toEqual([]);
    expect(JSON.parse(readFileSync(join(built.dir, "build-report.json"), "utf8"))).toMatchObject({ code_mode: "methods", kept: true });
  } finally {
    await fixture.close();
  }
});

test("a plan whose tool parameters name a type instead of a schema (as the 0.5B wrote) fails on that property", () => {
  const bad = { ...PLAN, tools: [{ ...PLAN.tools[0]!, parameters: { type: "object", properties: { patient_id: "string" } } }, ...PLAN.tools.slice(1)] };
  const r = EnvPlan.safeParse(bad);
  expect(r.success).toBe(false);
  expect(r.error!.issues.map((i) => i.path.join("."))).toEqual(["tools.0.parameters.properties.patient_id"]);
  expect(EnvPlan.safeParse(PLAN).success).toBe(true);
});

test("a class that uses a collection as an array (the 1.5B's `this.trials.filter`: TypeError, three re-asks) is re-asked with the expression named; the prompts say collections are objects", async () => {
  // as the model wrote it: no unknown-patient guard before the filter, so check's probe call reaches it
  const arrayUse = GOOD_CODE.replace(
    'if (!this.patients[patient_id]) return { success: false, error: "no patient " + patient_id };\n    return { success: true, data: Object.entries(this.appointments).filter(([, a]) => a.patient_id === patient_id).map(([id, a]) => ({ id, ...a })) };',
    "return { success: true, data: this.appointments.filter((a) => a.patient_id === patient_id) };",
  );
  expect(arrayUse).not.toBe(GOOD_CODE);
  const fixture = await OpenAIFixture.start((req: FixtureRequest) => {
    const system = req.messages[0]?.content ?? "";
    if (/\[envscaler synth: code\]/.test(system)) return "```js\n" + (req.messages.length > 2 ? GOOD_CODE : arrayUse) + "\n```";
    return synthResponder(req);
  });
  try {
    const out = mkdtempSync(join(tmpdir(), "envscaler-synth-hints-"));
    const llm = new LlmClient({ endpoints: { default: { model: "fixture-model", baseURL: fixture.baseURL, apiKey: "test" } }, cacheDir: join(out, ".cache"), concurrency: 1, maxRetries: 0 });
    const built = await buildEnv(llm, { topic: "dental clinic scheduling", description: "A dental clinic appointment book.", source_tasks: ["t"] }, { outDir: out, rounds: 4 });
    expect(built).toMatchObject({ code_mode: "class", kept: true });
    const code = fixture.requests.filter((r) => /envscaler synth: code/.test(r.messages[0]!.content));
    expect(code).toHaveLength(2);
    expect(code[0]!.messages[0]!.content).toContain("this.patients, this.appointments are objects keyed by record id, NOT arrays");
    const reask = code[1]!.messages.at(-1)!.content;
    expect(reask).toMatch(/list_appointments throws TypeError/);
    expect(reask).toContain("Likely cause: this.appointments is an object keyed by record id, not an array, so this.appointments.filter fails");
  } finally {
    await fixture.close();
  }
});

test("repair hints name only collections the source uses as arrays, and only for a class that raised", async () => {
  const { repairHints, collectionsOf } = await import("../../synth/stages/repair-hints.js");
  const state = { trials: { T1: { stage: "II" } }, sites: { S1: { city: "Boston" } }, count: 3, tags: ["a"], empty: {} };
  expect(collectionsOf(state)).toEqual(["trials", "sites"]);
  const src = "search({ stage }) { const out = this.trials.filter((t) => t.stage === stage); for (const s of this.sites) {} return Object.values(this.sites).length; }";
  const hints = repairHints(src, ["env.js: tool search throws TypeError when called with {}: not a function"], state);
  expect(hints).toHaveLength(2);
  expect(hints[0]).toContain("this.trials.filter fails");
  expect(hints[1]).toContain("for (... of this.sites) fails");
  expect(repairHints(src, ["class X has no method for tools y"], state)).toEqual([]);
  expect(repairHints("f() { return Object.values(this.trials); }", ["TypeError"], state)).toEqual([]);
});
