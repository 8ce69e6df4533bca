import { runWatchedWorker } from "../../core/engine/watched-worker.js";
import type { CheckReport } from "./check-bundle.js";
import type { CheckWorkerInput } from "./check-worker.js";

export interface IsolatedCheckOptions {
  /** How long past a guest call's own deadline before the bundle's worker is stopped. @unit ms @default 1000 */
  hardStopGraceMs?: number;
  /** Run the gaming probes on each scenario. @default true */
  probes?: boolean;
}

/**
 * Runs checkBundle for one bundle folder on its own watched worker thread. The env code under
 * check is as untrusted as in training: a builtin that ignores the interrupt deadline would hang
 * an in-thread check forever, so a watchdog stops the worker and the bundle fails with the stage
 * it was in. A worker that dies fails only its bundle.
 */
export async function checkBundleIsolated(dir: string, options: IsolatedCheckOptions = {}): Promise<CheckReport> {
  let stage = "loading the bundle";
  const why = { stalled: (d: string) => d, error: (d: string) => `the check failed: ${d}`, exit: (d: string) => `the check's worker exited (${d})` };
  return runWatchedWorker<CheckReport>({
    base: import.meta.url,
    name: "check-worker",
    data: { dir, probes: options.probes ?? true } satisfies CheckWorkerInput,
    graceMs: options.hardStopGraceMs ?? 1000,
    message: (m) => {
      const msg = m as { stage?: string; report?: CheckReport };
      if (msg.stage) stage = msg.stage;
      return msg.report;
    },
    failed: (kind, detail) => ({ envId: dir, dir, tools: 0, scenarios: 0, problems: [`${stage}: ${why[kind](detail)}`], warnings: [], probes: {} }),
  });
}
