import { execFileSync, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { EnvRuntime } from "../../bridge/core/engine/env-runtime.js";
import { BFCL_HOLDOUT_MESSAGE, findBfclPackage, importBfcl, parseGroundTruthCall } from "../../envs/bfcl/import-bfcl.js";
import { pyJsonParse } from "../../bridge/core/episode/py-json.js";
// a plain ES module (also a CLI: node envs/bfcl/verify.mjs GOLDEN.json)
import { verify } from "../../envs/bfcl/verify.mjs";

// The originals come from the pinned bfcl-eval in the repo's venv (scripts/test-all.sh installs it
// with --no-deps, next to python-client[test]); nothing of it is in the repo.
const ROOT = join(import.meta.dirname, "..", "..");
const PY = process.env.BFCL_PYTHON ?? join(ROOT, ".venv", "bin", "python");
const HAVE_BFCL = existsSync(PY) && spawnSync(PY, ["-c", "import bfcl_eval, mpmath"]).status === 0;
const WHY = `bfcl-eval is not importable with ${PY}: run scripts/test-all.sh (or .venv/bin/pip install --no-deps bfcl-eval==2026.3.23 mpmath==1.3.0), or point BFCL_PYTHON at an interpreter that has it`;
/** Fuzzed calls per task in the golden set (error paths: wrong types, missing/extra args, unknown ids, calls before login). */
const FUZZ = Number(process.env.BFCL_FUZZ ?? 10);
/** Every Nth task goes through the bridge (BFCL_FULL=1: all 800). */
const BRIDGE_EVERY = process.env.BFCL_FULL ? 1 : 8;

interface GoldenCall {
  name: string;
  args: Record<string, unknown>;
  out: string;
}
interface GoldenTurn {
  calls: GoldenCall[];
}
interface GoldenTask {
  id: string;
  category: string;
  turns: GoldenTurn[];
  verdict: { valid: boolean; error_type?: string };
  variants?: { kind: string; turns: GoldenTurn[]; verdict: { valid: boolean; error_type?: string } }[];
}
interface Step {
  observation: { role: string; content: string; tool_results?: { content: string; ok: boolean }[] };
  reward: number;
  terminated: boolean;
  truncated: boolean;
  info: { end_reason?: string; tools?: { function: { name: string } }[]; turn?: { index: number; ended?: { valid: boolean; error_type?: string } }; reward_info?: unknown };
}

/** The observation text of a tool call: python-format bundles send the original's text verbatim (one place to change if that convention moves). */
const observationText = (s: Step): string => s.observation.tool_results?.[0]?.content ?? s.observation.content;

/**
 * One turn's calls through the bridge, one call per step, or several per step (as a model's
 * parallel calls) when the turn has more than BFCL's 20 steps allow (two long_context ground
 * truths have 34); each call's output text goes to `check`.
 */
async function playTurn(runtime: EnvRuntime, ep: string, calls: GoldenCall[], check: (call: GoldenCall, text: string) => void): Promise<void> {
  const per = Math.ceil(calls.length / 20);
  for (let i = 0; i < calls.length; i += per) {
    const chunk = calls.slice(i, i + per);
    const s = (await runtime.step(ep, chunk.map((c) => ({ name: c.name, arguments: c.args })))) as unknown as Step;
    chunk.forEach((c, k) => check(c, s.observation.tool_results?.[k]?.content ?? s.observation.content));
  }
}

test("Python-literal and json.loads parsing keep int/float apart", () => {
  expect(pyJsonParse('{"a": 30.0, "b": [1, 2.5, 3e1], "c": 9007199254740993}')).toEqual({ a: { $float: 30 }, b: [1, 2.5, { $float: 30 }], c: { $int: "9007199254740993" } });
  expect(parseGroundTruthCall("mv(source='a.txt', destination=\"b\")")).toEqual({ name: "mv", args: { source: "a.txt", destination: "b" } });
  expect(parseGroundTruthCall("sort('final_report.pdf')")).toEqual({ name: "sort", args: {}, pos: ["final_report.pdf"] });
  expect(parseGroundTruthCall("fillFuelTank(fuelAmount=30.0)").args).toEqual({ fuelAmount: { $float: 30 } });
  expect(parseGroundTruthCall("f(x=[1, -2.5, 'a,b'], y={'k': None, 'z': True})").args).toEqual({ x: [1, -2.5, "a,b"], y: { k: null, z: true } });
});

describe.skipIf(!HAVE_BFCL)(`BFCL v3 multi-turn against the original classes (${HAVE_BFCL ? "bfcl-eval found" : WHY})`, () => {
  const work = mkdtempSync(join(tmpdir(), "envscaler-bfcl-"));
  const goldenPath = join(work, "golden.json");
  const bundles = join(work, "bundles");
  let golden: { tasks: GoldenTask[] };
  let runtime: EnvRuntime;

  beforeAll(async () => {
    execFileSync(PY, [join(ROOT, "python-client", "tests", "bfcl_oracle.py"), goldenPath, "--fuzz", String(FUZZ)], { stdio: "inherit" });
    golden = JSON.parse(readFileSync(goldenPath, "utf8")) as typeof golden;
    importBfcl(findBfclPackage(PY), bundles, undefined, PY);
    runtime = await EnvRuntime.start({ envs: [bundles], workers: 2 });
  }, 900_000);
  afterAll(async () => {
    await runtime?.close();
  });

  test("every ground-truth, perturbed and fuzzed call gives the original's exact text and every turn's state is equal; our checker's verdicts are the official ones", () => {
    const { stats, problems } = verify(golden);
    expect(problems.slice(0, 10)).toEqual([]);
    const gtCalls = golden.tasks.reduce((n, t) => n + t.turns.reduce((m, turn) => m + turn.calls.length, 0), 0);
    expect(golden.tasks).toHaveLength(800);
    expect(gtCalls).toBe(4625);
    expect(stats).toMatchObject({ tasks: 800, tasksMatched: 800, skipped: 0, skippedCalls: 0, verdicts: 800 * 6, verdictsMatched: 800 * 6 });
    expect(stats.calls).toBe(stats.callsMatched);
    expect(stats.calls).toBeGreaterThan(4625 * 3); // GT, the perturbed GT and the fuzzed GT
    expect(stats.states).toBe(stats.statesMatched);
    // the ground truth itself passes the official checker, and doing nothing fails where it does
    expect(golden.tasks.every((t) => t.verdict.valid)).toBe(true);
    const nothing = golden.tasks.map((t) => t.variants!.find((v) => v.kind === "nothing")!.verdict);
    expect(nothing.filter((v) => v.valid).length).toBe(0);
    // names the tools do not list are evaluated by the original (its NameError, its safety list) and
    // count as model calls: mixed into the ground truth they change no verdict, and a turn of them
    // alone is not an empty turn
    const variant = (t: GoldenTask, kind: string) => t.variants!.find((v) => v.kind === kind)!;
    expect(golden.tasks.every((t) => variant(t, "unlisted").verdict.valid)).toBe(true);
    const only = golden.tasks.map((t) => variant(t, "unlisted_only").verdict);
    expect(only.filter((v) => v.error_type === "multi_turn:empty_turn_model_response")).toEqual([]);
    expect(only.filter((v) => !v.valid).length).toBeGreaterThan(700);
    const outs = golden.tasks.flatMap((t) => variant(t, "unlisted").turns.flatMap((turn) => turn.calls.map((c) => c.out)));
    expect(outs.filter((o) => /^Error during execution: name '\w+' is not defined$/.test(o)).length).toBeGreaterThan(800 * 10);
    expect(outs.filter((o) => /^Error during execution: Function call (kill|exit|run) is not allowed\.$/.test(o)).length).toBe(800 * 3);
    console.log(`BFCL parity: ${JSON.stringify(stats)}`);
  }, 900_000);

  test(`through the bridge the ground truth gives the original's outputs and scores 1.0, and doing nothing scores what the official checker says (every ${BRIDGE_EVERY}th task)`, async () => {
    const mismatches: string[] = [];
    const sample = golden.tasks.filter((_, i) => i % BRIDGE_EVERY === 0);
    const run = async (task: GoldenTask) => {
      const r = await runtime.reset(task.id, 0);
      const ep = r.info.episode_id;
      let last: Step | undefined;
      for (const turn of task.turns) {
        await playTurn(runtime, ep, turn.calls, (call, text) => {
          if (text !== call.out) mismatches.push(`${task.id} ${call.name}: ${text.slice(0, 200)} != ${call.out.slice(0, 200)}`);
        });
        last = (await runtime.step(ep, "Done.")) as unknown as Step;
      }
      if (last?.reward !== 1 || !last.terminated) mismatches.push(`${task.id}: reward ${last?.reward} ${JSON.stringify(last?.info.reward_info)}`);
      await runtime.closeEpisode(ep);
      // doing nothing: a text reply in every turn
      const n = await runtime.reset(task.id, 0);
      let end: Step | undefined;
      for (let i = 0; i < task.turns.length; i++) end = (await runtime.step(n.info.episode_id, "I cannot help with that.")) as unknown as Step;
      const official = task.variants!.find((v) => v.kind === "nothing")!.verdict;
      if (end?.reward !== (official.valid ? 1 : 0)) mismatches.push(`${task.id}: doing nothing scored ${end?.reward}, the official verdict is ${JSON.stringify(official)}`);
      await runtime.closeEpisode(n.info.episode_id);
    };
    const queue = [...sample];
    await Promise.all(Array.from({ length: 4 }, async () => {
      for (let t = queue.shift(); t; t = queue.shift()) await run(t);
    }));
    expect(mismatches.slice(0, 10)).toEqual([]);
  }, 900_000);

  test(`through the bridge calls to names the tools do not list give the original's texts, count as model calls and score the official verdict (every ${BRIDGE_EVERY}th task)`, async () => {
    const mismatches: string[] = [];
    const run = async (task: GoldenTask, kind: string) => {
      const v = task.variants!.find((x) => x.kind === kind)!;
      const r = await runtime.reset(task.id, 0);
      const ep = r.info.episode_id;
      let last: Step | undefined;
      for (const turn of v.turns) {
        await playTurn(runtime, ep, turn.calls, (call, text) => {
          if (text !== call.out) mismatches.push(`${task.id} [${kind}] ${call.name}: ${text.slice(0, 200)} != ${call.out.slice(0, 200)}`);
        });
        last = (await runtime.step(ep, "Done.")) as unknown as Step;
      }
      const info = JSON.stringify(last?.info.reward_info);
      if (last?.reward !== (v.verdict.valid ? 1 : 0) || !last.terminated) mismatches.push(`${task.id} [${kind}]: reward ${last?.reward}, official ${JSON.stringify(v.verdict)}`);
      else if (!v.verdict.valid && !info.includes(v.verdict.error_type!)) mismatches.push(`${task.id} [${kind}]: failed otherwise than the official ${v.verdict.error_type}: ${info.slice(0, 300)}`);
      await runtime.closeEpisode(ep);
    };
    const queue = golden.tasks.filter((_, i) => i % BRIDGE_EVERY === 0).flatMap((t) => [[t, "unlisted"], [t, "unlisted_only"]] as const);
    await Promise.all(Array.from({ length: 4 }, async () => {
      for (let x = queue.shift(); x; x = queue.shift()) await run(x[0], x[1]);
    }));
    expect(mismatches.slice(0, 10)).toEqual([]);
    // a name Python itself resolves in the original's executor (a builtin) or a keyword is not ported: a typed error, not a model call
    const task = golden.tasks[0]!;
    const r = await runtime.reset(task.id, 0);
    for (const name of ["print", "json", "class"]) {
      const s = (await runtime.step(r.info.episode_id, { name, arguments: {} })) as unknown as Step;
      expect(JSON.parse(observationText(s)).error).toMatchObject({ type: "tool_exception", message: expect.stringContaining("not ported") });
    }
    await runtime.closeEpisode(r.info.episode_id);
  }, 900_000);

  test("miss_func: the held-out tools are hidden until their turn, which brings BFCL's message and the new tool list", async () => {
    const task = golden.tasks.find((t) => t.category === "miss_func")!;
    type Sc = { id: string; user_turns: { content: string; add_tools?: string[] }[] };
    const sc = readdirSync(bundles)
      .filter((d) => d.startsWith("bfcl-miss_func-"))
      .flatMap((d) => JSON.parse(readFileSync(join(bundles, d, "scenarios.json"), "utf8")) as Sc[])
      .find((x) => x.id === task.id)!;
    const k = sc.user_turns.findIndex((t) => t.add_tools);
    const held = sc.user_turns[k]!.add_tools!;
    const r = await runtime.reset(task.id, 0);
    const names = (r.info.tools as { function: { name: string } }[]).map((t) => t.function.name);
    expect(held.every((h) => !names.includes(h))).toBe(true);
    // a fork shows the tools its source shows at that point: before the turn, not the held-out ones
    const early = await runtime.fork({ episode_id: r.info.episode_id });
    expect(early.tools.map((t) => t.function.name)).toEqual(names);
    let s: Step | undefined;
    for (let i = 0; i <= k; i++) s = (await runtime.step(r.info.episode_id, "next")) as unknown as Step;
    expect(s!.observation).toMatchObject({ role: "user", content: BFCL_HOLDOUT_MESSAGE });
    expect(held.every((h) => s!.info.tools!.some((t) => t.function.name === h))).toBe(true);
    const late = await runtime.fork({ episode_id: r.info.episode_id });
    expect(late.tools.map((t) => t.function.name)).toEqual(s!.info.tools!.map((t) => t.function.name));
    for (const id of [r.info.episode_id, early.episode_id, late.episode_id]) await runtime.closeEpisode(id);
  }, 120_000);

  test("arguments sent as JSON text keep Python's int/float distinction (json.loads reads 1.0 as a float)", async () => {
    const task = golden.tasks.find((t) => t.id.startsWith("multi_turn_base") && t.turns.some((turn) => turn.calls.some((c) => c.name === "mean")))!;
    const r = await runtime.reset(task.id, 0);
    const call = (args: string) => ({ role: "assistant", content: "", tool_calls: [{ id: "c1", type: "function", function: { name: "add", arguments: args } }] });
    expect(observationText((await runtime.step(r.info.episode_id, call('{"a": 1.0, "b": 2.0}'))) as unknown as Step)).toBe('{"result": 3.0}');
    expect(observationText((await runtime.step(r.info.episode_id, call('{"a": 1, "b": 2}'))) as unknown as Step)).toBe('{"result": 3}');
    expect(observationText((await runtime.step(r.info.episode_id, `<tool_call>{"name": "add", "arguments": {"a": 2.0, "b": 1e1}}</tool_call>`)) as unknown as Step)).toBe('{"result": 12.0}');
    // a Python TypeError from the original's own argument binding, not our schema validator's
    expect(observationText((await runtime.step(r.info.episode_id, call('{"a": 1}'))) as unknown as Step)).toBe("Error during execution: MathAPI.add() missing 1 required positional argument: 'b'");
    await runtime.closeEpisode(r.info.episode_id);
  }, 120_000);

  test("more than 20 tool-calling steps in a turn force-terminate the task (reward 0) when turns remain", async () => {
    const task = golden.tasks.find((t) => t.turns.length > 1 && t.turns[0]!.calls.length > 0)!;
    const call = task.turns[0]!.calls[0]!;
    const r = await runtime.reset(task.id, 0);
    let s: Step | undefined;
    for (let i = 0; i < 21; i++) {
      s = (await runtime.step(r.info.episode_id, { name: call.name, arguments: call.args })) as unknown as Step;
      if (i < 20) expect(s.terminated).toBe(false);
    }
    expect(s).toMatchObject({ reward: 0, terminated: true, info: { end_reason: "turn_step_limit" } });
    expect(JSON.stringify(s!.info.reward_info)).toContain("multi_turn:force_terminated");
  }, 120_000);
});
