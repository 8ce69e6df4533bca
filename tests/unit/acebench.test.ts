import { execFileSync, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { isDeepStrictEqual } from "node:util";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { EnvRuntime } from "../../bridge/core/engine/env-runtime.js";
import { classDefaults, importAcebench, processAccuracyOf } from "../../envs/acebench/import-acebench.js";
// a plain ES module, like envs/bfcl/verify.mjs
import { answersFromBundles, loadPorts, verify } from "../../envs/acebench/verify.mjs";

// The originals (classes, executor, checker) are run from ../shared/benchmarks/acebench at test
// time by python-client/tests/acebench_oracle.py (standard library only); nothing of them is in the repo.
const ROOT = join(import.meta.dirname, "..", "..");
const ACE = process.env.ACEBENCH_DIR ?? join(ROOT, "..", "shared", "benchmarks", "acebench");
const VENV_PY = join(ROOT, ".venv", "bin", "python");
const PY = process.env.ACEBENCH_PYTHON ?? (existsSync(VENV_PY) ? VENV_PY : "python3");
const HAVE = existsSync(join(ACE, "reference", "eval_main.py")) && spawnSync(PY, ["-c", "import ast, json"]).status === 0;
const WHY = `no ACEBench folder at ${ACE} (or no Python at ${PY}): point ACEBENCH_DIR at a copy of ../shared/benchmarks/acebench (ACEBench e6db74b's agent data, classes and reference code)`;
const FUZZ = Number(process.env.ACEBENCH_FUZZ ?? 20);

interface Call {
  name: string;
  args: Record<string, unknown>;
  out: string;
  text: string;
  state: unknown;
  /** The saved attributes as the env's tracked state shows them. */
  view: Record<string, unknown>;
}
/** Several calls as one agent message, run by the original executor as one batch. */
interface Message {
  calls: { name: string; args: Record<string, unknown> }[];
  /** One text per call, or the executor's one error text (multi-turn: a call raised, the rest did not run). */
  outs: string[] | string;
  text: string;
  state: unknown;
  view: Record<string, unknown>;
}
interface Variant {
  kind: string;
  mode: string;
  /** Each call its own message, or (messages) several calls per message. */
  calls?: Call[];
  messages?: Message[];
  verdict: { valid: boolean; error_type: string | null; process_accuracy: number };
}
interface Task {
  id: string;
  category: string;
  variants: Variant[];
}
interface Step {
  observation: { role: string; content: string; tool_results?: { content: string }[] };
  reward: number;
  terminated: boolean;
  truncated: boolean;
  info: { end_reason?: string; reward_info?: unknown; tools?: { function: { name: string } }[] };
}
const observationText = (s: Step): string => s.observation.tool_results?.[0]?.content ?? s.observation.content;

describe.skipIf(!HAVE)(`ACEBench-Agent against the original classes, executor and checker (${HAVE ? `${ACE}` : WHY})`, () => {
  const work = mkdtempSync(join(tmpdir(), "envscaler-acebench-"));
  const goldenPath = join(work, "golden.json");
  const bundles = join(work, "bundles");
  let golden: { tasks: Task[]; stats: { milestones: number; unparseable: number }; public_methods: string[]; unparseable_keywords: string[] };
  let defaults: Record<string, Record<string, unknown>>;
  let runtime: EnvRuntime;
  let answers: Record<string, unknown>;
  /** Task id -> the tool names its bundle serves. */
  const toolNames = () => {
    const out = new Map<string, Set<string>>();
    for (const d of readdirSync(bundles)) {
      const m = JSON.parse(readFileSync(join(bundles, d, "manifest.json"), "utf8")) as { tools: { function: { name: string } }[] };
      const names = new Set(m.tools.map((t) => t.function.name));
      for (const s of JSON.parse(readFileSync(join(bundles, d, "scenarios.json"), "utf8")) as { id: string }[]) out.set(s.id, names);
    }
    return out;
  };

  beforeAll(async () => {
    execFileSync(PY, [join(ROOT, "python-client", "tests", "acebench_oracle.py"), ACE, goldenPath, "--fuzz", String(FUZZ)], { stdio: "inherit" });
    golden = JSON.parse(readFileSync(goldenPath, "utf8")) as typeof golden;
    defaults = classDefaults(ACE, PY);
    importAcebench(ACE, bundles, undefined, PY);
    answers = answersFromBundles(readdirSync(bundles).map((d) => join(bundles, d, "scenarios.json")));
    runtime = await EnvRuntime.start({ envs: [bundles], workers: 2 });
  }, 600_000);
  afterAll(async () => {
    await runtime?.close();
  });

  test("every ground-truth, perturbed and fuzzed call gives the original's exact text and state; our checker's verdicts and process accuracy are the official ones", () => {
    const { stats, problems } = verify(golden, defaults, answers);
    expect(problems.slice(0, 10)).toEqual([]);
    expect(golden.tasks).toHaveLength(50);
    expect(golden.tasks.filter((t) => t.category === "multi_step")).toHaveLength(20);
    // 234 milestone messages in the first alternatives, 14 of which the original's own decoder cannot parse
    expect(golden.stats).toEqual({ milestones: 234, unparseable: 14 });
    expect(stats).toMatchObject({ tasks: 50, tasksMatched: 50 });
    for (const k of ["calls", "texts", "states", "verdicts"]) expect(stats[`${k}Matched`]).toBe(stats[k]);
    expect(stats.calls).toBeGreaterThan(25000);
    // messages of several calls, run as the original runs one agent message (one batch): every text,
    // process entry and state after the message identical
    expect(stats.messagesMatched).toBe(stats.messages);
    expect(stats.messages).toBeGreaterThan(3500);
    const messages = golden.tasks.flatMap((t) => t.variants.flatMap((v) => v.messages ?? []));
    expect(messages.filter((m) => m.calls.length > 1).length).toBeGreaterThan(2000);
    // ... among them names no class has after a call that ran, which repeat that call's result
    const UNBOUND = "Error during execution: cannot access local variable 'func_call_result' where it is not associated with a value";
    const stale = messages.filter((m) => Array.isArray(m.outs) && m.calls.some((c, i) => ["no_such_tool", "_check_capacity", "wifi"].includes(c.name) && m.outs[i] !== UNBOUND));
    expect(stale.length).toBeGreaterThan(100);
    // multi-turn messages stopped by an exception (the later calls did not run), and results rendered after later calls changed them
    expect(messages.filter((m) => typeof m.outs === "string").length).toBeGreaterThan(500);
    expect(stats.notRun).toBeGreaterThan(500);
    expect(stats.rerendered).toBeGreaterThan(0);
    // the ground truth as its milestone messages (some of several calls) scores as the per-call ground truth
    const byKind = (kind: string) => golden.tasks.map((t) => t.variants.find((v) => v.kind === kind)!);
    expect(byKind("milestone_messages").flatMap((v) => v.messages!).filter((m) => m.calls.length > 1).length).toBeGreaterThan(2);
    expect(byKind("milestone_messages").filter((v) => v.verdict.valid).length).toBe(31);
    // the sequences exercise error paths, not only happy ones
    const calls = golden.tasks.flatMap((t) => t.variants.flatMap((v) => v.calls ?? []));
    expect(calls.filter((c) => c.out.startsWith("Error during execution: ")).length).toBeGreaterThan(500);
    expect(calls.filter((c) => c.out === "Error during execution: {str(e)}").length).toBeGreaterThan(100);
    expect(calls.filter((c) => c.out.includes('"status": false')).length).toBeGreaterThan(300);
    // and the branches the hand-written sequences are there for (refunds, caps, int/float text, escapes)
    for (const text of ["Price difference refunded", "More than 24 hours before departure", "Reminder capacity is full", "Insufficient balance to place the order", "Invalid quantity 1.5", "Error during execution: 'time'", "Total cost: 1200.0 yuan", "caf\\u00e9"])
      expect(calls.some((c) => c.out.includes(text)), text).toBe(true);
    // names the task's docs do not list, which the original's executor still looks up: every public
    // method of the five classes not in a task's docs is called in that task (in both executors), and
    // so are names no class has, private methods, attributes and the port's own JavaScript names
    const docs = toolNames();
    expect(golden.public_methods).toHaveLength(33);
    for (const t of golden.tasks) {
      const called = new Set(t.variants.filter((v) => v.kind.startsWith("unlisted_") && v.calls && v.mode === t.category).flatMap((v) => v.calls!.map((c) => c.name)));
      for (const m of golden.public_methods) if (!docs.get(t.id)!.has(m)) expect(called.has(m), `${t.id} calls ${m}`).toBe(true);
      for (const m of ["no_such_tool", "_check_capacity", "_load_scenario", "__init__", "wifi", "_call", "_unlisted_call", "constructor", "toString", "__proto__"]) expect(called.has(m), `${t.id} calls ${m}`).toBe(true);
    }
    const unlisted = golden.tasks.flatMap((t) => t.variants.filter((v) => v.kind.startsWith("unlisted")).flatMap((v) => (v.calls ?? []).filter((c) => !docs.get(t.id)!.has(c.name))));
    expect(unlisted.length).toBeGreaterThan(4000);
    // some run and change the state (a reminder deleted), some fail to bind their arguments, some name nothing
    const changed = golden.tasks.flatMap((t) => t.variants.flatMap((v) => (v.calls ?? []).filter((c, i) => i > 0 && !docs.get(t.id)!.has(c.name) && JSON.stringify(c.state) !== JSON.stringify(v.calls![i - 1]!.state))));
    expect(changed.length).toBeGreaterThan(30);
    expect(unlisted.filter((c) => /Reminder ID \d was successfully deleted/.test(c.out)).length).toBeGreaterThan(5);
    expect(unlisted.filter((c) => /^Error during execution: \w+\.\w+\(\) (missing|got an unexpected)/.test(c.out)).length).toBeGreaterThan(50);
    expect(unlisted.filter((c) => c.out.startsWith("Error during execution: cannot access local variable 'func_call_result'")).length).toBeGreaterThan(1000);
    // the Python keywords the original's decoder cannot read as a call's name are the ones our env refuses
    expect(loadPorts(defaults).AceRuntime.PY_SYNTAX_KEYWORDS).toEqual(golden.unparseable_keywords);
    // doing nothing never passes; the ground truth passes where its milestones are complete and parseable
    const verdicts = (kind: string) => golden.tasks.map((t) => t.variants.find((v) => v.kind === kind)!.verdict);
    expect(verdicts("nothing").every((v) => !v.valid && v.error_type === "wrong number of class")).toBe(true);
    expect(verdicts("gt").filter((v) => v.valid).length).toBe(31);
    console.log(`ACEBench parity: ${JSON.stringify(stats)}; ground truth passes ${verdicts("gt").filter((v) => v.valid).length}/50`);
  }, 600_000);

  test("through the bridge every task's ground truth and fuzzed calls give the original's texts, and the reward is the official end-to-end verdict", async () => {
    const mismatches: string[] = [];
    let states = 0;
    const run = async (task: Task, v: Variant) => {
      const r = await runtime.reset(task.id, 0);
      const ep = r.info.episode_id;
      let last: Step | undefined;
      for (const call of v.calls!) {
        last = await runtime.step(ep, { name: call.name, arguments: call.args });
        if (last.terminated || last.truncated) break;
        if (observationText(last) !== call.out) mismatches.push(`${task.id} [${v.kind}] ${call.name}: ${observationText(last).slice(0, 200)} != ${call.out.slice(0, 200)}`);
        // and the state the bridge tracks after the call is the original instances' (the saved attributes)
        const state = (JSON.parse(await runtime.state(ep)) as { state: unknown }).state;
        states++;
        if (!isDeepStrictEqual(state, call.view)) mismatches.push(`${task.id} [${v.kind}] ${call.name}: state ${JSON.stringify(state).slice(0, 300)} != ${JSON.stringify(call.view).slice(0, 300)}`);
      }
      // multi-step: a text reply ends the task; multi-turn: the conversation is ended and scored (no simulated user here)
      if (!last?.terminated) last = await runtime.step(ep, "finish conversation");
      if (!last.terminated) last = await runtime.finish(ep);
      // the reward info names ACEBench's process accuracy (what `envscaler eval acebench` averages)
      if (processAccuracyOf(last.info.reward_info) !== v.verdict.process_accuracy) mismatches.push(`${task.id} [${v.kind}]: process accuracy ${processAccuracyOf(last.info.reward_info)}, official ${v.verdict.process_accuracy}`);
      if (last.reward !== (v.verdict.valid ? 1 : 0) || !last.terminated) mismatches.push(`${task.id} [${v.kind}]: reward ${last.reward}, official ${JSON.stringify(v.verdict)} ${String(JSON.stringify(last.info)).slice(0, 400)} ${observationText(last).slice(0, 200)}`);
      await runtime.closeEpisode(ep);
    };
    // every sequence within the 20-step cap, calls to names the task's docs do not list included
    // (the bridge hands those to the env's unlisted_call_method, which runs them as the original's executor)
    const documented = toolNames();
    // (20 steps: the calls and the message that ends the episode; a multi-turn one also needs finish())
    const fits = (t: Task, v: Variant) => v.calls !== undefined && v.calls.length < (t.category === "multi_turn" ? 19 : 20);
    const queue = golden.tasks.flatMap((t) => t.variants.filter((v) => v.mode === t.category && fits(t, v)).map((v) => [t, v] as const));
    expect(queue.length).toBe(584);
    expect(queue.filter(([, v]) => v.kind === "fuzz_docs").length).toBe(50);
    expect(queue.filter(([, v]) => v.kind.startsWith("unlisted")).length).toBe(200);
    expect(queue.flatMap(([t, v]) => v.calls!.filter((c) => !documented.get(t.id)!.has(c.name))).length).toBeGreaterThan(2000);
    await Promise.all(
      Array.from({ length: 4 }, async () => {
        for (let x = queue.shift(); x; x = queue.shift()) await run(x[0], x[1]);
      }),
    );
    expect(mismatches.slice(0, 10)).toEqual([]);
    expect(states).toBeGreaterThan(5000);
  }, 600_000);

  test("through the bridge an action of several calls runs as the original runs one agent message: the same texts, calls not run after a multi-turn exception, the same states and the official verdict and process accuracy", async () => {
    const mismatches: string[] = [];
    let actions = 0;
    let notRun = 0;
    const run = async (task: Task, v: Variant) => {
      const r = await runtime.reset(task.id, 0);
      const ep = r.info.episode_id;
      let last: Step | undefined;
      for (const [mi, m] of v.messages!.entries()) {
        last = await runtime.step(
          ep,
          m.calls.map((c) => ({ name: c.name, arguments: c.args })),
        );
        actions++;
        if (last.terminated || last.truncated) break;
        const texts = last.observation.tool_results!.map((t) => t.content);
        const label = `${task.id} [${v.kind}] message ${mi}`;
        if (Array.isArray(m.outs)) {
          if (!isDeepStrictEqual(texts, m.outs)) mismatches.push(`${label}: ${JSON.stringify(texts).slice(0, 300)} != ${JSON.stringify(m.outs).slice(0, 300)}`);
        } else {
          // the original returns the exception's text alone; ours shows it for the call that raised, and the later calls did not run
          const k = texts.indexOf(m.outs);
          const later = texts.slice(k + 1).map((t) => (JSON.parse(t) as { error?: { type: string; message: string } }).error);
          notRun += later.length;
          if (k < 0 || !later.every((e) => e?.type === "tool_exception" && e.message.includes("not run: an earlier call of this message raised"))) mismatches.push(`${label}: ${JSON.stringify(texts).slice(0, 400)} (the original stopped at ${m.outs})`);
        }
        const state = (JSON.parse(await runtime.state(ep)) as { state: unknown; acebench?: { process: string[] } }).state;
        if (!isDeepStrictEqual(state, m.view)) mismatches.push(`${label}: state ${JSON.stringify(state).slice(0, 300)} != ${JSON.stringify(m.view).slice(0, 300)}`);
      }
      if (!last?.terminated) last = await runtime.step(ep, "finish conversation");
      if (!last.terminated) last = await runtime.finish(ep);
      if (processAccuracyOf(last.info.reward_info) !== v.verdict.process_accuracy) mismatches.push(`${task.id} [${v.kind}]: process accuracy ${processAccuracyOf(last.info.reward_info)}, official ${v.verdict.process_accuracy}`);
      if (last.reward !== (v.verdict.valid ? 1 : 0)) mismatches.push(`${task.id} [${v.kind}]: reward ${last.reward}, official ${JSON.stringify(v.verdict)}`);
      await runtime.closeEpisode(ep);
    };
    const fits = (t: Task, v: Variant) => v.messages !== undefined && v.mode === t.category && v.messages.length < (t.category === "multi_turn" ? 19 : 20);
    const queue = golden.tasks.flatMap((t) => t.variants.filter((v) => fits(t, v)).map((v) => [t, v] as const));
    expect(queue.length).toBe(210);
    await Promise.all(
      Array.from({ length: 4 }, async () => {
        for (let x = queue.shift(); x; x = queue.shift()) await run(x[0], x[1]);
      }),
    );
    expect(mismatches.slice(0, 10)).toEqual([]);
    expect(actions).toBeGreaterThan(1000);
    expect(notRun).toBeGreaterThan(50);
  }, 600_000);

  test("a Python keyword as a call's name makes the whole action unreadable to ACEBench's decoder: none of its calls runs", async () => {
    const r = await runtime.reset("agent_multi_step_0", 0);
    const ep = r.info.episode_id;
    const before = await runtime.state(ep);
    const s = (await runtime.step(ep, [
      { name: "turn_on_wifi", arguments: {} },
      { name: "class", arguments: {} },
    ])) as unknown as Step & { info: { diff: unknown[] } };
    for (const t of s.observation.tool_results!) expect(JSON.parse(t.content).error).toMatchObject({ type: "tool_exception", message: expect.stringContaining("'class' is a Python keyword: ACEBench's decoder cannot read a message calling it, so none of its calls ran") });
    expect(s.info.diff).toEqual([]);
    expect(await runtime.state(ep)).toBe(before);
    // and the env's batch is closed: the next action runs normally
    const next = (await runtime.step(ep, [{ name: "turn_on_wifi", arguments: {} }, { name: "no_such_tool", arguments: {} }])) as unknown as Step;
    expect(next.observation.tool_results!.map((t) => t.content)).toEqual(['{"status": true, "message": "Wi-Fi has been turned on"}', '{"status": true, "message": "Wi-Fi has been turned on"}']);
    await runtime.closeEpisode(ep);
  });

  test("a method the task's docs do not list runs as in the original, but the agent's tool list stays the docs; a Python keyword or a non-identifier is refused", async () => {
    const r = await runtime.reset("agent_multi_step_0", 0);
    const ep = r.info.episode_id;
    const tools = (r.info as { tools: { function: { name: string } }[] }).tools.map((t) => t.function.name);
    expect(tools).toEqual([...toolNames().get("agent_multi_step_0")!]);
    expect(tools).not.toContain("view_all_reminders");
    const before = (await runtime.step(ep, { name: "view_all_reminders", arguments: {} })) as unknown as Step;
    expect(observationText(before)).toMatch(/^\{"status": true, "reminders": \[\{"title": "Doctor's Appointment"/);
    await runtime.step(ep, { name: "turn_on_wifi", arguments: {} });
    await runtime.step(ep, { name: "login_device", arguments: {} });
    const del = (await runtime.step(ep, { name: "delete_reminder", arguments: { reminder_id: 1 } })) as unknown as Step & { info: { diff: unknown[] } };
    expect(del.terminated).toBe(false);
    expect(observationText(del)).toBe('{"status": true, "message": "Reminder ID 1 was successfully deleted."}');
    expect(del.info.diff.length).toBeGreaterThan(0);
    // a name the docs list but no class has (ACEBench's search_reminders), and one nothing has, answer as the original executor
    for (const name of ["search_reminders", "no_such_tool", "_check_capacity"]) {
      const t = (await runtime.step(ep, { name, arguments: {} })) as unknown as Step;
      expect(observationText(t)).toBe("Error during execution: cannot access local variable 'func_call_result' where it is not associated with a value");
    }
    const kw = (await runtime.step(ep, { name: "class", arguments: {} })) as unknown as Step & { info: { diff: unknown[] } };
    expect(JSON.parse(observationText(kw)).error).toMatchObject({ type: "tool_exception", message: expect.stringContaining("'class' is a Python keyword") });
    expect(kw.info.diff).toEqual([]);
    const odd = (await runtime.step(ep, { name: "delete-reminder", arguments: {} })) as unknown as Step;
    expect(JSON.parse(observationText(odd)).error).toMatchObject({ type: "unknown_tool", message: expect.stringContaining("turn_on_wifi") });
    await runtime.closeEpisode(ep);
  });

  test("bundles: the tools are ACEBench's docs per task group, multi-turn tasks are conversations with ACEBench's user prompt", () => {
    const dirs = readdirSync(bundles).sort();
    expect(dirs).toEqual(["acebench-multi-step-phone", "acebench-multi-turn-phone", "acebench-multi-turn-travel", "acebench-multi-turn-travel-transfer"]);
    const manifest = JSON.parse(readFileSync(join(bundles, "acebench-multi-turn-travel-transfer", "manifest.json"), "utf8")) as { tools: { function: { name: string; parameters: { type: string } } }[] };
    expect(manifest.tools.map((t) => t.function.name)).toContain("find_transfer_flights");
    expect(manifest.tools.every((t) => t.function.parameters.type === "object")).toBe(true);
    const sc = (JSON.parse(readFileSync(join(bundles, "acebench-multi-turn-phone", "scenarios.json"), "utf8")) as { mode: string; user_instructions: string; task: string }[])[0]!;
    expect(sc.mode).toBe("conversation");
    expect(sc.user_instructions).toContain(sc.task);
    expect(sc.user_instructions).toContain("###STOP###");
    expect(sc.user_instructions).not.toContain("finish conversation");
    // multi-step: the loop of the original (its agent prompt's closing line as the env's rule; a
    // text without the marker is answered with the execution role's request to go on)
    const step = JSON.parse(readFileSync(join(bundles, "acebench-multi-step-phone", "manifest.json"), "utf8")) as { rules: string[] };
    expect(step.rules).toEqual([expect.stringContaining('"finish conversation"')]);
    const stepSc = (JSON.parse(readFileSync(join(bundles, "acebench-multi-step-phone", "scenarios.json"), "utf8")) as { text_reply?: { end_marker: string; otherwise: string } }[])[0]!;
    expect(stepSc.text_reply).toEqual({ end_marker: "finish conversation", otherwise: expect.stringMatching(/^Please do not ask me any questions/) });
  });
});
