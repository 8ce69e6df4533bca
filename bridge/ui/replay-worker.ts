// Worker thread for the UI's replay: re-executes one recorded episode, reporting each guest call's
// deadline in a shared buffer so the parent can stop this thread when a native builtin ignores it
// (see replayIsolated). Replay runs recorded env code, which is as untrusted as in training.
import { parentPort, workerData } from "node:worker_threads";
import { replayAll } from "../record/replay.js";
import type { RecordedEpisode } from "../record/trajectory-reader.js";
import { setCallMonitor } from "../sandbox/sandbox.js";

process.env.TZ = "UTC";

interface ReplayWorkerInit {
  envs: string[];
  episode: RecordedEpisode;
  watch: SharedArrayBuffer;
}
const init = workerData as ReplayWorkerInit;
const watch = new Float64Array(init.watch);

setCallMonitor({
  start(deadlineMs) {
    watch[0] = deadlineMs;
  },
  end() {
    watch[0] = 0;
  },
});

const [result] = await replayAll(init.envs, [init.episode]);
parentPort!.postMessage({ result });
