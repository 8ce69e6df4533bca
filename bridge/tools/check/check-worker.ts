// Worker thread for `envscaler check`: validates one bundle under the watchdog of
// runWatchedWorker (checkBundleIsolated). Started by the one worker bootstrap (startWorker); its
// SandboxHost publishes guest calls' deadlines to that watchdog (workerMonitor). Nothing here outlives the bundle it checks.
import { parentPort } from "node:worker_threads";
import { BundleLoadError, loadBundle } from "../../../envs/format/load-bundle.js";
import { workerInput, workerMonitor } from "../../core/engine/worker-thread.js";
import { SandboxHost } from "../../core/sandbox/sandbox-host.js";
import { checkBundle, type CheckReport } from "./check-bundle.js";

export interface CheckWorkerInput {
  dir: string;
  probes: boolean;
}

const init = workerInput<CheckWorkerInput>();
const port = parentPort!;
// this worker's sandboxes, watched by its starter's watchdog
const sandboxes = new SandboxHost({ monitor: workerMonitor(), label: "check worker" });
let report: CheckReport;
try {
  report = await checkBundle(loadBundle(init.dir), { onProgress: (stage) => port.postMessage({ stage }), probes: init.probes, sandboxes });
} catch (e) {
  if (!(e instanceof BundleLoadError)) throw e;
  report = { envId: init.dir, dir: init.dir, tools: 0, scenarios: 0, problems: e.problems.map((p) => `${p.file}: ${p.message}`), warnings: [], probes: {} };
}
port.postMessage({ report });
sandboxes.dispose();
