// Worker thread for the UI's replay: re-executes one recorded episode under the watchdog of
// runWatchedWorker (replayIsolated). Replay runs recorded env code, as untrusted as in training.
// Started by the one worker bootstrap (startWorker); its SandboxHost publishes guest calls' deadlines (workerMonitor).
import { parentPort } from "node:worker_threads";
import { replayAll } from "../../tools/record/replay.js";
import type { RecordedEpisode } from "../../tools/record/trajectory-reader.js";
import { workerInput, workerMonitor } from "../../core/engine/worker-thread.js";
import { SandboxHost } from "../../core/sandbox/sandbox-host.js";

export interface ReplayWorkerInput {
  envs: string[];
  episode: RecordedEpisode;
}

const init = workerInput<ReplayWorkerInput>();
// this worker's sandboxes, watched by its starter's watchdog
const sandboxes = new SandboxHost({ monitor: workerMonitor(), label: "replay worker" });
const [result] = await replayAll(init.envs, [init.episode], sandboxes);
sandboxes.dispose();
parentPort!.postMessage({ result });
