// The entry of every worker thread (see startWorker): the same setup for every kind, then the
// kind's module (which gives its SandboxHost workerMonitor(), the thread's deadline reporter). Guest code's virtual clock is UTC wherever it runs.
import { workerData } from "node:worker_threads";
import type { WorkerBoot } from "./worker-thread.js";

process.env.TZ = "UTC";
await import((workerData as WorkerBoot).module);
