// Limits on what one action, one step and one episode may cost, and guests that patch their own
// realm: each is answered with a typed error or an observation naming the limit, never internal_error.
import { mkdtempSync, mkdirSync, writeFileSync, cpSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, expect, test } from "vitest";
import { EnvRuntime } from "../../bridge/core/engine/env-runtime.js";
import { Episode, MAX_CALLS_PER_ACTION } from "../../bridge/core/episode/episode.js";
import { loadBundle, MAX_SOURCE_BYTES, BundleLoadError } from "../../envs/format/load-bundle.js";
import { FIXTURES, inlineBundle, fileSandboxHost } from "../helpers.js";

/** This file's episodes' and sessions' sandboxes (disposed after its tests). */
const sandboxes = fileSandboxHost();

const SOURCE = `class Box {
  constructor(s) { this.items = s.items; }
  set({ id, v }) { this.items[id] = { v }; return true; }
  big({ n }) { return "x".repeat(n); }
  patch_tojson() { Object.prototype.toJSON = function () { return 42; }; return true; }
  get({ id }) { return this.items[id] ?? null; }
}`;
const bundle = inlineBundle("box", "Box", SOURCE, ["set", "big", "patch_tojson", "get"], { items: { a: { v: 1 } } });
const errorOf = (content: string) => JSON.parse(content).error as { type: string; message: string };

async function start(): Promise<Episode> {
  const e = new Episode({ sandboxes, bundle, scenario: bundle.scenario("box-1")!, seed: 1, episodeId: "b" });
  await e.reset();
  return e;
}

test("NaN and Infinity in tool arguments are invalid arguments, and the state is untouched", async () => {
  const e = await start();
  for (const v of [NaN, Infinity, -Infinity, [1, NaN], { deep: { x: Infinity } }]) {
    const r = await e.step({ name: "set", arguments: { id: "a", v } });
    expect(errorOf(r.observation.content)).toMatchObject({ type: "invalid_arguments", message: expect.stringContaining("not a finite number") });
    expect(r.info.diff).toEqual([]);
  }
  expect(JSON.parse(e.stateJson()).items.a).toEqual({ v: 1 });
  e.close();
});

test(`more than ${MAX_CALLS_PER_ACTION} tool calls in one action: none runs, the observation names the limit`, async () => {
  const e = await start();
  const calls = Array.from({ length: MAX_CALLS_PER_ACTION + 1 }, (_, i) => ({ name: "set", arguments: { id: `k${i}`, v: i } }));
  const r = await e.step(calls);
  expect(errorOf(r.observation.content)).toMatchObject({ type: "invalid_action", message: expect.stringContaining("MAX_CALLS_PER_ACTION") });
  expect(r.info.diff).toEqual([]);
  expect(r.terminated || r.truncated).toBe(false);
  const ok = await e.step(calls.slice(0, MAX_CALLS_PER_ACTION));
  expect(ok.observation.tool_results).toHaveLength(MAX_CALLS_PER_ACTION);
  e.close();
});

test("one step's tool outputs together stay within the output limit; the rest of the step is not run", async () => {
  const e = await start();
  const cap = 8 << 20; // the default maxOutputBytes
  const r = await e.step([{ name: "big", arguments: { n: 5 << 20 } }, { name: "big", arguments: { n: 5 << 20 } }, { name: "set", arguments: { id: "z", v: 1 } }]);
  const [first, second, third] = r.observation.tool_results!;
  expect(first!.ok).toBe(true);
  expect(errorOf(second!.content)).toMatchObject({ type: "output_limit", message: expect.stringContaining(`${cap} bytes (maxOutputBytes)`) });
  expect(errorOf(third!.content).message).toMatch(/not run/);
  expect(JSON.parse(e.stateJson()).items.z).toBeUndefined();
  expect(r.terminated).toBe(false);
  e.close();
});

test("a guest that patches Object.prototype.toJSON ends its own episode with env_output_invalid", async () => {
  const e = await start();
  // the call's own report already passes through the patched toJSON
  const r = await e.step({ name: "patch_tojson", arguments: {} });
  expect(r).toMatchObject({ terminated: true, info: { end_reason: "env_fault", error: { code: "env_output_invalid" } } });
  e.close();
});

test("an env class source over the size limit is refused when the bundle loads", () => {
  const dir = join(mkdtempSync(join(tmpdir(), "big-src-")), "notes");
  mkdirSync(dir, { recursive: true });
  cpSync(join(FIXTURES, "notes"), dir, { recursive: true });
  writeFileSync(join(dir, "env.js"), `// ${"x".repeat(MAX_SOURCE_BYTES)}\n`);
  expect(() => loadBundle(dir)).toThrow(BundleLoadError);
  expect(() => loadBundle(dir)).toThrow(/MAX_SOURCE_BYTES/);
});

let rt: EnvRuntime | undefined;
afterAll(() => rt?.close());

test("an oversized action and an episode's total actions are refused before they run (too_large), and nothing is kept", async () => {
  rt = await EnvRuntime.start({ envs: [FIXTURES], maxActionBytes: 10_000, maxEpisodeInputBytes: 50_000 });
  const { episode_id } = await rt.reset("notes-1", 1);
  const huge = { name: "list_notes", arguments: { user_id: "u1", pad: Array.from({ length: 1_000_000 }, (_, i) => i) } };
  await expect(rt.step(episode_id, huge)).rejects.toMatchObject({ code: "too_large", message: expect.stringContaining("--max-action-bytes") });
  expect(rt.inputs(episode_id).actions).toHaveLength(0);
  const mid = { name: "list_notes", arguments: { user_id: "u1", note: "y".repeat(9_000) } };
  let refused: unknown;
  for (let i = 0; i < 10 && !refused; i++) await rt.step(episode_id, mid).catch((e: unknown) => (refused = e));
  expect(refused).toMatchObject({ code: "too_large", message: expect.stringContaining("--max-episode-input-mb") });
  expect(rt.inputs(episode_id).actions.length).toBeLessThan(10);
});

test("faults are classified by what happened, not by what a guest's error says", async () => {
  for (const [src, where] of [
    ["throw new InternalError('out of memory');\nclass X { constructor() {} ping() { return 1; } }", "top level"],
    ["class X { constructor() { throw new InternalError('out of memory: stack overflow'); } ping() { return 1; } }", "constructor"],
  ] as const) {
    const b = inlineBundle(`fake-oom-${where.length}`, "X", src, ["ping"], { k: 1 });
    const e = new Episode({ sandboxes, bundle: b, scenario: [...b.scenarios.values()][0]!, seed: 1, episodeId: "x" });
    await expect(e.reset(), where).rejects.toMatchObject({ name: "EnvLoadError", message: expect.stringContaining("out of memory") });
  }
});

test("a check cannot patch toJSON (the check realm is frozen), and the checks after it score as they would alone", async () => {
  const { runJsChecks } = await import("../../bridge/core/episode/checker.js");
  const { StateBase, StateView } = await import("../../bridge/core/state/state-base.js");
  const base = StateBase.fromState({ k: 1 });
  const inputs = { initial: new StateView(base), final: new StateView(base), actions: [], messages: [] };
  const verdicts = await runJsChecks(
    sandboxes,
    [
      "() => { Object.prototype.toJSON = () => 7; return Object.prototype.toJSON === undefined; }", // sloppy: the write is dropped
      "() => { 'use strict'; Object.prototype.toJSON = () => 7; return true; }", // strict: the write throws
      "() => true",
    ],
    inputs,
    [1, 2, 3, 4],
  );
  expect(verdicts).toEqual([{ passed: true }, { passed: false, error: expect.stringContaining("TypeError") }, { passed: true }]);
});

test("a replica that cannot record refuses work before it runs (recording_unavailable); --record-failure continue runs unrecorded", async () => {
  const { TrajectoryWriter } = await import("../../bridge/tools/record/trajectory-writer.js");
  const dir = mkdtempSync(join(tmpdir(), "rec-"));
  // asking for more free room than any disk has makes every check fail before anything is written
  const refuse = new TrajectoryWriter(join(dir, "a.jsonl"), { reserveBytes: Number.MAX_SAFE_INTEGER });
  const a = await EnvRuntime.start({ envs: [FIXTURES], recorder: refuse });
  try {
    await expect(a.reset("notes-1", 1)).rejects.toMatchObject({ code: "recording_unavailable" });
    expect(a.stats().episodes).toBe(0);
  } finally {
    await a.close();
  }
  const cont = new TrajectoryWriter(join(dir, "b.jsonl"), { reserveBytes: Number.MAX_SAFE_INTEGER, onFailure: "continue" });
  const b = await EnvRuntime.start({ envs: [FIXTURES], recorder: cont });
  try {
    const { episode_id } = await b.reset("notes-1", 1);
    expect((await b.step(episode_id, { name: "list_notes", arguments: { user_id: "u1" } })).terminated).toBe(false);
  } finally {
    await b.close();
  }
});

test("a scenario whose reset keeps hanging a native builtin is quarantined; its neighbours keep their worker", async () => {
  const dir = join(mkdtempSync(join(tmpdir(), "quarantine-")), "hang");
  mkdirSync(dir, { recursive: true });
  const tool = { type: "function", function: { name: "ping", description: "ping", parameters: { type: "object", properties: {} } } };
  writeFileSync(join(dir, "manifest.json"), JSON.stringify({ format: "envscaler.env/v1", id: "hang-v1", name: "hang", introduction: "x", class_name: "Hang", tools: [tool], default_state: { hang: false }, limits: { call_timeout_ms: 200 } }));
  // the constructor spends seconds inside one builtin when the scenario's state asks for it
  writeFileSync(join(dir, "env.js"), "class Hang { constructor(s) { this.hang = s.hang; if (s.hang) JSON.stringify(new Array(15000000)); } ping() { return 'pong'; } }\n");
  writeFileSync(join(dir, "scenarios.json"), JSON.stringify([
    { id: "hang-bad", env_id: "hang-v1", task: "t", state_overrides: { hang: true } },
    { id: "hang-ok", env_id: "hang-v1", task: "t" },
  ]));
  // without the fuel checks, which stop such a builtin at its deadline with no hard stop at all
  // (wasm-fuel.test.ts): quarantine is what protects a worker whose guest code is not fuelled. Set
  // for the whole test: the replacement workers read it too.
  process.env.ENVSCALER_NO_FUEL = "1";
  const q = await EnvRuntime.start({ envs: [dir], hardStopGraceMs: 100, quarantineAfter: 2 });
  try {
    const ok = await q.reset("hang-ok", 1);
    for (let i = 0; i < 2; i++) await expect(q.reset("hang-bad", i)).rejects.toMatchObject({ code: "env_timeout" });
    await expect(q.reset("hang-bad", 3)).rejects.toMatchObject({ code: "scenario_quarantined", message: expect.stringContaining("quarantineAfter") });
    expect(q.stats()).toMatchObject({ hard_stops: 2, quarantined: ["hang-bad"] });
    // the neighbour that lived on the same worker was restored and goes on; new ones start
    expect((await q.step(ok.episode_id, { name: "ping", arguments: {} })).observation.content).toBe('"pong"');
    await q.reset("hang-ok", 2);
  } finally {
    delete process.env.ENVSCALER_NO_FUEL;
    await q.close();
  }
});
