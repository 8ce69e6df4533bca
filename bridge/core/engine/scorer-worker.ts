// Scorer thread (see Scorer): scores episodes ended by a reset of a live episode, off the thread
// that serves them. Checks run in their own sandboxes here exactly as they would in the engine
// (runChecks), over the states the job carries; reference states are replayed and cached here.
// Started by the one worker bootstrap (startWorker); its SandboxHost publishes guest calls'
// deadlines on the thread's board, so the Scorer's watchdog can stop a check that ignores its own.
import { parentPort } from "node:worker_threads";
import { EnvRegistry } from "../../../envs/format/registry.js";
import { ReferenceCache } from "../episode/reference-state.js";
import { jobInputs, scoreEnd, type ScoreJob } from "../episode/score-job.js";
import { SandboxHost } from "../sandbox/sandbox-host.js";
import type { ScorerReply } from "./scorer.js";
import { workerInput, workerMonitor } from "./worker-thread.js";

const init = workerInput<{ envPaths: string[] }>();
const port = parentPort!;
const registry = EnvRegistry.load(init.envPaths);
const sandboxes = new SandboxHost({ monitor: workerMonitor(), label: "Scorer" });
const references = new ReferenceCache(sandboxes);

async function score(job: ScoreJob): Promise<ScorerReply["result"]> {
  const { initial, final, reference } = jobInputs(job, registry, references);
  const scenario = registry.scenario(job.scenario_id)!.scenario;
  return scoreEnd(sandboxes, scenario, job.seed, { initial, final, actions: job.actions, messages: job.messages, reference }, job.end);
}

// one job at a time, in arrival order: a thread's sandboxes serve one guest call at a time anyway
let queue: Promise<void> = Promise.resolve();
port.on("message", (m: { id: number; job: ScoreJob }) => {
  queue = queue.then(() =>
    score(m.job).then(
      (result) => port.postMessage({ id: m.id, result } satisfies ScorerReply),
      (e: unknown) => port.postMessage({ id: m.id, error: e instanceof Error ? e.message : String(e) } satisfies ScorerReply),
    ),
  );
});
port.postMessage({ ready: true });
