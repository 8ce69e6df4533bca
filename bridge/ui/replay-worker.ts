// Worker thread for the UI's replay: re-executes one recorded episode under the watchdog of
// runWatchedWorker (replayIsolated). Replay runs recorded env code, as untrusted as in training.
// Started by the one worker bootstrap (startWorker), which publishes guest calls' deadlines.
import { parentPort } from "node:worker_threads";
import { replayAll } from "../record/replay.js";
import type { RecordedEpisode } from "../record/trajectory-reader.js";
import { workerInput } from "../engine/worker-thread.js";

export interface ReplayWorkerInput {
  envs: string[];
  episode: RecordedEpisode;
}

const init = workerInput<ReplayWorkerInput>();
const [result] = await replayAll(init.envs, [init.episode]);
parentPort!.postMessage({ result });
