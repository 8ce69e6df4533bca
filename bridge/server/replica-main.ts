// One bridge replica: a process with its own EnvRuntime and ROUTER socket, started by the
// Supervisor. It waits for its ReplicaConfig over IPC, reports its bound endpoint, and stops
// cleanly on SIGTERM or when the supervisor goes away.
import { join } from "node:path";
import { EnvRuntime } from "../engine/env-runtime.js";
import { TrajectoryWriter } from "../record/trajectory-writer.js";
import { BridgeServer } from "./bridge-server.js";
import { createLogger } from "./logger.js";
import type { ReplicaConfig, ReplicaMessage } from "./replica-config.js";
import { ZapHandler } from "./zap-handler.js";

process.env.TZ = "UTC";

const tell = (m: ReplicaMessage) => process.send?.(m);

async function main(config: ReplicaConfig): Promise<void> {
  const log = createLogger("envscaler-replica", { replica: config.replica });
  const zap = config.curve ? await ZapHandler.start(config.curve.allow) : null;
  // one file per replica process: a restarted replica never appends behind a torn tail
  const recorder = config.recordDir ? new TrajectoryWriter(join(config.recordDir, `replica-${config.replica}-${new Date().toISOString().replace(/[:.]/g, "")}-${process.pid}.jsonl`), { onFailure: config.recordFailure, onUnavailable: (reason) => log.error({ reason }, "recording unavailable") }) : null;
  const { envs, workers, user, maxRestartsPerMinute, hardStopGraceMs, warmSessions } = config;
  const runtime = await EnvRuntime.start({ envs, workers, user, recorder, maxRestartsPerMinute, hardStopGraceMs, warmSessions, ...config.episodeLimits });
  const server = new BridgeServer({ runtime, endpoint: config.endpoint, replica: config.replica, previousInstances: config.previousInstances, limits: config.limits, curve: config.curve, logger: log });
  const endpoint = await server.start();
  log.info({ endpoint, instance: server.instance, curve: Boolean(config.curve), recording: recorder?.path ?? null }, "replica serving");
  tell({ ready: true, endpoint, instance: server.instance });

  let stopping = false;
  const stop = async () => {
    if (stopping) return;
    stopping = true;
    await server.stop();
    await runtime.close();
    recorder?.close();
    await zap?.close();
    log.info("replica stopped");
    process.exit(0);
  };
  process.on("SIGTERM", () => void stop());
  process.on("SIGINT", () => void stop());
  // the supervisor died: do not linger as an orphan holding the port
  process.on("disconnect", () => void stop());
}

process.once("message", (config: ReplicaConfig) => {
  main(config).catch((e: unknown) => {
    tell({ failed: e instanceof Error ? e.message : String(e) });
    process.exit(1);
  });
});
