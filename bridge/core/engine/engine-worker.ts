// Engine worker (see WorkerEngine): hosts many episodes' sandboxes in one thread (EngineHost). The
// Restarter's watchdog may terminate this thread at any time (a guest call that overran its
// deadline); episodes are then restored elsewhere from the checkpoints and inputs the runtime
// holds, so nothing here may hold state that matters beyond what the runtime already acknowledged.
// Started by the one worker bootstrap (startWorker); its SandboxHost publishes guest calls' deadlines (workerMonitor).
import { AsyncLocalStorage } from "node:async_hooks";
import { parentPort } from "node:worker_threads";
import { EnvRegistry } from "../../../envs/format/registry.js";
import { EngineHost } from "./engine-host.js";
import type { EngineReply, EngineRequest } from "./messages.js";
import { setCallOwner } from "./watchdog.js";
import { workerInput, workerMonitor } from "./worker-thread.js";

export interface EngineWorkerInput {
  envPaths: string[];
  /** Episodes of this worker to ready sandboxes for before it says it is ready (see RuntimeOptions.warmSessions). */
  warmSessions: number;
  /** Score finish_later episodes on a scorer thread of this worker's (RuntimeOptions.scorerThread). */
  scorerThread: boolean;
}
const init = workerInput<EngineWorkerInput>();
const port = parentPort!;
// whose guest call runs: the watchdog names the episode that overran by its slot
const current = new AsyncLocalStorage<number>();
setCallOwner(() => current.getStore() ?? -1);

// replies finished in the same turn go back in one message (see WorkerEngine.flush)
let outbox: EngineReply[] = [];
function reply(r: EngineReply): void {
  outbox.push(r);
  if (outbox.length === 1)
    setImmediate(() => {
      const batch = outbox;
      outbox = [];
      send(batch);
    });
}

/**
 * Posts replies to the runtime. Copying one can throw (a value structured clone refuses or
 * recurses too deep on); a throw here would end the worker and every episode on it, so each reply
 * of a batch that cannot be copied is sent alone and one that still cannot is answered with a
 * typed error: every request gets exactly one reply.
 */
function send(batch: EngineReply[]): void {
  try {
    port.postMessage(batch);
    return;
  } catch {
    /* one of them could not be copied: find it below */
  }
  for (const r of batch) {
    try {
      port.postMessage([r]);
    } catch (e) {
      port.postMessage([{ id: r.id, ok: false, error: { code: "internal_error", message: `the reply could not be handed back from the engine (${e instanceof Error ? e.message : String(e)})` } } satisfies EngineReply]);
    }
  }
}

const host = new EngineHost({ registry: EnvRegistry.load(init.envPaths), reply, around: (slot, run) => current.run(slot, run), monitor: workerMonitor(), scorerEnvs: init.scorerThread ? init.envPaths : null });
port.on("message", (batch: EngineRequest[]) => {
  for (const req of batch) host.accept(req);
});
await host.warm(init.warmSessions);
port.postMessage({ ready: true });
