import { DeadlineBoard, Watchdog } from "./watchdog.js";
import { startWorker } from "./worker-thread.js";

/**
 * One-shot work on untrusted env code (`envscaler check` of a bundle, the UI's replay of an
 * episode) on a worker thread of its own, under a Watchdog that stops it when a guest call
 * overruns its deadline by more than the grace (a builtin that ignores the sandbox's interrupt:
 * JSON.stringify of a huge array, a typed-array sort). The worker's bootstrap publishes each
 * call's deadline on the thread's board, so the watchdog needs no message from a stuck thread.
 */
export interface WatchedWorkerRun<T> {
  /** The worker module next to `base` (import.meta.url of the caller): `name.js`, or `name.ts` when running from the TypeScript sources. */
  base: string;
  name: string;
  /** The module's data (workerInput in the worker). */
  data: unknown;
  /** How long past a guest call's own deadline before the worker is stopped. @unit ms */
  graceMs: number;
  /** A message from the worker: its result, or undefined to keep waiting (progress). */
  message(m: unknown): T | undefined;
  /** The run ended without a result (detail: why it stalled, the error's message, or the exit code): return what stands for it, or throw. */
  failed(why: "stalled" | "error" | "exit", detail: string): T;
}

export async function runWatchedWorker<T>(run: WatchedWorkerRun<T>): Promise<T> {
  const board = new DeadlineBoard();
  const watchdog = new Watchdog(run.graceMs);
  const worker = startWorker({ base: run.base, name: run.name, data: run.data, board });
  try {
    return await new Promise<T>((resolve, reject) => {
      let settled = false;
      const end = (get: () => T) => {
        if (settled) return;
        settled = true;
        try {
          resolve(get());
        } catch (e) {
          reject(e instanceof Error ? e : new Error(String(e)));
        }
      };
      watchdog.watch(board, () => end(() => run.failed("stalled", "a guest call ignored its deadline (a builtin that cannot be interrupted) and was stopped")));
      worker.on("message", (m: unknown) => {
        const result = run.message(m);
        if (result !== undefined) end(() => result);
      });
      worker.on("error", (e) => end(() => run.failed("error", e.message)));
      worker.on("exit", (code) => end(() => run.failed("exit", `code ${code}`)));
    });
  } finally {
    watchdog.close();
    await worker.terminate();
  }
}
