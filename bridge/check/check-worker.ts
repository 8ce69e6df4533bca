// Worker thread for `envscaler check`: validates one bundle under the watchdog of
// runWatchedWorker (checkBundleIsolated). Nothing here outlives the bundle it checks.
import { parentPort, workerData } from "node:worker_threads";
import { BundleLoadError, loadBundle } from "../../envs/format/load-bundle.js";
import { reportCallDeadlines } from "../engine/watched-worker.js";
import { checkBundle, type CheckReport } from "./check-bundle.js";

process.env.TZ = "UTC";

interface CheckWorkerInit {
  dir: string;
  probes: boolean;
  watch: SharedArrayBuffer;
}
const init = workerData as CheckWorkerInit;
const port = parentPort!;
reportCallDeadlines(init.watch);

let report: CheckReport;
try {
  report = await checkBundle(loadBundle(init.dir), { onProgress: (stage) => port.postMessage({ stage }), probes: init.probes });
} catch (e) {
  if (!(e instanceof BundleLoadError)) throw e;
  report = { envId: init.dir, dir: init.dir, tools: 0, scenarios: 0, problems: e.problems.map((p) => `${p.file}: ${p.message}`), warnings: [], probes: {} };
}
port.postMessage({ report });
