import { cpSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect, test } from "vitest";
import { LlmClient } from "../../synth/llm/llm-client.js";
import { checkExamples, checkHints } from "../../synth/stages/check-hints.js";
import { generateScenarios } from "../../synth/stages/scenarios.js";
import { FIXTURES } from "../helpers.js";
import { OpenAIFixture, type FixtureRequest } from "../openai-fixture.js";

/** A copy of the notes fixture bundle (the scenario stage writes its scenarios.json). */
function notesCopy(): { out: string; bundle: string } {
  const out = mkdtempSync(join(tmpdir(), "envscaler-hints-"));
  const bundle = join(out, "notes");
  cpSync(join(FIXTURES, "notes"), bundle, { recursive: true });
  return { out, bundle };
}

const fixtureLlm = (fixture: OpenAIFixture, out: string) =>
  new LlmClient({ endpoints: { default: { model: "fixture-model", baseURL: fixture.baseURL, apiKey: "test" } }, cacheDir: join(out, ".cache"), concurrency: 1, maxRetries: 0 });

/**
 * Scenario stages that vet several scenarios for real, probes and all: on this 2-core machine beside
 * other jobs the derived-scenario test took 104 s (it timed out at vitest's 60 s), the composed ones 19-64 s.
 */
const VETTING_TIMEOUT_MS = 240_000;

/** A scenario of the notes fixture that passes vetting. */
const GOOD = {
  task: "Bob (u2) wants a note titled todo that says call mom.",
  state_overrides: {},
  checklist: [{ description: "Bob has the todo note", source: "({final}) => Object.values(final.notes).some(n => n.user_id === 'u2' && n.title === 'todo' && n.body === 'call mom')" }],
  reference_actions: [{ name: "add_note", arguments: { user_id: "u2", title: "todo", body: "call mom" } }],
};

const STATE = {
  appointments: { A1: { patient_id: "P1", day: "monday", status: "booked" } },
  patients: { P1: { name: "Ann" } },
  next_id: 2,
};

test("each failing shape of the real 1.5B's checks gets a hint naming the check and the expression", () => {
  const hints = (source: string) => checkHints([source], STATE).join(" | ");
  // positional parameters: `final` is undefined and every check throws (the 2026-11-29 run)
  expect(hints("(initial, final) => final.appointments.A1.status === 'cancelled'")).toMatch(/check #0 is written \(initial, final\) => …, but a check is called with ONE object .*\(\{initial, final\}\) =>.*appointments, patients, next_id/);
  expect(hints("function (state) { return state.appointments.A1.status === 'x'; }")).toMatch(/written \(state\)/);
  expect(hints("state => state.appointments.A1")).toMatch(/check #0 reads state\.appointments: a check sees no state/);
  // a collection keyed by id used as an array
  expect(hints("({final}) => final.appointments.filter(a => a.day === 'tuesday').length === 1")).toMatch(/appointments is an object keyed by record id, not an array, so final\.appointments\.filter fails/);
  // a key the state does not have
  expect(hints("({final}) => final.state.appointments.A1.status === 'x'")).toMatch(/reads final\.state, which the state does not have: its keys are appointments, patients, next_id/);
  // statements without braces: the SyntaxError the 1.5B's other env had
  expect(hints("({final}) => const a = final.appointments.A1; return a.status === 'x'")).toMatch(/body is statements without braces/);
  // the prompt's own words copied in front of the function (2026-12-07)
  expect(hints("JavaScript arrow function ({initial, final}) => final.appointments.A1.status === 'x'")).toMatch(/check #0's source starts with the words "JavaScript arrow function": the source must be the function alone/);
  // names nothing in the check defines (2026-12-07: final.patient_records[patient.id])
  expect(hints("({initial, final}) => final.appointments[appt.id].status === initial.appointments[appt.id].status")).toMatch(/check #0 uses appt, which nothing in it defines/);
  // its own parameters, destructured names, locals and built-ins are not free
  expect(checkHints(["({initial, final}) => { const { A1 } = final.appointments; const xs = Object.values(final.appointments).filter((a) => a.day === 'x'); return xs.every(function (b) { return b.status === A1.status; }) && JSON.stringify(initial).length > 0 && 'a.b'.length > 0; }"], STATE)).toEqual([]);
  // the index is the check's own
  expect(checkHints(["({final}) => final.appointments.A1.status === 'x'", "(s) => true"], STATE).join(" ")).toMatch(/^check #1 /);
  // a well-formed check gets none
  expect(checkHints(["({initial, final}) => Object.values(final.appointments).length > Object.values(initial.appointments).length", "({final}) => { const a = final.appointments.A1; return a.status === 'x'; }"], STATE)).toEqual([]);
});

test("the examples shown in the prompt are checks of this env's state that do not pass before anything changed", () => {
  const examples = checkExamples(STATE);
  expect(examples.join("\n")).toMatch(/final\.appointments\['A1'\]\?\.patient_id/);
  const untouched = structuredClone(STATE);
  const moved = structuredClone(STATE);
  moved.appointments.A1.patient_id = "P2";
  // the test evaluates them as plain JS (trusted here: we wrote them); they compile and return booleans
  // eslint-disable-next-line @typescript-eslint/no-implied-eval
  const run = (src: string, initial: unknown, final: unknown) => (new Function(`return (${src})`)() as (x: unknown) => unknown)({ initial, final, actions: [], messages: [] });
  for (const e of examples) {
    expect(run(e, STATE, untouched)).toBe(false);
    expect(checkHints([e], STATE)).toEqual([]);
  }
  expect(run(examples[0]!, STATE, moved)).toBe(true);
  const added = structuredClone(STATE) as typeof STATE & { appointments: Record<string, unknown> };
  added.appointments.A2 = { patient_id: "P1", day: "friday", status: "booked" };
  expect(run(examples[1]!, STATE, added)).toBe(true);
  // a state without a collection of records still gets a usable example
  expect(checkExamples({ counter: 1 })).toHaveLength(1);
});

test("a scenario whose reference solution only reads is told so by vetting", async () => {
  const { vetScenario } = await import("../../synth/stages/scenarios.js");
  const { Scenario } = await import("../../envs/format/bundle-schema.js");
  const scenario = Scenario.parse({
    id: "notes-9", env_id: "notes-v1", mode: "task", task: "Give Bob a todo note.",
    checks: [{ kind: "js", description: "Bob has a todo", source: "({final}) => Object.values(final.notes).some(n => n.user_id === 'u2')" }],
    reference_actions: [{ name: "list_notes", arguments: { user_id: "u2" } }],
  });
  const problem = await vetScenario(join(FIXTURES, "notes"), scenario, mkdtempSync(join(tmpdir(), "envscaler-vet-")));
  expect(problem).toMatch(/the reference solution scores 0, not 1\.0.*None of the reference_actions \(list_notes\) changes the state/);
  // one that writes gets no such hint
  const writes = Scenario.parse({ ...scenario, reference_actions: [{ name: "add_note", arguments: { user_id: "u2", title: "todo", body: "x" } }], checks: [{ kind: "js", description: "never", source: "({final}) => final.notes.n9 !== undefined" }] });
  expect(await vetScenario(join(FIXTURES, "notes"), writes, mkdtempSync(join(tmpdir(), "envscaler-vet-")))).not.toMatch(/None of the reference_actions/);
});

test("a scenario whose checks take positional parameters is re-asked with the argument's shape, then kept", async () => {
  const { out, bundle } = notesCopy();
  // the real shape: the same check, with (initial, final) for parameters
  const positional = { ...GOOD, checklist: [{ ...GOOD.checklist[0]!, source: GOOD.checklist[0]!.source.replace("({final})", "(initial, final)") }] };
  const fixture = await OpenAIFixture.start((req: FixtureRequest) => "```json\n" + JSON.stringify(/were rejected:/.test(req.messages.at(-1)!.content) ? GOOD : positional) + "\n```");
  try {
    const llm = fixtureLlm(fixture, out);
    const { kept, rejected } = await generateScenarios(llm, bundle, { perEnv: 1, conversationEvery: 0 });
    expect(rejected).toEqual([]);
    expect(kept.map((s) => s.id)).toEqual(["notes-1"]);
    expect(fixture.requests).toHaveLength(2);
    // the prompt shows checks written for this env's state
    expect(fixture.requests[0]!.messages[0]!.content).toMatch(/called with ONE object \{initial, final, actions, messages\}[\s\S]*final\.notes\['n1'\]\?\.user_id/);
    // the re-ask: the request again without the rejected reply (the 1.5B copied its own reply back),
    // with vetting's own report and the hint naming the check and its parameters
    expect(fixture.requests[1]!.messages.map((m) => m.role)).toEqual(["system", "user"]);
    const reask = fixture.requests[1]!.messages.at(-1)!.content;
    expect(reask.startsWith(fixture.requests[0]!.messages[1]!.content)).toBe(true);
    expect(reask).toMatch(/Earlier replies to this request were rejected:\n1\. /);
    expect(reask).toMatch(/the reference solution scores 0(\.\d+)?, not 1\.0: #0 "Bob has the todo note" \(TypeError/);
    expect(reask).toMatch(/Likely cause: check #0 is written \(initial, final\) => …, but a check is called with ONE object/);
    expect(JSON.parse(readFileSync(join(bundle, "scenarios.json"), "utf8"))[0].checks[0].source).toBe(GOOD.checklist[0]!.source);
  } finally {
    await fixture.close();
  }
});

test("a task scenario the model cannot get through vetting is derived from a call the dual-agent test verified: the model writes only the task text", async () => {
  const { out, bundle } = notesCopy();
  const call = { name: "add_note", arguments: { user_id: "u2", title: "todo", body: "call mom" } };
  const cases = [
    { round: 1, tool: "list_notes", arguments: { user_id: "u1" }, case_type: "positive", result: "pass", diff: [] },
    { round: 2, tool: "delete_note", arguments: { note_id: "n1" }, case_type: "positive", result: "fail", diff: [{ op: "remove", path: "/notes/n1" }] },
    { round: 3, tool: call.name, arguments: call.arguments, case_type: "positive", result: "warning", diff: [{ op: "add", path: "/notes/n2" }] },
  ];
  writeFileSync(join(bundle, "build-report.json"), JSON.stringify({ env_id: "notes-v1", cases }));
  // the real 1.5B's shape: checks that already pass, every time
  const useless = { task: "Keep user u1's notes as they are.", state_overrides: {}, checklist: [{ description: "notes exist", source: "({final}) => final.notes !== undefined" }], reference_actions: [{ name: "list_notes", arguments: { user_id: "u1" } }] };
  const fixture = await OpenAIFixture.start((req: FixtureRequest) => {
    if (!req.messages[0]!.content.includes("You write the task text")) return "```json\n" + JSON.stringify(useless) + "\n```";
    // the verified call (u2): first a task that leaves out a value the call needs, then one that
    // gives them all; the same call for the other user (u1, a variant): all of them at once
    const asked = req.messages[1]!.content;
    if (asked.includes('"user_id":"u1"') && asked.includes('"user_id":"u2"')) return JSON.stringify({ task: "Bob (u2) and Ann (u1) each want a new note titled todo that says call mom." });
    if (asked.includes('"user_id":"u1"')) return JSON.stringify({ task: "Ann (user u1) wants a new note titled todo that says call mom." });
    const task = /were rejected:/.test(req.messages.at(-1)!.content) ? "Bob (user u2) wants a new note titled todo that says call mom." : "Bob (user u2) wants a new note titled todo.";
    return JSON.stringify({ task });
  });
  try {
    const llm = fixtureLlm(fixture, out);
    const { kept, rejected, derived } = await generateScenarios(llm, bundle, { perEnv: 4, conversationEvery: 0 });
    expect(derived).toEqual(["notes-1", "notes-2", "notes-3"]);
    // scenario 1: derived from the one positive, not failed, state-changing call; scenario 2: from
    // the same call for the other user of the state (u1); scenario 3: both calls, one task;
    // scenario 4: no solution left
    expect(kept.map((s) => s.id)).toEqual(["notes-1", "notes-2", "notes-3"]);
    const u1 = { name: "add_note", arguments: { ...call.arguments, user_id: "u1" } };
    expect(kept[2]).toMatchObject({ task: "Bob (u2) and Ann (u1) each want a new note titled todo that says call mom.", reference_actions: [call, u1] });
    // its checks are on what both calls left: the two notes and the counter
    expect(kept[2]!.checks.map((c) => c.description)).toEqual([expect.stringMatching(/^\/notes\/n2 is \{"user_id":"u2"/), "/next_note is 4", expect.stringMatching(/^\/notes\/n3 is \{"user_id":"u1"/), "the final state equals the state the reference actions produce"]);
    expect(kept[1]).toMatchObject({ task: "Ann (user u1) wants a new note titled todo that says call mom.", reference_actions: [{ name: "add_note", arguments: { ...call.arguments, user_id: "u1" } }] });
    expect(kept[0]).toMatchObject({ mode: "task", task: "Bob (user u2) wants a new note titled todo that says call mom.", reference_actions: [call] });
    expect(kept[0]!.checks.map((c) => c.kind)).toEqual(["js", "js", "reference_state"]);
    expect(kept[0]!.checks[0]).toMatchObject({ description: expect.stringMatching(/^\/notes\/n2 is \{"user_id":"u2"/) });
    expect(rejected).toHaveLength(1);
    expect(rejected[0]!.reason).toMatch(/^scenario: still invalid after 2 re-asks: .*doing nothing already scores 1\.0/);
    // the task text was re-asked for the value it left out, without the rejected reply (then one ask for the variant)
    const taskAsks = fixture.requests.filter((r) => r.messages[0]!.content.includes("You write the task text"));
    expect(taskAsks).toHaveLength(4);
    expect(taskAsks[1]!.messages.at(-1)!.content).toMatch(/the task does not say "call mom"/);
    // what was kept passes vetting as it stands (envscaler check, the probes, two seeds)
    const { vetScenario } = await import("../../synth/stages/scenarios.js");
    for (const s of kept) expect(await vetScenario(bundle, s, mkdtempSync(join(tmpdir(), "envscaler-vet-")))).toBeNull();
    // --scenario-fallback none: nothing is derived
    const again = join(out, "again");
    cpSync(bundle, again, { recursive: true });
    const none = await generateScenarios(llm, again, { perEnv: 1, conversationEvery: 0, fallback: "none" });
    expect(none.kept).toEqual([]);
  } finally {
    await fixture.close();
  }
}, VETTING_TIMEOUT_MS);

test("a scenario with the same reference solution as one already kept is re-asked: the same solution is the same task", async () => {
  const { out, bundle } = notesCopy();
  // the real 1.5B's shape: the task kept first, written again in other words
  const fixture = await OpenAIFixture.start(() => "```json\n" + JSON.stringify({ ...GOOD, task: "Add Bob's todo note: call mom." }) + "\n```");
  try {
    const llm = fixtureLlm(fixture, out);
    const { kept, rejected } = await generateScenarios(llm, bundle, { perEnv: 2, conversationEvery: 0 });
    expect(kept.map((s) => s.id)).toEqual(["notes-1"]);
    expect(rejected.map((r) => r.reason)).toEqual([expect.stringMatching(/its reference_actions are those of scenario notes-1 \("Add Bob's todo note: call mom\."\): a scenario with the same solution is the same task/)]);
  } finally {
    await fixture.close();
  }
});

test("a verified call's record variants: each argument naming a record, one at a time, set to the collection's other keys (at most 4 a call)", async () => {
  const { recordVariants } = await import("../../synth/stages/derived-scenario.js");
  const state = {
    patients: { P1: { name: "Ann" }, P2: { name: "Bo" }, P3: { name: "Cy" } },
    trials: { T1: { open: true }, T2: { open: false }, T3: { open: true }, T4: { open: true } },
    tags: ["x"],
    next_id: 3,
  };
  const call = { name: "enroll", arguments: { patient_id: "P1", trial_id: "T1", note: "P2 asked", count: 1 } };
  const variants = recordVariants([call], state);
  // P2, P3 for the patient, then T2, T3 for the trial: 4, the cap (T4 is not tried)
  expect(variants.map((v) => [v.arguments.patient_id, v.arguments.trial_id])).toEqual([["P2", "T1"], ["P3", "T1"], ["P1", "T2"], ["P1", "T3"]]);
  // a value that is not a key (note) and a non-string (count) are left as they are; nothing repeats the call itself
  for (const v of variants) expect(v.arguments).toMatchObject({ note: "P2 asked", count: 1 });
  // a variant already among the calls is not made again
  expect(recordVariants([call, { name: "enroll", arguments: { ...call.arguments, patient_id: "P2" } }], state).filter((v) => v.arguments.patient_id === "P2" && v.arguments.trial_id === "T1")).toHaveLength(0);
});

test("a task that names none of the values its reference solution uses is re-asked: an agent could not know what to do", async () => {
  const { out, bundle } = notesCopy();
  // the real 1.5B's shape (2026-12-07): "Add eligibility to patient records" for a solution on two named patients
  const fixture = await OpenAIFixture.start((req: FixtureRequest) => {
    const again = /were rejected:/.test(req.messages.at(-1)!.content);
    return "```json\n" + JSON.stringify(again ? GOOD : { ...GOOD, task: "Add a note for the user." }) + "\n```";
  });
  try {
    const { kept } = await generateScenarios(fixtureLlm(fixture, out), bundle, { perEnv: 1, conversationEvery: 0 });
    expect(kept.map((s) => s.task)).toEqual([GOOD.task]);
    const reask = fixture.requests[1]!.messages.at(-1)!.content;
    expect(reask).toMatch(/the task names none of the values its reference_actions use \("u2", "todo", "call mom"\)/);
  } finally {
    await fixture.close();
  }
});

test("derived solutions: every candidate call alone, then the first four pairs of them in candidate order", async () => {
  const { derivedSolutions } = await import("../../synth/stages/derived-scenario.js");
  const c = ["a", "b", "c", "d"].map((name) => ({ name, arguments: {} }));
  expect(derivedSolutions(c).map((s) => s.map((x) => x.name).join("+"))).toEqual(["a", "b", "c", "d", "a+b", "a+c", "a+d", "b+c"]);
  expect(derivedSolutions(c.slice(0, 1)).map((s) => s.length)).toEqual([1]);
});

/** The notes fixture's verified add_note for u2, and the same call for u1 (a record variant). */
const ADD_U2 = { name: "add_note", arguments: { user_id: "u2", title: "todo", body: "call mom" } };
const ADD_U1 = { name: "add_note", arguments: { ...ADD_U2.arguments, user_id: "u1" } };

/** A task-text asker that writes a good text for one call and, for two, never names the second record (the 1.5B's run 11). */
function pairBlindWriter(texts: { one: (asked: string) => string; pair: string }): (req: FixtureRequest) => string {
  return (req) => {
    // the model's own whole scenarios: never JSON (cheap to reject: no vetting runs)
    if (!req.messages[0]!.content.includes("You write the task text")) return "I cannot write that scenario.";
    const asked = req.messages[1]!.content;
    return JSON.stringify({ task: /\nthen /.test(asked) ? texts.pair : texts.one(asked) });
  };
}

test("a two-call task whose text the model never completes is composed from the kept one-call tasks' texts, vetted, and the report says so", async () => {
  const { runSynth } = await import("../../synth/pipeline.js");
  const out = mkdtempSync(join(tmpdir(), "envscaler-composed-"));
  const bundle = join(out, "build", "notes");
  cpSync(join(FIXTURES, "notes"), bundle, { recursive: true });
  writeFileSync(join(bundle, "build-report.json"), JSON.stringify({ env_id: "notes-v1", cases: [{ round: 1, tool: ADD_U2.name, arguments: ADD_U2.arguments, case_type: "positive", result: "pass", diff: [{ op: "add", path: "/notes/n2" }] }] }));
  writeFileSync(join(out, "report.json"), JSON.stringify({ build: { envs: [{ env_id: "notes-v1", topic: "notes", code_mode: "class", pass_rate: 1, kept: true, cases: 1 }], rejected: [] }, usage: {} }));
  const fixture = await OpenAIFixture.start(
    pairBlindWriter({
      one: (asked) => (asked.includes('"user_id":"u1"') ? "Ann (user u1) wants a new note titled todo that says call mom." : "Bob (user u2) wants a new note titled todo that says call mom."),
      pair: "Bob (user u2) and the other user each want a new note titled todo that says call mom.",
    }),
  );
  try {
    const report = await runSynth(fixtureLlm(fixture, out), { stage: "scenarios", out, perEnv: 3, conversationEvery: 0 });
    const scenarios = report.scenarios!;
    expect(scenarios.envs).toEqual({ "notes-v1": ["notes-1", "notes-2", "notes-3"] });
    expect(scenarios.derived).toEqual({ "notes-v1": ["notes-1", "notes-2", "notes-3"] });
    expect(scenarios.composed).toEqual({ "notes-v1": { "notes-3": ["notes-1", "notes-2"] } });
    expect(scenarios.check).toEqual({ "notes-v1": [] });
    // the pair's text was asked for 3 times, each missing u1, before it was composed
    const pairAsks = fixture.requests.filter((r) => r.messages[0]!.content.includes("You write the task text") && /\nthen /.test(r.messages[1]!.content));
    expect(pairAsks).toHaveLength(3);
    expect(pairAsks[2]!.messages.at(-1)!.content).toMatch(/the task does not say "u1"/);
    // the composed text: the kept texts in call order, each a sentence
    const served = JSON.parse(readFileSync(join(out, "envs", "notes", "scenarios.json"), "utf8"));
    expect(served[2]).toMatchObject({
      task: "First: Bob (user u2) wants a new note titled todo that says call mom. Then: Ann (user u1) wants a new note titled todo that says call mom.",
      reference_actions: [ADD_U2, ADD_U1],
    });
  } finally {
    await fixture.close();
  }
}, VETTING_TIMEOUT_MS);

test("a composed two-call task is vetted like any derived scenario: a pair whose second call undoes the first is not kept", async () => {
  const { out, bundle } = notesCopy();
  // a tool that pins a note, or unpins it when it is pinned: two verified pins of the same note,
  // each a task alone, together leave the note as it was
  const envJs = join(bundle, "env.js");
  writeFileSync(envJs, readFileSync(envJs, "utf8").replace("  roll() {", "  pin_note({ note_id, reason }) {\n    const n = this.notes[note_id];\n    if (!n) return { success: false, error: `no note ${note_id}` };\n    if (n.pinned) { delete n.pinned; return { success: true, data: { pinned: false } }; }\n    n.pinned = reason;\n    return { success: true, data: { pinned: true } };\n  }\n  roll() {"));
  const manifest = JSON.parse(readFileSync(join(bundle, "manifest.json"), "utf8"));
  manifest.tools.push({ type: "function", function: { name: "pin_note", description: "Pin a note, or unpin it when pinned.", parameters: { type: "object", properties: { note_id: { type: "string" }, reason: { type: "string" } }, required: ["note_id", "reason"] } } });
  writeFileSync(join(bundle, "manifest.json"), JSON.stringify(manifest));
  const pin = (reason: string) => ({ name: "pin_note", arguments: { note_id: "n1", reason } });
  const cases = ["tidy", "urgent"].map((reason, i) => ({ round: i + 1, tool: "pin_note", arguments: pin(reason).arguments, case_type: "positive", result: "pass", diff: [{ op: "add", path: "/notes/n1/pinned" }] }));
  writeFileSync(join(bundle, "build-report.json"), JSON.stringify({ env_id: "notes-v1", cases }));
  const fixture = await OpenAIFixture.start(
    pairBlindWriter({ one: (asked) => `Pin note n1 because it is ${asked.includes('"reason":"urgent"') ? "urgent" : "tidy"}.`, pair: "Pin note n1 because it is tidy." }),
  );
  try {
    const { kept, rejected, derived, composed } = await generateScenarios(fixtureLlm(fixture, out), bundle, { perEnv: 3, conversationEvery: 0 });
    expect(kept.map((s) => s.reference_actions)).toEqual([[pin("tidy")], [pin("urgent")]]);
    expect(derived).toEqual(["notes-1", "notes-2"]);
    expect(composed).toEqual({});
    // the third: composed (it names every value), then refused by vetting, which says the text was composed
    expect(rejected.map((r) => r.item)).toEqual(["notes-v1 scenario 3"]);
    expect(rejected[0]!.reason).toMatch(/derived from a tested call: pin_note \+ pin_note \(its task text composed from notes-1, notes-2\): .*(doing nothing already scores 1\.0|already pass before the agent does anything)/);
  } finally {
    await fixture.close();
  }
}, VETTING_TIMEOUT_MS);

test("a composed task text: the kept one-call task texts in call order; none unless every call has one", async () => {
  const { composedTask } = await import("../../synth/stages/derived-scenario.js");
  const { Scenario } = await import("../../envs/format/bundle-schema.js");
  const one = (id: string, task: string, call: typeof ADD_U2, mode: "task" | "conversation" = "task") =>
    Scenario.parse({ id, env_id: "notes-v1", mode, task, ...(mode === "conversation" ? { user_instructions: "You are Ann." } : {}), checks: [{ kind: "reference_state" }], reference_actions: [call] });
  const kept = [one("notes-1", "  Ann (u1) wants a todo note saying call mom  ", ADD_U1), one("notes-2", "Bob (u2) wants a todo note saying call mom!", ADD_U2)];
  expect(composedTask([ADD_U2, ADD_U1], kept)).toEqual({ task: "First: Bob (u2) wants a todo note saying call mom! Then: Ann (u1) wants a todo note saying call mom.", from: ["notes-2", "notes-1"] });
  // one call: nothing to compose; a call no kept task solves alone: no text
  expect(composedTask([ADD_U2], kept)).toBeNull();
  expect(composedTask([ADD_U2, { ...ADD_U1, arguments: { ...ADD_U1.arguments, title: "other" } }], kept)).toBeNull();
  // a conversation's task text is not the request (its user instructions are), so it is not used
  expect(composedTask([ADD_U2, ADD_U1], [kept[1]!, one("notes-3", "Ann wants a note.", ADD_U1, "conversation")])).toBeNull();
});
