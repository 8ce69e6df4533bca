import { Worker } from "node:worker_threads";
import type { ReplayResult } from "../record/replay.js";
import type { RecordedEpisode } from "../record/trajectory-reader.js";
import { ENGINE_STACK_MB } from "../sandbox/limits.js";
import { ApiError } from "./http-util.js";

/**
 * replay.ts's replayEpisode on a worker thread of its own, so that a recorded env whose builtin
 * ignores the sandbox's deadline cannot hang the UI: a watchdog stops the worker and the request
 * gets `env_timeout`. A worker that fails any other way gets `env_crashed`.
 */
export async function replayIsolated(envs: string[], episode: RecordedEpisode, hardStopGraceMs = 1000): Promise<ReplayResult> {
  const watch = new Float64Array(new SharedArrayBuffer(8));
  const ts = import.meta.url.endsWith(".ts");
  const worker = new Worker(new URL(ts ? "./replay-worker-dev.mjs" : "./replay-worker.js", import.meta.url), {
    workerData: { envs, episode, watch: watch.buffer },
    resourceLimits: { stackSizeMb: ENGINE_STACK_MB },
  });
  try {
    return await new Promise<ReplayResult>((resolve, reject) => {
      const timer = setInterval(() => {
        const deadline = watch[0]!;
        if (deadline !== 0 && Date.now() > deadline + hardStopGraceMs) {
          clearInterval(timer);
          reject(new ApiError(422, "env_timeout", "a guest call ignored its deadline during replay (a builtin that cannot be interrupted); the replay was stopped"));
        }
      }, 100);
      worker.on("message", (m: { result: ReplayResult }) => {
        clearInterval(timer);
        resolve(m.result);
      });
      worker.on("error", (e) => {
        clearInterval(timer);
        reject(new ApiError(422, "env_crashed", `the replay failed: ${e.message}`));
      });
      worker.on("exit", (code) => {
        clearInterval(timer);
        reject(new ApiError(422, "env_crashed", `the replay's worker exited (code ${code})`));
      });
    });
  } finally {
    await worker.terminate();
  }
}
