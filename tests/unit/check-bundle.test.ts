import { execFile } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { expect, test } from "vitest";
import { checkBundle } from "../../bridge/tools/check/check-bundle.js";
import { checkBundleIsolated } from "../../bridge/tools/check/check-isolated.js";
import { BundleLoadError, loadBundle } from "../../envs/format/load-bundle.js";
import { FIXTURES } from "../helpers.js";

const run = promisify(execFile);

/** A copy of the notes fixture with `edit` applied to its parsed files. */
function brokenCopy(edit: (files: { manifest: any; scenarios: any[]; source: string }) => void): string {
  const dir = join(mkdtempSync(join(tmpdir(), "envscaler-check-")), "notes");
  cpSync(join(FIXTURES, "notes"), dir, { recursive: true });
  const files = {
    manifest: JSON.parse(readFileSync(join(dir, "manifest.json"), "utf8")),
    scenarios: JSON.parse(readFileSync(join(dir, "scenarios.json"), "utf8")),
    source: readFileSync(join(dir, "env.js"), "utf8"),
  };
  edit(files);
  writeFileSync(join(dir, "manifest.json"), JSON.stringify(files.manifest));
  writeFileSync(join(dir, "scenarios.json"), JSON.stringify(files.scenarios));
  writeFileSync(join(dir, "env.js"), files.source);
  return dir;
}

async function problems(dir: string): Promise<string[]> {
  try {
    return (await checkBundle(loadBundle(dir))).problems;
  } catch (e) {
    if (e instanceof BundleLoadError) return e.problems.map((p) => p.message);
    throw e;
  }
}

test("the fixture bundle passes", async () => {
  expect(await problems(join(FIXTURES, "notes"))).toEqual([]);
});

test.each([
  ["a malformed env id", (f: any) => (f.manifest.id = "Notes"), /env ids look like name-v1/],
  ["a tool with no method", (f: any) => f.manifest.tools.push({ type: "function", function: { name: "ghost", description: "", parameters: { type: "object" } } }), /no method for tools ghost/],
  ["an unlisted_call_method the class lacks", (f: any) => (f.manifest.unlisted_call_method = "_ghost"), /class NotesEnv has no method _ghost \(the manifest's unlisted_call_method\)/],
  ["an unlisted_call_method that is a tool name", (f: any) => (f.manifest.unlisted_call_method = "add_note"), /unlisted_call_method add_note is also a tool name/],
  ["an action method the class lacks", (f: any) => (f.manifest.action_methods = { start: "_ghost_start", end: "_ghost_end" }), /class NotesEnv has no method _ghost_start \(the manifest's action_methods.start\)\n.*no method _ghost_end \(the manifest's action_methods.end\)/],
  ["an action method that is a tool name", (f: any) => (f.manifest.action_methods = { start: "add_note", end: "add_note" }), /action method add_note is also a tool name/],
  ["a class that does not load", (f: any) => (f.source = "class NotesEnv { constructor() { throw new Error('nope') } }"), /does not load in the sandbox: Error: nope/],
  ["a syntax error in the class", (f: any) => (f.source = "class NotesEnv {"), /does not load/],
  ["a state that breaks the state schema", (f: any) => (f.scenarios[0].state_overrides = { next_note: "two" }), /notes-1: initial state does not fit state_schema: \/next_note must be integer/],
  ["a check that does not compile", (f: any) => f.scenarios[0].checks.push({ description: "x", source: "({final}) => {" }), /check #3 does not compile/],
  ["a reference that does not solve the task", (f: any) => f.scenarios[0].reference_actions.pop(), /reference solution scores 0.6667, not 1.0: #1 "Is n1 deleted\?"/],
  ["checks that pass on the untouched state", (f: any) => (f.scenarios[0].checks = [{ description: "always", source: "() => true" }]), /doing nothing already scores 1.0/],
  ["a reference action with bad arguments", (f: any) => (f.scenarios[0].reference_actions[0].arguments.colour = "red"), /reference action rejected: .*unexpected argument 'colour'/],
  ["a scenario for another env", (f: any) => (f.scenarios[1].env_id = "other-v1"), /not this bundle's id/],
])("reports %s", async (_, edit, expected) => {
  const found = await problems(brokenCopy(edit));
  expect(found.join("\n")).toMatch(expected);
});

test("the CLI exits non-zero with the problems listed", async () => {
  const dir = brokenCopy((f) => f.scenarios[0].reference_actions.pop());
  const cli = join(import.meta.dirname, "..", "..", "cli", "main.ts");
  const err = await run("npx", ["tsx", cli, "check", dir]).catch((e) => e);
  expect(err.code).toBe(1);
  expect(err.stdout).toMatch(/✗ notes-v1/);
  expect(err.stdout).toMatch(/0\/1 bundles passed/);
  const ok = await run("npx", ["tsx", cli, "check", FIXTURES]);
  expect(ok.stdout).toMatch(/1\/1 bundles passed/);
});

test("reference actions the env refuses are allowed but reported as a warning", async () => {
  const dir = brokenCopy((f) => f.scenarios[0].reference_actions.unshift({ name: "delete_note", arguments: { note_id: "n99" } }));
  const report = await checkBundle(loadBundle(dir));
  expect(report.problems).toEqual([]);
  expect(report.warnings.join("\n")).toMatch(/refused \(\{success: false\}\): delete_note\(\{"note_id":"n99"\}\)/);
});

test("a bundle whose env hangs in an uninterruptible builtin fails alone; the check goes on", async () => {
  const dir = join(mkdtempSync(join(tmpdir(), "envscaler-check-")), "hostile");
  cpSync(join(FIXTURES, "..", "hostile", "hostile"), dir, { recursive: true });
  const scenarios = JSON.parse(readFileSync(join(dir, "scenarios.json"), "utf8"));
  scenarios[0].reference_actions = [{ name: "native_hang", arguments: {} }];
  writeFileSync(join(dir, "scenarios.json"), JSON.stringify(scenarios));
  const started = Date.now();
  const report = await checkBundleIsolated(dir, { hardStopGraceMs: 200 });
  // the fuel checks stop the builtin at its deadline inside its sandbox, so the check goes on to
  // probe the other tools, and reports each hostile one as well
  expect(report.problems[0]).toMatch(/^scenarios.json hostile-1: the reference solution scores 0, not 1.0: env_timeout: call: exceeded the 300 ms deadline/);
  expect(report.problems).toEqual(expect.arrayContaining([expect.stringMatching(/^env.js: tool spin, called with \{\}, ended its sandbox: env_timeout/)]));
  // stopped well before the builtin would have returned on its own (~2 s for 1.5e7 elements)
  expect(Date.now() - started).toBeLessThan(10_000);
  // and the hostile bundle took nothing else with it
  expect((await checkBundleIsolated(join(FIXTURES, "notes"))).problems).toEqual([]);
});

test("isolated checks report bundle load errors and env problems like in-thread ones", async () => {
  const bad = brokenCopy((f) => (f.manifest.id = "Notes"));
  expect((await checkBundleIsolated(bad)).problems.join("\n")).toMatch(/env ids look like name-v1/);
  const unsolved = brokenCopy((f) => f.scenarios[0].reference_actions.pop());
  expect((await checkBundleIsolated(unsolved)).problems.join("\n")).toMatch(/reference solution scores 0.6667/);
});

test("the examples in docs/env-format.md form one bundle that passes check", async () => {
  const doc = readFileSync(join(import.meta.dirname, "..", "..", "docs", "env-format.md"), "utf8");
  const block = (heading: string, lang: string) => new RegExp("```" + lang + "\\n([\\s\\S]*?)```").exec(doc.slice(doc.indexOf(heading)))![1]!;
  const dir = join(mkdtempSync(join(tmpdir(), "envscaler-doc-")), "library");
  mkdirSync(dir);
  writeFileSync(join(dir, "manifest.json"), block("## manifest.json", "json"));
  writeFileSync(join(dir, "env.js"), block("## env.js", "js"));
  writeFileSync(join(dir, "scenarios.json"), block("## scenarios.json", "json"));
  const report = await checkBundle(loadBundle(dir));
  expect(report.problems).toEqual([]);
  expect(report).toMatchObject({ tools: 3, scenarios: 1 });
});

test("a syntax error in env.js is reported with its line and column and the line itself", async () => {
  const dir = brokenCopy((f) => (f.source = f.source.replace("return { success: true, data:", "return { success: true,, data:")));
  const found = (await problems(dir)).join("\n");
  expect(found).toMatch(/^env\.js:9:\d+: the env does not load in the sandbox: SyntaxError: /);
  expect(found).toMatch(/\n\s+9 \| return \{ success: true,, data:/);
});

test("every tool runs at least once: a tool no reference solution calls is probed, and a TypeError on it fails the check", async () => {
  // the shape the dual-agent test caught in a synthesized env and check passed: add_to_cart threw TypeError on every call
  const broken = brokenCopy((f) => {
    f.source = f.source.replace("escalate() {", "escalate() { return this.cart.items.push(1); }\n  escalate_old() {");
  });
  const found = (await problems(broken)).join("\n");
  expect(found).toMatch(/tool escalate throws TypeError when called with \{\}: .*no reference solution calls it/);
  // a tool whose reference call throws a TypeError is a bug too (a deliberate Error is allowed)
  const viaReference = brokenCopy((f) => {
    f.source = f.source.replace("delete_note({ note_id }) {", "delete_note({ note_id }) { null.x;");
  });
  expect((await problems(viaReference)).join("\n")).toMatch(/reference action rejected: delete_note: delete_note raised TypeError/);
  // probes use the simplest arguments the schema accepts; tools answering them with {success: false} pass
  expect(await problems(join(FIXTURES, "notes"))).toEqual([]);
});

/** The notes fixture with one task scenario of the given checks and reference solution. */
function withScenario(checks: string[], reference: { name: string; arguments: Record<string, unknown> }[]): string {
  return brokenCopy((f) => {
    f.scenarios = [{ id: "notes-1", env_id: "notes-v1", task: "Tidy up the notes.", checks: checks.map((source, i) => ({ description: `check ${i}`, source })), reference_actions: reference }];
  });
}

const ADD_TODO = { name: "add_note", arguments: { user_id: "u2", title: "todo", body: "call mom" } };
const HAS_TODO = "({final}) => Object.values(final.notes).some(n => n.user_id === 'u2' && n.title === 'todo' && n.body === 'call mom')";

test("gaming probes: a scenario a random agent passes is a problem, named with the calls that passed it", async () => {
  // deleting n1 is the whole task: the random agent draws note ids from the state, so it finds it
  const dir = withScenario(["({final}) => final.notes.n1 === undefined"], [{ name: "delete_note", arguments: { note_id: "n1" } }]);
  const report = await checkBundle(loadBundle(dir));
  expect(report.problems.join("\n")).toMatch(/notes-1: a random agent reached reward 1.0 \(best of \d+ seeded episodes of schema-valid calls\).*delete_note\(\{"note_id":"n1"\}\)/);
  expect(report.probes["notes-1"]!.randomBest).toBe(1);
});

test("gaming probes: a reference write whose effect no check looks at is a warning; a scenario a random agent cannot pass has none", async () => {
  const dir = withScenario([HAS_TODO], [ADD_TODO, { name: "add_note", arguments: { user_id: "u1", title: "extra", body: "text" } }, { name: "list_notes", arguments: { user_id: "u2" } }]);
  const report = await checkBundle(loadBundle(dir));
  expect(report.problems).toEqual([]);
  expect(report.warnings.join("\n")).toMatch(/notes-1: reference action #2 add_note changes the state, yet leaving it out still scores 1.0/);
  expect(report.warnings.join("\n")).not.toMatch(/#1 add_note|#3 list_notes/); // #1 is needed; #3 is a read
  const probe = report.probes["notes-1"]!;
  expect(probe.droppable.map((d) => [d.index, d.wrote])).toEqual([[1, true], [2, false]]);
  expect(probe.dropped).toBe(3);
  expect(probe.randomEpisodes).toBeGreaterThan(0);
  expect(probe.randomBest).toBeLessThan(1);
});

test("gaming probes: a reference solution none of whose steps is needed is a problem", async () => {
  // the second add_note repeats the first: either one alone scores 1.0
  const dir = withScenario([HAS_TODO], [ADD_TODO, ADD_TODO]);
  expect((await problems(dir)).join("\n")).toMatch(/notes-1: leaving out any one reference action still scores 1.0, so the checks test none of them/);
});

test("the gaming probes are seeded: two runs report the same", async () => {
  const dir = withScenario([HAS_TODO], [ADD_TODO, { name: "list_notes", arguments: { user_id: "u2" } }]);
  const a = await checkBundle(loadBundle(dir));
  const b = await checkBundle(loadBundle(dir));
  expect(a.probes).toEqual(b.probes);
});

test("gaming probes: a scenario without a reference solution is still tried by the random agent", async () => {
  const dir = brokenCopy((f) => {
    f.scenarios = [{ id: "notes-1", env_id: "notes-v1", task: "Delete n1.", checks: [{ description: "n1 gone", source: "({final}) => final.notes.n1 === undefined" }] }];
  });
  const report = await checkBundle(loadBundle(dir));
  expect(report.warnings.join("\n")).toMatch(/no reference_actions/);
  expect(report.problems.join("\n")).toMatch(/notes-1: a random agent reached reward 1.0/);
  expect(report.probes["notes-1"]!.dropped).toBe(0);
});
