import { Worker } from "node:worker_threads";
import { ENGINE_STACK_MB } from "../sandbox/limits.js";
import type { CheckReport } from "./check-bundle.js";

export interface IsolatedCheckOptions {
  /** How long past a guest call's own deadline before the bundle's worker is stopped. @unit ms @default 1000 */
  hardStopGraceMs?: number;
}

/**
 * Runs checkBundle for one bundle folder on its own worker thread. The env code under check is as
 * untrusted as in training: a builtin that ignores the interrupt deadline (JSON.stringify of a
 * huge array, a typed-array sort) would hang an in-thread check forever, so a watchdog stops the
 * worker and the bundle fails with the stage it was in. A worker that dies fails only its bundle.
 */
export async function checkBundleIsolated(dir: string, options: IsolatedCheckOptions = {}): Promise<CheckReport> {
  const grace = options.hardStopGraceMs ?? 1000;
  const watch = new Float64Array(new SharedArrayBuffer(8));
  const ts = import.meta.url.endsWith(".ts");
  const worker = new Worker(new URL(ts ? "./check-worker-dev.mjs" : "./check-worker.js", import.meta.url), {
    workerData: { dir, watch: watch.buffer },
    // the sandbox's stack budget is derived from this (see safeGuestStackBytes)
    resourceLimits: { stackSizeMb: ENGINE_STACK_MB },
  });
  let stage = "loading the bundle";
  const failed = (why: string): CheckReport => ({ envId: dir, dir, tools: 0, scenarios: 0, problems: [`${stage}: ${why}`], warnings: [] });
  try {
    return await new Promise<CheckReport>((resolve) => {
      const timer = setInterval(() => {
        const deadline = watch[0]!;
        if (deadline !== 0 && Date.now() > deadline + grace) {
          clearInterval(timer);
          resolve(failed("a guest call ignored its deadline (a builtin that cannot be interrupted) and was stopped"));
        }
      }, 100);
      worker.on("message", (m: { stage?: string; report?: CheckReport }) => {
        if (m.stage) stage = m.stage;
        if (m.report) {
          clearInterval(timer);
          resolve(m.report);
        }
      });
      worker.on("error", (e) => {
        clearInterval(timer);
        resolve(failed(`the check failed: ${e.message}`));
      });
      worker.on("exit", (code) => {
        clearInterval(timer);
        resolve(failed(`the check's worker exited (code ${code})`));
      });
    });
  } finally {
    await worker.terminate();
  }
}
