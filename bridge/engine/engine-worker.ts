// Engine worker: hosts many episodes' sandboxes in one thread (EngineHost). The pool's watchdog may
// terminate this thread at any time (a guest call that overran its deadline); episodes are then
// restored elsewhere from the checkpoints and inputs the pool holds, so nothing here may hold state that matters
// beyond what the pool already acknowledged.
import { AsyncLocalStorage } from "node:async_hooks";
import { parentPort, workerData } from "node:worker_threads";
import { EnvRegistry } from "../../envs/registry.js";
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
      port.postMessage(batch);
    });
}

const host = new EngineHost({ registry: EnvRegistry.load(init.envPaths), reply, around: (slot, run) => current.run(slot, run) });
port.on("message", (batch: (EngineRequest & { slot: number })[]) => {
  for (const req of batch) host.accept(req);
});
await host.warm(init.warmSessions);
port.postMessage({ ready: true });
