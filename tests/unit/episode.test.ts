import { afterEach, expect, test } from "vitest";
import { Episode } from "../../bridge/core/episode/episode.js";
import type { Scenario } from "../../envs/format/bundle-schema.js";
import { EnvBundle } from "../../envs/format/load-bundle.js";
import { inlineBundle, notesBundle, fileSandboxHost } from "../helpers.js";

/** This file's episodes' and sessions' sandboxes (disposed after its tests). */
const sandboxes = fileSandboxHost();

const bundle = notesBundle();
const open: Episode[] = [];
afterEach(() => open.splice(0).forEach((e) => e.close()));

async function start(overrides: Partial<Scenario> = {}, seed = 1): Promise<Episode> {
  const scenario = { ...bundle.scenario("notes-1")!, ...overrides };
  const e = new Episode({ sandboxes, bundle, scenario, seed, episodeId: "t" });
  open.push(e);
  await e.reset();
  return e;
}
const errorOf = (content: string) => JSON.parse(content).error as { type: string; message: string };

test("agent mistakes are observations and the episode goes on", async () => {
  const e = await start();
  const unknown = await e.step({ name: "nuke", arguments: {} });
  expect(errorOf(unknown.observation.content)).toMatchObject({ type: "unknown_tool", message: expect.stringContaining("add_note") });
  const missing = await e.step({ name: "add_note", arguments: { user_id: "u1" } });
  expect(errorOf(missing.observation.content).message).toMatch(/missing required argument 'title'/);
  const extra = await e.step({ name: "list_notes", arguments: { user_id: "u1", colour: "red" } });
  expect(errorOf(extra.observation.content).message).toMatch(/unexpected argument 'colour'/);
  const wrongType = await e.step({ name: "list_notes", arguments: { user_id: 5 } });
  expect(errorOf(wrongType.observation.content).message).toMatch(/user_id.*must be string/);
  const throws = await e.step({ name: "explode", arguments: {} });
  expect(errorOf(throws.observation.content)).toEqual({ type: "tool_exception", message: "explode raised Error: kaboom" });
  const garbled = await e.step("<tool_call>{oops</tool_call>");
  expect(errorOf(garbled.observation.content).type).toBe("invalid_action");
  for (const r of [unknown, missing, extra, wrongType, throws, garbled]) expect(r.terminated || r.truncated).toBe(false);
});

test("unlisted_call_method: a name the tool list lacks is answered by that env method; the agent's tool list stays the manifest's", async () => {
  // an executor like ACEBench's, which runs any public method of its classes, documented or not
  const src = `class Exec {
    constructor(s) { this.count = s.count; }
    ping() { return "pong"; }
    _unlisted(call) {
      if (call.name === "boom") throw new Error("no " + call.name);
      this.count += 1;
      return { ran: call.name, args: call.arguments };
    }
  }`;
  const base = inlineBundle("unl", "Exec", src, ["ping"], { count: 0 });
  const b = new EnvBundle(base.dir, { ...base.manifest, unlisted_call_method: "_unlisted" }, base.source, base.defaultState, base.scenarios, "unl-hash");
  const e = new Episode({ sandboxes, bundle: b, scenario: b.scenario("unl-1")!, seed: 1, episodeId: "u" });
  open.push(e);
  const r = await e.reset();
  expect(r.info.tools.map((t) => t.function.name)).toEqual(["ping"]);
  const hidden = await e.step({ name: "view_all", arguments: { a: 1 } });
  expect(hidden.observation.tool_results![0]).toMatchObject({ ok: true, content: '{"ran":"view_all","args":{"a":1}}' });
  expect(hidden.info.diff).toEqual([{ op: "replace", path: "/count", value: 1, old: 0 }]);
  // its own private names too: what they do is the env's to say
  expect((await e.step({ name: "_unlisted", arguments: {} })).observation.tool_results![0]!.content).toBe('{"ran":"_unlisted","args":{}}');
  const thrown = await e.step({ name: "boom", arguments: {} });
  expect(errorOf(thrown.observation.content)).toEqual({ type: "tool_exception", message: "boom raised Error: no boom" });
  // a name no Python or JavaScript identifier could be never reaches the env (nor does one longer than a tool name may be)
  for (const name of ["view-all", "a.b", "x".repeat(65), "1st", ""]) {
    const s = await e.step({ name, arguments: {} });
    if (name === "") expect(errorOf(s.observation.content).type).toBe("invalid_action");
    else expect(errorOf(s.observation.content)).toMatchObject({ type: "unknown_tool", message: expect.stringContaining("must be an identifier of at most 64 characters") });
  }
  expect((await e.step({ name: "ping", arguments: {} })).observation.content).toBe('"pong"');
  expect(JSON.parse(e.stateJson()).count).toBe(2);
  // the method must exist: a bundle naming one its class lacks does not start
  const lacking = new EnvBundle(base.dir, { ...base.manifest, unlisted_call_method: "_nope" }, base.source, base.defaultState, base.scenarios, "unl-hash2");
  const bad = new Episode({ sandboxes, bundle: lacking, scenario: lacking.scenario("unl-1")!, seed: 1, episodeId: "v" });
  open.push(bad);
  await expect(bad.reset()).rejects.toThrow(/no method _nope \(the manifest's unlisted_call_method\)/);
});

test("a scenario whose loop goes on after text (text_reply): only the end marker ends it, other text gets the scenario's reply", async () => {
  const e = await start({ text_reply: { end_marker: "finish conversation", otherwise: "Please go on." } });
  const asked = await e.step("Which user do you mean?");
  expect(asked).toMatchObject({ terminated: false, truncated: false, observation: { role: "user", content: "Please go on." } });
  const garbled = await e.step("<tool_call>{oops</tool_call>");
  expect(garbled.observation.content).toBe("Please go on.");
  const call = await e.step({ name: "add_note", arguments: { user_id: "u2", title: "todo", body: "call mom" } });
  expect(call.observation.role).toBe("tool");
  await e.step({ name: "delete_note", arguments: { note_id: "n1" } });
  const end = await e.step("Done. finish conversation");
  // scored as any task episode (this test's episode has no reference state, so that check fails: 2 of 3)
  expect(end).toMatchObject({ terminated: true, info: { end_reason: "text_reply", end_text: "Done. finish conversation", reward_info: { passed: 2, total: 3 } } });
});

test("several tool calls in one action run in order", async () => {
  const e = await start();
  const r = await e.step([
    { name: "add_note", arguments: { user_id: "u1", title: "a", body: "1" } },
    { name: "list_notes", arguments: { user_id: "u1" } },
  ]);
  expect(r.observation.tool_results!.map((t) => t.ok)).toEqual([true, true]);
  expect(JSON.parse(r.observation.content)[1].data.map((n: { title: string }) => n.title)).toEqual(["groceries", "a"]);
});

test("max steps truncates, and the reward is still computed", async () => {
  const e = await start({ max_steps: 2 });
  await e.step({ name: "list_notes", arguments: { user_id: "u1" } });
  const r = await e.step({ name: "delete_note", arguments: { note_id: "n1" } });
  expect(r).toMatchObject({ terminated: false, truncated: true, info: { end_reason: "max_steps" } });
  expect(r.info.reward_info!.checks.map((c) => c.passed)).toEqual([false, true, false]);
  expect(r.reward).toBe(0.3333);
});

test("a terminating tool ends the episode", async () => {
  const e = await start();
  expect(await e.step({ name: "escalate", arguments: {} })).toMatchObject({ terminated: true, info: { end_reason: "terminating_tool" } });
});

test("no checks: reward 0 and a flag, never a crash", async () => {
  const e = await start({ checks: [] });
  expect(await e.step("done")).toMatchObject({ reward: 0, terminated: true, info: { reward_info: { no_checks: true, total: 0 } } });
});

test("a check that throws, returns a non-boolean or loops fails with its error shown", async () => {
  const e = await start({
    checks: [
      { kind: "js", description: "throws", source: "() => { throw new Error('bad check') }" },
      { kind: "js", description: "non-boolean", source: "() => 1" },
      { kind: "js", description: "loops", source: "() => { for(;;){} }" },
      { kind: "js", description: "syntax", source: "() => {" },
      { kind: "js", description: "mutates state", source: "({final}) => { final.notes.n1 = null; return true }" },
      { kind: "js", description: "sees actions and messages", source: "({actions, messages}) => actions.length === 1 && actions[0].result.success === true && messages[0] === 'done'" },
    ],
  });
  await e.step({ name: "list_notes", arguments: { user_id: "u1" } });
  const r = await e.step("done");
  const checks = r.info.reward_info!.checks;
  expect(checks[0]).toMatchObject({ passed: false, error: "Error: bad check" });
  expect(checks[1]).toMatchObject({ passed: false, error: "the check returned number, not a boolean" });
  expect(checks[2]).toMatchObject({ passed: false, error: expect.stringMatching(/^env_timeout/) });
  expect(checks[3]).toMatchObject({ passed: false, error: expect.stringMatching(/SyntaxError/) });
  expect(checks[4]).toMatchObject({ passed: false, error: expect.stringMatching(/read-only/) });
  expect(checks[5]).toMatchObject({ passed: true });
  expect(r.reward).toBe(0.1667);
});

test("each check reads its own copy of the calls and messages, parsed when it first reads them; a state's collections are made when first read", async () => {
  const e = await start({
    checks: [
      { kind: "js", description: "empties its copy", source: "({actions, messages}) => { actions.reverse(); actions.length = 0; messages.pop(); return true }" },
      { kind: "js", description: "sees them whole", source: "({actions, messages}) => actions.length === 1 && actions[0].name === 'list_notes' && messages.length === 1" },
      { kind: "js", description: "one copy within a check", source: "(arg) => arg.actions === arg.actions && arg.messages === arg.messages" },
      { kind: "js", description: "the argument's shape", source: "(arg) => Object.keys(arg).join() === 'initial,final,actions,messages' && Object.isFrozen(arg) && JSON.stringify({...arg}).includes('\"messages\":[\"done\"]')" },
      { kind: "js", description: "states only", source: "({final}) => Object.keys(final.notes).length > 0" },
      { kind: "js", description: "a state's shape", source: "({initial, final}) => final.notes === final.notes && Object.isFrozen(final) && Object.keys(final).join() === Object.keys(initial).join() && JSON.stringify({...final}) === JSON.stringify(final) && JSON.parse(JSON.stringify(final)).notes.n1.title === final.notes.n1.title" },
    ],
  });
  await e.step({ name: "list_notes", arguments: { user_id: "u1" } });
  const r = await e.step("done");
  expect(r.info.reward_info!.checks.map((c) => [c.description, c.passed, c.error])).toEqual([
    ["empties its copy", true, undefined],
    ["sees them whole", true, undefined],
    ["one copy within a check", true, undefined],
    ["the argument's shape", true, undefined],
    ["states only", true, undefined],
    ["a state's shape", true, undefined],
  ]);
});

test("same seed and actions give the same observations and state hashes", async () => {
  const run = async () => {
    const e = await start({}, 42);
    const out = [];
    for (const a of [{ name: "roll", arguments: {} }, { name: "add_note", arguments: { user_id: "u2", title: "t", body: "b" } }, { name: "roll", arguments: {} }]) {
      const r = await e.step(a);
      out.push([r.observation.content, r.info.state_hash]);
    }
    return out;
  };
  expect(await run()).toEqual(await run());
});

test("step before reset, after the end, and after close are typed errors", async () => {
  const fresh = new Episode({ sandboxes, bundle, scenario: bundle.scenario("notes-1")!, seed: 1, episodeId: "x" });
  open.push(fresh);
  await expect(fresh.step("hi")).rejects.toMatchObject({ code: "reset_needed" });
  const e = await start();
  await e.step("done");
  await expect(e.step("again")).rejects.toMatchObject({ code: "episode_done" });
  e.close();
  await expect(e.step("again")).rejects.toMatchObject({ code: "closed" });
});

test("reward mode `all` is all-or-nothing (tau-bench); `fraction` gives partial credit", async () => {
  // only the first reference action: one of the two JS checks passes
  const partial = async (reward: "all" | "fraction") => {
    const e = await start({ reward, checks: bundle.scenario("notes-1")!.checks.filter((c) => c.kind === "js") });
    await e.step({ name: "add_note", arguments: { user_id: "u2", title: "todo", body: "call mom" } });
    return e.step("done");
  };
  expect(await partial("fraction")).toMatchObject({ reward: 0.5, info: { reward_info: { passed: 1, total: 2, mode: "fraction" } } });
  expect(await partial("all")).toMatchObject({ reward: 0, info: { reward_info: { passed: 1, total: 2, mode: "all" } } });
  const e = await start({ reward: "all", checks: bundle.scenario("notes-1")!.checks.filter((c) => c.kind === "js") });
  await e.step({ name: "add_note", arguments: { user_id: "u2", title: "todo", body: "call mom" } });
  await e.step({ name: "delete_note", arguments: { note_id: "n1" } });
  expect((await e.step("done")).reward).toBe(1);
});

test("reference_state: the same work in another order scores 1.0 (created ids may differ); match_new_ids: false is exact", async () => {
  const { EnvRegistry } = await import("../../envs/format/registry.js");
  const { BUNDLED_ENVS } = await import("../../envs/bundled.js");
  const { referenceState } = await import("../../bridge/core/episode/reference-state.js");
  const { bundle: library, scenario } = EnvRegistry.load([BUNDLED_ENVS]).scenario("library-5")!;
  // library-5's reference checks out two books; swapping them gives each loan the other's id
  const actions = [...scenario.reference_actions!];
  const i = actions.findIndex((a) => a.name === "checkout_book");
  expect(actions[i + 1]!.name).toBe("checkout_book");
  [actions[i], actions[i + 1]] = [actions[i + 1]!, actions[i]!];
  const play = async (s: Scenario) => {
    const e = new Episode({ sandboxes, bundle: library, scenario: s, seed: 0, episodeId: "order", reference: () => referenceState(sandboxes, library, s.id, 0) });
    open.push(e);
    await e.reset();
    for (const a of actions) await e.step(a);
    return e.finish();
  };
  const lenient = await play(scenario);
  expect(lenient.info.reward_info!.checks.filter((c) => !c.passed)).toEqual([]);
  expect(lenient.reward).toBe(1);
  const exact = await play({ ...scenario, checks: scenario.checks.map((c) => (c.kind === "reference_state" ? { ...c, match_new_ids: false } : c)) });
  const ref = exact.info.reward_info!.checks.find((c) => c.kind === "reference_state")!;
  expect(ref.passed).toBe(false);
  expect(ref.error).toMatch(/\/loans\/L00/);
});

test("a task episode: a fenced JSON call runs, a garbled one is an invalid_action, a text reply ends it with the text in info", async () => {
  const e = await start();
  const fenced = await e.step('```json\n{"name": "list_notes", "arguments": {"user_id": "u1"}}\n```');
  expect(fenced).toMatchObject({ terminated: false, observation: { role: "tool" }, info: { tool_calls: [{ name: "list_notes", arguments: { user_id: "u1" } }] } });
  const garbled = await e.step('```json\n{"name": "list_notes", "arguments": {"user_id": "u1"\n```');
  expect(garbled.terminated || garbled.truncated).toBe(false);
  expect(errorOf(garbled.observation.content)).toMatchObject({ type: "invalid_action", message: expect.stringContaining("not valid JSON") });
  const done = await e.step("All your notes are listed above.");
  expect(done).toMatchObject({ terminated: true, info: { end_reason: "text_reply", end_text: "All your notes are listed above." } });
});

test("action_methods: the env is told where an action of several calls starts and ends, may refuse it whole, and may give the texts rendered at its end", async () => {
  // an executor like ACEBench's, which runs one model message's calls as a batch and renders the results after all of them
  const src = `class Batch {
    constructor(s) { this.items = s.items; this.log = []; this._open = null; }
    add(a) { this.items.push(a.x); return this.items; }
    fail() { throw new Error("bad"); }
    _start(a) {
      if (a.calls.some((c) => c.name === "veto")) throw new Error("a message with veto is unreadable");
      this.log.push(a.calls.map((c) => c.name + ":" + JSON.stringify(c.arguments)).join(","));
      this._open = [];
      return null;
    }
    _end() {
      const out = this._open.map((r) => (r === "fail" ? null : "at end: " + JSON.stringify(this.items)));
      this._open = null;
      return this.mode === "bad" ? [1] : this.mode === "none" ? null : out;
    }
    setmode(a) { this.mode = a.m; return "ok"; }
  }
  for (const k of ["add", "fail", "setmode"]) Batch.prototype[k] = ((f) => function (a) { this._open?.push(k === "fail" ? "fail" : "ok"); return f.call(this, a); })(Batch.prototype[k]);`;
  const base = inlineBundle("batch", "Batch", src, ["add", "fail", "setmode"], { items: [] });
  const b = new EnvBundle(base.dir, { ...base.manifest, action_methods: { start: "_start", end: "_end" } }, base.source, base.defaultState, base.scenarios, "batch-hash");
  const e = new Episode({ sandboxes, bundle: b, scenario: b.scenario("batch-1")!, seed: 1, episodeId: "b" });
  open.push(e);
  await e.reset();
  const two = await e.step([{ name: "add", arguments: { x: 1 } }, { name: "fail", arguments: {} }, { name: "nope", arguments: {} }, { name: "add", arguments: { x: 2 } }]);
  // the end's texts replace the calls' own (both adds show the list after the whole action), a failed call keeps its error, the bridge's own refusal never reaches the env
  expect(two.observation.tool_results!.map((r) => r.content)).toEqual([
    "at end: [1,2]",
    JSON.stringify({ error: { type: "tool_exception", message: "fail raised Error: bad" } }),
    expect.stringContaining('"unknown_tool"'),
    "at end: [1,2]",
  ]);
  expect(JSON.parse(e.stateJson()).log).toEqual(['add:{"x":1},fail:{},nope:null,add:{"x":2}']);
  // the start raising refuses every call of the action: none runs, each says why
  const vetoed = await e.step([{ name: "add", arguments: { x: 3 } }, { name: "veto", arguments: {} }]);
  expect(vetoed.observation.tool_results!.map((r) => errorOf(r.content))).toEqual([
    { type: "tool_exception", message: "not run: _start (the env's action start) raised Error: a message with veto is unreadable" },
    { type: "tool_exception", message: "not run: _start (the env's action start) raised Error: a message with veto is unreadable" },
  ]);
  expect(JSON.parse(e.stateJson()).items).toEqual([1, 2]);
  expect(vetoed.terminated).toBe(false);
  // an end returning null keeps the calls' own texts
  await e.step({ name: "setmode", arguments: { m: "none" } });
  expect((await e.step({ name: "add", arguments: { x: 4 } })).observation.content).toBe("[1,2,4]");
  // an end returning anything else ends the episode as env_output_invalid
  // (the action that sets the mode ends with it)
  const ended = await e.step({ name: "setmode", arguments: { m: "bad" } });
  expect(ended).toMatchObject({ terminated: true, reward: 0, info: { end_reason: "env_fault", error: { code: "env_output_invalid", message: expect.stringContaining("_end (the env's action end) must return null or one string or null per call") } } });
  expect(e.isDone).toBe(true);
  // the methods must exist: a bundle naming one its class lacks does not start
  const lacking = new EnvBundle(base.dir, { ...base.manifest, action_methods: { start: "_start", end: "_gone" } }, base.source, base.defaultState, base.scenarios, "batch-hash2");
  const bad = new Episode({ sandboxes, bundle: lacking, scenario: lacking.scenario("batch-1")!, seed: 1, episodeId: "c" });
  open.push(bad);
  await expect(bad.reset()).rejects.toThrow(/no method _gone \(the manifest's action_methods.end\)/);
});

test("a tool result with control characters (the envelope's separator and NUL included) reaches the agent exactly", async () => {
  const text = "a\u001eb\u0000c\u001fd\n";
  const b = inlineBundle("ctl", "Ctl", `class Ctl { constructor(s) { Object.assign(this, s); } odd() { return { text: ${JSON.stringify(text)}, nested: ["\\u001e"] }; } }`, ["odd"], { items: {} });
  const e = new Episode({ sandboxes, bundle: b, scenario: b.scenario("ctl-1")!, seed: 1, episodeId: "ctl" });
  open.push(e);
  await e.reset();
  const r = await e.step({ name: "odd", arguments: {} });
  expect(r.info.error).toBeUndefined();
  expect(JSON.parse(r.observation.content)).toEqual({ text, nested: ["\u001e"] });
});
