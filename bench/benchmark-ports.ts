// Reset and step of the BFCL and ACEBench ports served by the bridge's engine, next to the original
// Python backends run the way their harnesses run them (bench/py/ports_speed.py), on the same
// tasks and ground-truth calls. By hand, not part of `npm run bench`:
//
//   npx tsx bench/benchmark-ports.ts [python with bfcl-eval] [ACEBench folder]
//
// Ours: EnvRuntime in this process (one engine worker thread), reset = a new episode (sandbox,
// env constructor: instances from the task's initial config), step = one tool call (sandbox call,
// Python-text rendering, state tracking, the in-env checker's bookkeeping). Theirs: the executor's
// instance set-up and one `eval`'d call string. Medians over 3 repetitions of every task.
import { execFileSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { EnvRuntime } from "../bridge/engine/env-runtime.js";
import { importAcebench } from "../envs/acebench/import-acebench.js";
import { findBfclPackage, importBfcl } from "../envs/bfcl/import-bfcl.js";

const ROOT = join(import.meta.dirname, "..");
const PY = process.argv[2] || join(ROOT, ".venv", "bin", "python");
const ACE = process.argv[3] || join(ROOT, "..", "shared", "benchmarks", "acebench");
const REPS = 3;
const work = mkdtempSync(join(tmpdir(), "envscaler-ports-speed-"));

/** A JSON argument value (with {"$float": x} for integral floats) as Python source. */
function py(v: unknown): string {
  if (v === null) return "None";
  if (v === true) return "True";
  if (v === false) return "False";
  if (typeof v === "number" || typeof v === "string") return JSON.stringify(v);
  if (Array.isArray(v)) return `[${v.map(py).join(", ")}]`;
  const o = v as Record<string, unknown>;
  if (Object.keys(o).length === 1 && "$float" in o) return `${o.$float as number}.0`;
  return `{${Object.entries(o).map(([k, x]) => `${JSON.stringify(k)}: ${py(x)}`).join(", ")}}`;
}

interface Task {
  id: string;
  involved_classes: string[];
  initial_config: unknown;
  long_context?: boolean;
  calls: { name: string; arguments: Record<string, unknown> }[];
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function ours(envs: string, tasks: Task[]): Promise<{ reset_ms: number[]; step_ms: number[] }> {
  const runtime = await EnvRuntime.start({ envs: [envs], workers: 1 });
  const reset_ms: number[] = [];
  const step_ms: number[] = [];
  try {
    for (let rep = 0; rep < REPS; rep++) {
      for (const t of tasks) {
        let t0 = performance.now();
        const r = await runtime.reset(t.id, 0);
        reset_ms.push(performance.now() - t0);
        for (const c of t.calls) {
          t0 = performance.now();
          await runtime.step(r.info.episode_id, c);
          step_ms.push(performance.now() - t0);
        }
        await runtime.closeEpisode(r.info.episode_id);
      }
    }
  } finally {
    await runtime.close();
  }
  return { reset_ms, step_ms };
}

function theirs(which: string, tasks: Task[]): { reset_ms: number[]; step_ms: number[] } {
  const plan = join(work, `${which}-plan.json`);
  writeFileSync(plan, JSON.stringify(tasks.map((t) => ({ ...t, calls: t.calls.map((c) => `${c.name}(${Object.entries(c.arguments).map(([k, v]) => `${k}=${py(v)}`).join(", ")})`) }))));
  return JSON.parse(execFileSync(PY, [join(ROOT, "bench", "py", "ports_speed.py"), which, plan], { encoding: "utf8", env: { ...process.env, ACEBENCH_DIR: ACE, REPS: String(REPS) }, maxBuffer: 1 << 26 })) as { reset_ms: number[]; step_ms: number[] };
}

function report(name: string, tasks: Task[], a: { reset_ms: number[]; step_ms: number[] }, b: { reset_ms: number[]; step_ms: number[] }) {
  const calls = tasks.reduce((n, t) => n + t.calls.length, 0);
  const f = (x: number) => (x < 1 ? `${(x * 1000).toFixed(0)} µs` : `${x.toFixed(2)} ms`);
  console.log(`| reset, ${name} (${tasks.length} tasks × ${REPS}) | ${f(median(a.reset_ms))} | ${f(median(b.reset_ms))} original executor | ${(median(b.reset_ms) / median(a.reset_ms)).toFixed(2)}× |`);
  console.log(`| step, ${name} (${calls} calls × ${REPS}) | ${f(median(a.step_ms))} | ${f(median(b.step_ms))} original executor | ${(median(b.step_ms) / median(a.step_ms)).toFixed(2)}× |`);
}

// BFCL: every 10th base task whose ground truth uses keyword arguments only (the served tool calls are keyword calls)
const bfclDir = join(work, "bfcl");
importBfcl(findBfclPackage(PY), bfclDir, ["base"], PY);
const bfclTasks: Task[] = [];
for (const d of readdirSync(bfclDir))
  for (const s of JSON.parse(readFileSync(join(bfclDir, d, "scenarios.json"), "utf8")) as { id: string; initial_state: { task: { involved_classes: string[]; initial_config: unknown; ground_truth: { name: string; args: Record<string, unknown>; pos?: unknown[] }[][] } } }[]) {
    const t = s.initial_state.task;
    const calls = t.ground_truth.flat();
    if (Number(s.id.split("_").pop()) % 10 === 0 && calls.every((c) => !c.pos)) bfclTasks.push({ id: s.id, involved_classes: t.involved_classes, initial_config: t.initial_config, calls: calls.map((c) => ({ name: c.name, arguments: c.args })) });
  }

// ACEBench: every task's parseable ground-truth calls (from the oracle's replay)
const aceDir = join(work, "acebench");
importAcebench(ACE, aceDir, undefined, PY);
const golden = join(work, "ace-golden.json");
execFileSync(PY, [join(ROOT, "python-client", "tests", "acebench_oracle.py"), ACE, golden, "--fuzz", "1"], { stdio: "ignore" });
const aceTasks: Task[] = (JSON.parse(readFileSync(golden, "utf8")) as { tasks: { id: string; category: string; involved_classes: string[]; initial_config: unknown; variants: { kind: string; mode: string; calls: { name: string; args: Record<string, unknown> }[] }[] }[] }).tasks.map((t) => ({
  id: t.id,
  involved_classes: t.involved_classes,
  initial_config: t.initial_config,
  calls: t.variants.find((v) => v.kind === "gt" && v.mode === t.category)!.calls.map((c) => ({ name: c.name, arguments: c.args })),
}));

console.log("| measure | ours (bridge engine, p50) | original (p50) | original ÷ ours |\n| --- | --- | --- | --- |");
report("BFCL base", bfclTasks, await ours(bfclDir, bfclTasks), theirs("bfcl", bfclTasks));
report("ACEBench-Agent", aceTasks, await ours(aceDir, aceTasks), theirs("acebench", aceTasks));
