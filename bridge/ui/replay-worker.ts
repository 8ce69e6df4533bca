// Worker thread for the UI's replay: re-executes one recorded episode under the watchdog of
// runWatchedWorker (replayIsolated). Replay runs recorded env code, as untrusted as in training.
import { parentPort, workerData } from "node:worker_threads";
import { replayAll } from "../record/replay.js";
import type { RecordedEpisode } from "../record/trajectory-reader.js";
import { reportCallDeadlines } from "../engine/watched-worker.js";
import { SandboxHost } from "../sandbox/sandbox-host.js";

process.env.TZ = "UTC";

interface ReplayWorkerInit {
  envs: string[];
  episode: RecordedEpisode;
  watch: SharedArrayBuffer;
}
const init = workerData as ReplayWorkerInit;
// this worker's sandboxes, watched by its parent's watchdog
const sandboxes = new SandboxHost({ monitor: reportCallDeadlines(init.watch), label: "replay worker" });

const [result] = await replayAll(init.envs, [init.episode], sandboxes);
sandboxes.dispose();
parentPort!.postMessage({ result });
