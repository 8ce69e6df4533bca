// The entry of every worker thread (see startWorker): the same setup for every kind, then the
// kind's module. Guest code's virtual clock is UTC wherever it runs.
import { workerData } from "node:worker_threads";
import { DeadlineBoard, reportCallDeadlines } from "./watchdog.js";
import type { WorkerBoot } from "./worker-thread.js";

process.env.TZ = "UTC";
const boot = workerData as WorkerBoot;
if (boot.watch) reportCallDeadlines(new DeadlineBoard(boot.watch));
await import(boot.module);
