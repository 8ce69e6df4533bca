// Reset and step of the BFCL and ACEBench ports served by the bridge's engine, next to the original
// Python backends run the way their harnesses run them (bench/py/ports_speed.py), on the same
// tasks and ground-truth calls. Part of `npm run bench` (section `ports`), or by hand:
//
//   npx tsx bench/benchmark-ports.ts [python with bfcl-eval] [ACEBench folder]
//
// Ours: EnvRuntime in this process (one engine worker thread), reset = a new episode (sandbox,
// env constructor: instances from the task's initial config), step = one tool call (sandbox call,
// Python-text rendering, state tracking, the in-env checker's bookkeeping). Theirs: the executor's
// instance set-up and one `eval`'d call string. Ours and theirs alternate within each of 3
// repetitions; each figure is the median [min–max] of the repetitions' medians.
import { execFileSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { EnvRuntime } from "../bridge/core/engine/env-runtime.js";
import { importAcebench } from "../envs/acebench/import-acebench.js";
import { findBfclPackage, importBfcl } from "../envs/bfcl/import-bfcl.js";
import { spread, versus, type Row } from "./rows.js";

// the repository root, from bench/ (tsx) or dist/bench/ (compiled)
const ROOT = resolve(import.meta.dirname, import.meta.url.endsWith(".ts") ? ".." : "../..");
const REPS = 3;

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

/** One pass over the tasks on our engine: a reset per task, then its calls. */
async function ours(runtime: EnvRuntime, tasks: Task[]): Promise<{ reset_ms: number[]; step_ms: number[] }> {
  const reset_ms: number[] = [];
  const step_ms: number[] = [];
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
  return { reset_ms, step_ms };
}

function theirs(o: PortsOptions, work: string, which: string, tasks: Task[]): { reset_ms: number[]; step_ms: number[] } {
  const plan = join(work, `${which}-plan.json`);
  writeFileSync(plan, JSON.stringify(tasks.map((t) => ({ ...t, calls: t.calls.map((c) => `${c.name}(${Object.entries(c.arguments).map(([k, v]) => `${k}=${py(v)}`).join(", ")})`) }))));
  const env = { ...process.env, ACEBENCH_DIR: o.acebench, REPS: "1" };
  return JSON.parse(execFileSync(o.py, [join(ROOT, "bench", "py", "ports_speed.py"), which, plan], { encoding: "utf8", env, maxBuffer: 1 << 26 })) as { reset_ms: number[]; step_ms: number[] };
}

export interface PortsOptions {
  /** A Python with bfcl-eval installed. */
  py: string;
  /** The ACEBench folder (../shared/benchmarks/acebench). */
  acebench: string;
}

/** Reset and step rows for each port, ours and the original alternating within each repetition. */
async function rowsFor(o: PortsOptions, work: string, name: string, which: string, envs: string, tasks: Task[]): Promise<Row[]> {
  const runtime = await EnvRuntime.start({ envs: [envs], workers: 1 });
  const m = { ours: { reset: [] as number[], step: [] as number[] }, theirs: { reset: [] as number[], step: [] as number[] } };
  try {
    for (let rep = 0; rep < REPS; rep++) {
      const a = await ours(runtime, tasks);
      const b = theirs(o, work, which, tasks);
      m.ours.reset.push(median(a.reset_ms));
      m.ours.step.push(median(a.step_ms));
      m.theirs.reset.push(median(b.reset_ms));
      m.theirs.step.push(median(b.step_ms));
    }
  } finally {
    await runtime.close();
  }
  const calls = tasks.reduce((n, t) => n + t.calls.length, 0);
  const us = (xs: number[]) => `${spread(xs.map((x) => x * 1000))} µs`;
  return [
    { what: `reset, ${name} port (${tasks.length} tasks; a new episode: sandbox and the task's instances)`, ours: us(m.ours.reset), reference: `${us(m.theirs.reset)} original executor's set-up (Python, in process, no isolation)`, ratio: `${versus(median(m.ours.reset), median(m.theirs.reset), false)} than the original`, target: "— (both far below a model call)", met: null },
    { what: `step, ${name} port (${calls} ground-truth calls; one tool call with its text and state tracking)`, ours: us(m.ours.step), reference: `${us(m.theirs.step)} original executor's eval of the call`, ratio: `${versus(median(m.ours.step), median(m.theirs.step), false)} than the original`, target: "—", met: null },
  ];
}

/** The `ports` bench section: BFCL base and ACEBench-Agent, ours next to the originals. */
export async function portRows(o: PortsOptions): Promise<Row[]> {
  const work = mkdtempSync(join(tmpdir(), "envscaler-ports-speed-"));
  // BFCL: every 10th base task whose ground truth uses keyword arguments only (the served tool calls are keyword calls)
  const bfclDir = join(work, "bfcl");
  importBfcl(findBfclPackage(o.py), bfclDir, ["base"], o.py);
  const bfclTasks: Task[] = [];
  for (const d of readdirSync(bfclDir))
    for (const s of JSON.parse(readFileSync(join(bfclDir, d, "scenarios.json"), "utf8")) as { id: string; initial_state: { task: { involved_classes: string[]; initial_config: unknown; ground_truth: { name: string; args: Record<string, unknown>; pos?: unknown[] }[][] } } }[]) {
      const t = s.initial_state.task;
      const calls = t.ground_truth.flat();
      if (Number(s.id.split("_").pop()) % 10 === 0 && calls.every((c) => !c.pos)) bfclTasks.push({ id: s.id, involved_classes: t.involved_classes, initial_config: t.initial_config, calls: calls.map((c) => ({ name: c.name, arguments: c.args })) });
    }
  const rows = await rowsFor(o, work, "BFCL base", "bfcl", bfclDir, bfclTasks);

  // ACEBench: every task's parseable ground-truth calls (from the oracle's replay)
  const aceDir = join(work, "acebench");
  importAcebench(o.acebench, aceDir, undefined, o.py);
  const golden = join(work, "ace-golden.json");
  execFileSync(o.py, [join(ROOT, "python-client", "tests", "acebench_oracle.py"), o.acebench, golden, "--fuzz", "1"], { stdio: "ignore" });
  type Golden = { tasks: { id: string; category: string; involved_classes: string[]; initial_config: unknown; variants: { kind: string; mode: string; calls: { name: string; args: Record<string, unknown> }[] }[] }[] };
  const aceTasks: Task[] = (JSON.parse(readFileSync(golden, "utf8")) as Golden).tasks.map((t) => ({
    id: t.id,
    involved_classes: t.involved_classes,
    initial_config: t.initial_config,
    calls: t.variants.find((v) => v.kind === "gt" && v.mode === t.category)!.calls.map((c) => ({ name: c.name, arguments: c.args })),
  }));
  rows.push(...(await rowsFor(o, work, "ACEBench-Agent", "acebench", aceDir, aceTasks)));
  return rows;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const rows = await portRows({ py: process.argv[2] || join(ROOT, ".venv", "bin", "python"), acebench: process.argv[3] || join(ROOT, "..", "shared", "benchmarks", "acebench") });
  console.log("| measure | ours | original | ratio |\n| --- | --- | --- | --- |");
  for (const r of rows) console.log(`| ${r.what} | ${r.ours} | ${r.reference} | ${r.ratio} |`);
}
