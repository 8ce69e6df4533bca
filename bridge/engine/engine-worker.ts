// Engine worker: hosts many episodes' sandboxes in one thread (EngineHost). The pool's watchdog may
// terminate this thread at any time (a guest call that overran its deadline); episodes are then
// restored elsewhere from the checkpoints and inputs the pool holds, so nothing here may hold state that matters
// beyond what the pool already acknowledged.
import { AsyncLocalStorage } from "node:async_hooks";
import { parentPort, workerData } from "node:worker_threads";
import { EnvRegistry } from "../../envs/format/registry.js";
import { setCallMonitor } from "../sandbox/sandbox.js";
import { EngineHost } from "./engine-host.js";
import { WATCH_DEADLINE, WATCH_EPISODE, type EngineReply, type EngineRequest } from "./messages.js";

process.env.TZ = "UTC";

interface WorkerInit {
  envPaths: string[];
  watch: SharedArrayBuffer;
  /** Episodes of this worker to ready sandboxes for before it says it is ready (see RuntimeOptions.warmSessions). */
  warmSessions: number;
}
const init = workerData as WorkerInit;
const port = parentPort!;
const watch = new Float64Array(init.watch);
const current = new AsyncLocalStorage<number>();

setCallMonitor({
  start(deadlineMs) {
    watch[WATCH_EPISODE] = current.getStore() ?? -1;
    watch[WATCH_DEADLINE] = deadlineMs;
  },
  end() {
    watch[WATCH_DEADLINE] = 0;
  },
});

// replies finished in the same turn go back in one message (see EnvRuntime.flush)
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
 * Posts replies to the pool. Copying one can throw (a value structured clone refuses or recurses
 * too deep on); a throw here would end the worker and every episode on it, so each reply of a
 * batch that cannot be copied is sent alone and one that still cannot is answered with a typed
 * error: every request gets exactly one reply.
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

const host = new EngineHost({ registry: EnvRegistry.load(init.envPaths), reply, around: (slot, run) => current.run(slot, run) });
port.on("message", (batch: (EngineRequest & { slot: number })[]) => {
  for (const req of batch) host.accept(req);
});
await host.warm(init.warmSessions);
port.postMessage({ ready: true });
