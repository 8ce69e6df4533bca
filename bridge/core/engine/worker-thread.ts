// Starting a worker thread: one bootstrap (worker-bootstrap.ts) for every kind (engine workers,
// a replica's serving thread, the one-shot workers of check and replay). It sets the time zone,
// publishes guest calls' deadlines on the thread's DeadlineBoard when one is given, then loads
// the kind's module. From the TypeScript sources (vitest, tsx) the bootstrap's `-dev.mjs` entry
// registers tsx inside the thread first; the built package runs the compiled modules directly.
import { Worker, workerData } from "node:worker_threads";
import { ENGINE_STACK_MB } from "../sandbox/limits.js";
import type { CallMonitor } from "../sandbox/sandbox-host.js";
import { DeadlineBoard, reportCallDeadlines } from "./watchdog.js";

/** What the bootstrap receives: the module to load, the board to report to, and the module's own data. */
export interface WorkerBoot {
  module: string;
  watch: SharedArrayBuffer | null;
  data: unknown;
}

export interface WorkerStart {
  /** The kind's module is `name.js` (or `name.ts` from the sources) next to `base`, the caller's import.meta.url. */
  base: string;
  name: string;
  /** The module's own data (see workerInput). */
  data: unknown;
  /** The board the thread's guest calls report their deadlines to; none: not watched. */
  board?: DeadlineBoard;
  /** Node flags of the thread; the parent's by default. */
  execArgv?: string[];
}

export function startWorker(start: WorkerStart): Worker {
  const dev = import.meta.url.endsWith(".ts");
  const boot: WorkerBoot = { module: new URL(`./${start.name}${dev ? ".ts" : ".js"}`, start.base).href, watch: start.board?.buffer ?? null, data: start.data };
  return new Worker(new URL(dev ? "./worker-bootstrap-dev.mjs" : "./worker-bootstrap.js", import.meta.url), {
    workerData: boot,
    ...(start.execArgv ? { execArgv: start.execArgv } : {}),
    // every kind runs guest code, whose stack budget is derived from this (see safeGuestStackBytes)
    resourceLimits: { stackSizeMb: ENGINE_STACK_MB },
  });
}

/** In a worker's module: the data its starter gave (WorkerStart.data). */
export function workerInput<T>(): T {
  return (workerData as WorkerBoot).data as T;
}

/** In a worker's module: the call monitor its SandboxHost reports guest calls' deadlines through (to the starter's watchdog); null when the thread is not watched. */
export function workerMonitor(): CallMonitor | null {
  const watch = (workerData as WorkerBoot).watch;
  return watch ? reportCallDeadlines(new DeadlineBoard(watch)) : null;
}
