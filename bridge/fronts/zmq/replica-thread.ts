// The serving thread of a replica process: the ROUTER socket, the sessions, the recorder and (with
// `workers: 0`, the default) every episode's sandbox, all on this one thread, so a step never
// crosses threads. It is a worker thread only for its stack: guest code recursing deeply needs a
// large native stack (see safeGuestStackBytes), which a process's main thread cannot be given.
// The process's main thread (replica-main.ts) talks to the supervisor and keeps a last-resort
// watchdog over this thread's guest calls.
import { join } from "node:path";
import { parentPort } from "node:worker_threads";
import { EnvRuntime } from "../../core/engine/env-runtime.js";
import { workerInput, workerMonitor } from "../../core/engine/worker-thread.js";
import { TrajectoryWriter } from "../../tools/record/trajectory-writer.js";
import { BridgeServer } from "./bridge-server.js";
import { createLogger } from "./logger.js";
import type { ReplicaConfig, ReplicaMessage } from "./replica-config.js";
import { ZapHandler } from "./zap-handler.js";

// started by the one worker bootstrap (startWorker)
const config = workerInput<ReplicaConfig>();
const port = parentPort!;
const tell = (m: ReplicaMessage | { stopped: true }) => port.postMessage(m);

async function main(): Promise<void> {
  const log = createLogger("envscaler-replica", { replica: config.replica });
  // guest calls made on this thread report their deadlines to the main thread's watchdog
  const callMonitor = workerMonitor() ?? undefined;
  const zap = config.curve ? await ZapHandler.start(config.curve.allow) : null;
  // one file per replica process: a restarted replica never appends behind a torn tail
  const recorder = config.recordDir ? new TrajectoryWriter(join(config.recordDir, `replica-${config.replica}-${new Date().toISOString().replace(/[:.]/g, "")}-${process.pid}.jsonl`), { onFailure: config.recordFailure, onUnavailable: (reason) => log.error({ reason }, "recording unavailable") }) : null;
  const { envs, workers, user, maxRestartsPerMinute, hardStopGraceMs, warmSessions } = config;
  const onHardStop = (event: object) => log.warn(event, "a guest call overran its deadline by the grace: its engine worker was replaced, the worker's other episodes restored");
  // a reset of a live episode with finish_previous "later" is scored on a thread of its own
  const runtime = await EnvRuntime.start({ envs, workers, user, recorder, maxRestartsPerMinute, hardStopGraceMs, warmSessions, onHardStop, callMonitor, scorerThread: true, ...config.episodeLimits });
  const server = new BridgeServer({ runtime, endpoint: config.endpoint, replica: config.replica, previousInstances: config.previousInstances, limits: config.limits, curve: config.curve, logger: log });
  const endpoint = await server.start();
  log.info({ endpoint, instance: server.instance, curve: Boolean(config.curve), recording: recorder?.path ?? null, workers }, "replica serving");
  tell({ ready: true, endpoint, instance: server.instance });

  let stopping = false;
  port.on("message", (m: { stop?: boolean }) => {
    if (!m.stop || stopping) return;
    stopping = true;
    void (async () => {
      // the socket is closed here, by its own thread, before the thread ends (zeromq.js aborts the
      // process when a thread is torn down under a pending receive)
      await server.stop();
      await runtime.close();
      recorder?.close();
      await zap?.close();
      log.info("replica stopped");
      tell({ stopped: true });
    })();
  });
}

main().catch((e: unknown) => {
  tell({ failed: e instanceof Error ? e.message : String(e) });
});
