import { runWatchedWorker } from "../../core/engine/watched-worker.js";
import type { ReplayResult } from "../../tools/record/replay.js";
import type { RecordedEpisode } from "../../tools/record/trajectory-reader.js";
import { ApiError } from "./http-util.js";
import type { ReplayWorkerInput } from "./replay-worker.js";

/**
 * replay.ts's replayEpisode on a watched worker thread of its own, so that a recorded env whose
 * builtin ignores the sandbox's deadline cannot hang the UI: the watchdog stops the worker and the
 * request gets `env_timeout`. A worker that fails any other way gets `env_crashed`.
 */
export async function replayIsolated(envs: string[], episode: RecordedEpisode, hardStopGraceMs = 1000): Promise<ReplayResult> {
  return runWatchedWorker<ReplayResult>({
    base: import.meta.url,
    name: "replay-worker",
    data: { envs, episode } satisfies ReplayWorkerInput,
    graceMs: hardStopGraceMs,
    message: (m) => (m as { result: ReplayResult }).result,
    failed: (kind, detail) => {
      if (kind === "stalled") throw new ApiError(422, "env_timeout", `during replay, ${detail}; the replay was stopped`);
      throw new ApiError(422, "env_crashed", kind === "error" ? `the replay failed: ${detail}` : `the replay's worker exited (${detail})`);
    },
  });
}
