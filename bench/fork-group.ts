// The fork-group row: a GRPO group of 64 played from Python through the client users call
// (EnvScalerVectorEnv.fork, then vec.step), on 2 replicas (the group spread over both: the
// snapshot exported once and imported on the other) against the same on 1 replica. Runs alternate
// between the two layouts so load from elsewhere on a shared machine falls on both.
import { execFile, execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import type { Logger } from "pino";
import { Supervisor } from "../bridge/fronts/zmq/supervisor.js";
import { BUNDLED_ENVS } from "../envs/bundled.js";
import { median, spread, type Row, versus } from "./rows.js";

const execFileAsync = promisify(execFile);

export interface ForkGroupOptions {
  root: string;
  quick: boolean;
  logger: Logger;
  /** @default 64 */
  group?: number;
}

interface Run {
  steps_per_s: number;
  fork_ms: number;
  steps_per_round: number;
}

const WHAT = "fork group of 64 from Python (`vec.fork(0)`, then library-1's reference solution played on the group), env-steps/s incl. the fork, 2 replicas vs 1";

export async function forkGroupRows(o: ForkGroupOptions): Promise<{ rows: Row[]; raw: unknown }> {
  // the client under test is the package, so it runs from the test venv (where it is installed), not the bench's
  const py = join(o.root, ".venv", "bin", "python");
  try {
    execFileSync(py, ["-c", "import envscaler, gymnasium"], { stdio: "ignore" });
  } catch {
    return { rows: [{ what: WHAT, ours: "—", reference: `n/a: ${py} cannot import envscaler (npm test sets up that venv)`, ratio: "—", target: "≥ 1.6× one replica", met: null }], raw: null };
  }
  const envs = join(BUNDLED_ENVS, "library");
  const group = o.group ?? 64;
  const reps = o.quick ? 1 : 3;
  const rounds = o.quick ? "2" : "5";
  // untimed rounds first, on each fresh bridge: in a replica's first seconds V8 compiles QuickJS's
  // hot wasm functions on background threads (measured: ~3.3 s of CPU in the first 7 s of this
  // bench on one replica, as much again on each other replica), which a trainer's hours-long run
  // pays once; timed alongside, it charged two replicas twice what it charged one
  const warmup = o.quick ? "4" : "6";
  const script = join(o.root, "bench", "py", "fork_group.py");
  if (!existsSync(script)) throw new Error(`${script} is missing`);
  const run = async (replicas: number): Promise<Run> => {
    const sup = new Supervisor({ envs: [envs], endpoint: "tcp://127.0.0.1:*", replicas, logger: o.logger });
    const { endpoints } = await sup.start();
    try {
      const { stdout } = await execFileAsync(py, [script, "--endpoints", endpoints.join(","), "--envs", envs, "--group", String(group), "--rounds", rounds, "--warmup", warmup], { encoding: "utf8" });
      return JSON.parse(stdout.trim().split("\n").at(-1)!) as Run;
    } finally {
      await sup.stop();
    }
  };
  const one: Run[] = [];
  const two: Run[] = [];
  for (let rep = 0; rep < reps; rep++) {
    // alternate who goes first
    if (rep % 2 === 0) {
      one.push(await run(1));
      two.push(await run(2));
    } else {
      two.push(await run(2));
      one.push(await run(1));
    }
  }
  const [r1, r2] = [one.map((r) => r.steps_per_s), two.map((r) => r.steps_per_s)];
  const ratio = median(r2) / median(r1);
  const row: Row = {
    what: WHAT,
    ours: `${spread(r2, 0)} (fork ${spread(two.map((r) => r.fork_ms))} ms)`,
    reference: `${spread(r1, 0)} on 1 replica (fork ${spread(one.map((r) => r.fork_ms))} ms)`,
    ratio: versus(median(r2), median(r1), true),
    target: "≥ 1.6× one replica (2 cores, shared with the Python client)",
    met: ratio >= 1.6,
  };
  return { rows: [row], raw: { group, rounds: Number(rounds), warmup: Number(warmup), one, two } };
}
