// Worker thread for the UI's replay: re-executes one recorded episode under the watchdog of
// runWatchedWorker (replayIsolated). Replay runs recorded env code, as untrusted as in training.
import { parentPort, workerData } from "node:worker_threads";
import { replayAll } from "../record/replay.js";
import type { RecordedEpisode } from "../record/trajectory-reader.js";
import { reportCallDeadlines } from "../engine/watched-worker.js";

process.env.TZ = "UTC";

interface ReplayWorkerInit {
  envs: string[];
  episode: RecordedEpisode;
  watch: SharedArrayBuffer;
}
const init = workerData as ReplayWorkerInit;
reportCallDeadlines(init.watch);

const [result] = await replayAll(init.envs, [init.episode]);
parentPort!.postMessage({ result });
