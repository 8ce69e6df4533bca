import { Worker } from "node:worker_threads";
import type { CallMonitor } from "../sandbox/sandbox-host.js";
import { ENGINE_STACK_MB } from "../sandbox/limits.js";
import { workerModule } from "./worker-module.js";

/**
 * One-shot work on untrusted env code (`envscaler check` of a bundle, the UI's replay of an
 * episode) on a worker thread of its own, with the watchdog that stops it when a guest call
 * overruns its deadline by more than the grace (a builtin that ignores the sandbox's interrupt:
 * JSON.stringify of a huge array, a typed-array sort). The worker reports each call's deadline in
 * a shared buffer (reportCallDeadlines), so the watchdog needs no message from a thread that may
 * be stuck. The engine workers of EnvRuntime have their own, per-episode watchdog.
 */
export interface WatchedWorkerRun<T> {
  /** The worker module next to `base` (import.meta.url of the caller): `name.js`, or `name-dev.mjs` when running from the TypeScript sources. */
  base: string;
  name: string;
  workerData: Record<string, unknown>;
  /** How long past a guest call's own deadline before the worker is stopped. @unit ms */
  graceMs: number;
  /** A message from the worker: its result, or undefined to keep waiting (progress). */
  message(m: unknown): T | undefined;
  /** The run ended without a result (detail: why it stalled, the error's message, or the exit code): return what stands for it, or throw. */
  failed(why: "stalled" | "error" | "exit", detail: string): T;
}

export async function runWatchedWorker<T>(run: WatchedWorkerRun<T>): Promise<T> {
  const watch = new Float64Array(new SharedArrayBuffer(8));
  const worker = new Worker(workerModule(run.base, run.name), {
    workerData: { ...run.workerData, watch: watch.buffer },
    // the sandbox's stack budget is derived from this (see safeGuestStackBytes)
    resourceLimits: { stackSizeMb: ENGINE_STACK_MB },
  });
  try {
    return await new Promise<T>((resolve, reject) => {
      const end = (get: () => T) => {
        clearInterval(timer);
        try {
          resolve(get());
        } catch (e) {
          reject(e instanceof Error ? e : new Error(String(e)));
        }
      };
      const timer = setInterval(() => {
        const deadline = watch[0]!;
        if (deadline !== 0 && Date.now() > deadline + run.graceMs) end(() => run.failed("stalled", "a guest call ignored its deadline (a builtin that cannot be interrupted) and was stopped"));
      }, 100);
      worker.on("message", (m: unknown) => {
        const result = run.message(m);
        if (result !== undefined) end(() => result);
      });
      worker.on("error", (e) => end(() => run.failed("error", e.message)));
      worker.on("exit", (code) => end(() => run.failed("exit", `code ${code}`)));
    });
  } finally {
    await worker.terminate();
  }
}

/** In the worker: a call monitor (for the worker's SandboxHost) that publishes each guest call's deadline to the parent's watchdog (runWatchedWorker). */
export function reportCallDeadlines(buffer: SharedArrayBuffer): CallMonitor {
  const watch = new Float64Array(buffer);
  return {
    start(deadlineMs) {
      watch[0] = deadlineMs;
    },
    end() {
      watch[0] = 0;
    },
  };
}
