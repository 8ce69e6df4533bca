import { readFileSync, rmSync } from "node:fs";
import type { ArgumentsCamelCase, Argv, CommandModule } from "yargs";
import { createLogger } from "../../bridge/fronts/zmq/logger.js";
import { Supervisor } from "../../bridge/fronts/zmq/supervisor.js";
import { resolveEnvFolders } from "../env-folders.js";
import { envsOptions, recordOptions, sessionOptions, snapshotOptions, userConfigFromArgs, userOptions, watchdogOptions, workersOptions, type UserArgs } from "../option-groups.js";
import { watchProcesses } from "../parent-watch.js";

interface ServeArgs extends UserArgs {
  envs: string[];
  endpoint: string;
  replicas: number;
  workers: number;
  warmSessions: number;
  connectionFile?: string;
  curve: boolean;
  curveAllow?: string;
  maxSessions: number;
  maxSessionsPerClient?: number;
  idleTimeout: number;
  maxFrameBytes: number;
  maxInFlight: number;
  maxRestartsPerMinute: number;
  hardStopGraceMs: number;
  checkpointEvery: number;
  maxSnapshots: number;
  maxSnapshotMb: number;
  quarantineAfter: number;
  maxActionBytes: number;
  maxEpisodeInputMb: number;
  recordFailure: "refuse" | "continue";
  record: boolean;
  recordDir: string;
  parentPid?: number;
  removeIfOrphaned?: string;
}

export const serveCommand: CommandModule<object, ServeArgs> = {
  command: "serve",
  describe: "Serve env episodes over ZeroMQ (docs/protocol.md) from N replica processes",
  builder: (y: Argv) =>
    userOptions(recordOptions(watchdogOptions(snapshotOptions(sessionOptions(workersOptions(envsOptions(y)))))))
      .option("endpoint", { type: "string", default: "tcp://127.0.0.1:5555", describe: "replica 0's endpoint; replica i gets port+i (use port * for free ports)" })
      .option("replicas", { type: "number", default: 1, describe: "replica processes" })
      .option("warm-sessions", { type: "number", default: 0, describe: "episodes per replica to ready sandboxes for before serving (every env loaded, wasm instances made), so a first burst of that many resets is as fast as later ones" })
      .option("connection-file", { type: "string", describe: "write endpoints (and CurveZMQ keys) here once serving" })
      .option("curve", { type: "boolean", default: false, describe: "require CurveZMQ even on loopback (always on for other addresses)" })
      .option("curve-allow", { type: "string", describe: "file of extra allowed client public keys (Z85), one per line" })
      .option("max-sessions-per-client", { type: "number", describe: "sessions one client connection may hold on a replica (default: --max-sessions); a bridge shared by several trainers sets it lower" })
      .option("max-frame-bytes", { type: "number", default: 8 << 20, describe: "largest request frame" })
      .option("max-action-bytes", { type: "number", default: 1 << 20, describe: "largest action one step takes (as JSON); larger get `too_large` and do not run" })
      .option("max-episode-input-mb", { type: "number", default: 64, describe: "actions one episode keeps for exact restore and replay, in total; beyond it steps get `too_large`" })
      .option("quarantine-after", { type: "number", default: 2, describe: "guest calls of one scenario the watchdog may have to stop before its resets get `scenario_quarantined`" })
      .option("checkpoint-every", { type: "number", default: 64, describe: "with --workers W: every this many steps an episode's sandbox is copied to the replica's main thread, so one restored after its worker was stopped re-runs at most this many steps (about 0.4 MB per long episode); 0: never, restores re-run the whole episode" })
      .option("record-failure", { choices: ["refuse", "continue"] as const, default: "refuse" as const, describe: "when a trajectory record cannot be written: refuse requests with `recording_unavailable` before they run, or continue unrecorded" })
      .option("parent-pid", { type: "number", describe: "stop (as on SIGTERM) when this process ends, however it ends; envscaler.launch() passes its own pid" })
      .option("remove-if-orphaned", { type: "string", describe: "a folder of the --parent-pid process that serve removes when it stops because that process ended (launch() passes its temporary folder)" }) as unknown as Argv<ServeArgs>,
  handler: async (args: ArgumentsCamelCase<ServeArgs>) => {
    const log = createLogger("envscaler-serve");
    const allow = args.curveAllow ? readFileSync(args.curveAllow, "utf8").split(/\s+/).filter(Boolean) : [];
    if (args.removeIfOrphaned !== undefined && args.parentPid === undefined) throw new Error("--remove-if-orphaned needs --parent-pid (whose ending it is about)");

    const supervisor = new Supervisor({
      envs: resolveEnvFolders(args.envs),
      endpoint: args.endpoint,
      replicas: args.replicas,
      workers: args.workers,
      warmSessions: args.warmSessions,
      connectionFile: args.connectionFile,
      curve: args.curve,
      curveAllow: allow,
      limits: { maxSessions: args.maxSessions, maxSessionsPerClient: args.maxSessionsPerClient, idleTimeoutS: args.idleTimeout, maxFrameBytes: args.maxFrameBytes, maxInFlight: args.maxInFlight },
      maxRestartsPerMinute: args.maxRestartsPerMinute,
      hardStopGraceMs: args.hardStopGraceMs,
      episodeLimits: {
        maxSnapshotsPerEpisode: args.maxSnapshots,
        maxSnapshotBytes: args.maxSnapshotMb * 1024 * 1024,
        maxActionBytes: args.maxActionBytes,
        maxEpisodeInputBytes: args.maxEpisodeInputMb * 1024 * 1024,
        quarantineAfter: args.quarantineAfter,
        checkpointEvery: args.checkpointEvery,
      },
      user: userConfigFromArgs(args),
      recordDir: args.record ? args.recordDir : null,
      recordFailure: args.recordFailure,
      onGiveUp: (replica) => {
        log.fatal({ replica }, "stopping the bridge: a replica cannot be kept running");
        process.exitCode = 1;
        process.kill(process.pid, "SIGTERM");
      },
      logger: log,
    });
    // the stop handlers come first: a signal or the parent's end during startup stops the
    // replicas already started instead of killing this process under them
    let stopping: Promise<void> | null = null;
    let stopped!: () => void;
    const done = new Promise<void>((resolve) => (stopped = resolve));
    let orphaned = false;
    const stop = (why: string) => {
      if (stopping) return;
      log.info({ why }, "stopping");
      stopping = supervisor.stop();
      void stopping.then(stopped);
    };
    process.once("SIGTERM", () => stop("SIGTERM"));
    process.once("SIGINT", () => stop("SIGINT"));
    if (args.parentPid !== undefined) {
      watchProcesses([args.parentPid], (pid) => {
        orphaned = true;
        stop(`the process that launched this bridge (pid ${pid}) ended`);
      });
      // nobody else is left to remove the launcher's folder; on every way out, start failures included
      if (args.removeIfOrphaned) {
        const dir = args.removeIfOrphaned;
        process.on("exit", () => orphaned && rmSync(dir, { recursive: true, force: true }));
      }
    }
    let info;
    try {
      info = await supervisor.start();
    } catch (e) {
      if (stopping) return done; // stopped while starting: not a failure to start
      throw e;
    }
    log.info({ endpoints: info.endpoints, curve: Boolean(info.curve) }, "bridge serving");
    // the one line a script may wait for on stdout
    console.log(JSON.stringify({ serving: info.endpoints }));
    // until stop() has stopped the replicas and removed the connection file
    await done;
  },
};
