// One bridge replica: a process started by the Supervisor. It waits for its ReplicaConfig over
// IPC and runs the replica on a serving thread of its own (replica-thread.ts), relays that
// thread's ready/failed messages, and stops it cleanly on SIGTERM or when the supervisor goes away.
//
// The main thread also keeps the last-resort watchdog. The sandbox's fuel checks stop every guest
// call at its deadline on the serving thread itself, native builtins included; if a call still
// overran its deadline by the grace (a fault of ours, not of the env), the process is killed and the
// supervisor restarts the replica: its sessions end `session_lost`, the other replicas' are untouched.
import { DeadlineBoard, Watchdog } from "../../core/engine/watchdog.js";
import { startWorker } from "../../core/engine/worker-thread.js";
import { createLogger } from "./logger.js";
import type { ReplicaConfig, ReplicaMessage } from "./replica-config.js";

process.env.TZ = "UTC";

const tell = (m: ReplicaMessage) => process.send?.(m);

function main(config: ReplicaConfig): void {
  const log = createLogger("envscaler-replica", { replica: config.replica });
  const board = new DeadlineBoard();
  const thread = startWorker({ base: import.meta.url, name: "replica-thread", data: config, board });
  let stopping = false;
  thread.on("message", (m: ReplicaMessage | { stopped: true }) => {
    if ("stopped" in m) process.exit(0);
    tell(m);
    if ("failed" in m) process.exit(1);
  });
  thread.on("error", (e) => {
    log.fatal({ err: e }, "the serving thread failed");
    tell({ failed: e.message });
    process.exit(1);
  });
  thread.on("exit", (code) => {
    if (!stopping) log.fatal({ code }, "the serving thread ended");
    process.exit(stopping ? 0 : 1);
  });
  new Watchdog(config.hardStopGraceMs).watch(board, ({ overrunMs }) => {
    log.fatal({ overrun_ms: overrunMs }, "a guest call overran its deadline past the grace; exiting so the supervisor restarts this replica");
    // SIGKILL, not exit(): an exit tears the stuck serving thread down under its pending receive,
    // which zeromq.js answers with an abort and a C++ message on stderr (issue #411)
    process.kill(process.pid, "SIGKILL");
  });
  const stop = () => {
    if (stopping) return;
    stopping = true;
    thread.postMessage({ stop: true });
  };
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
  // the supervisor died: do not linger as an orphan holding the port
  process.on("disconnect", stop);
}

process.once("message", (config: ReplicaConfig) => {
  try {
    main(config);
  } catch (e) {
    tell({ failed: e instanceof Error ? e.message : String(e) });
    process.exit(1);
  }
});
