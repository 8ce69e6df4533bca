import { readFileSync, rmSync } from "node:fs";
import type { ArgumentsCamelCase, Argv, CommandModule } from "yargs";
import { createLogger } from "../../bridge/server/logger.js";
import { Supervisor } from "../../bridge/server/supervisor.js";
import type { UserSimulatorConfig } from "../../bridge/episode/user-simulator.js";
import { BUNDLED_ENVS } from "../../envs/bundled.js";
import { resolveEnvFolders } from "../env-folders.js";
import { watchProcesses } from "../parent-watch.js";

interface ServeArgs {
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
  userModel?: string;
  userBaseUrl?: string;
  userTimeout?: number;
  userTemperature?: number;
  userCache?: string;
  record: boolean;
  recordDir: string;
  parentPid?: number;
  removeIfOrphaned?: string;
}

/**
 * The simulated user's config from serve's flags; null (no simulated user) when neither a flag nor
 * an env var names an endpoint or model. Unset fields stay unset: the simulator fills them from the
 * environment (resolveUserConfig), in the replica that runs it.
 */
export function userConfigFromArgs(
  args: { userModel?: string; userBaseUrl?: string; userTimeout?: number; userTemperature?: number; userCache?: string },
  env: NodeJS.ProcessEnv = process.env,
): UserSimulatorConfig | null {
  if (args.userTimeout !== undefined && !(args.userTimeout > 0)) throw new Error(`--user-timeout must be a positive number of seconds; got ${args.userTimeout}`);
  if (args.userTemperature !== undefined && !(args.userTemperature >= 0)) throw new Error(`--user-temperature must be a number >= 0; got ${args.userTemperature}`);
  const wanted = args.userModel || args.userBaseUrl || env.USER_OPENAI_BASE_URL || env.OPENAI_BASE_URL || env.ENVSCALER_USER_MODEL;
  if (!wanted) return null;
  return {
    ...(args.userModel ? { model: args.userModel } : {}),
    ...(args.userBaseUrl ? { baseURL: args.userBaseUrl } : {}),
    ...(args.userTimeout !== undefined ? { timeoutMs: args.userTimeout * 1000 } : {}),
    ...(args.userTemperature !== undefined ? { temperature: args.userTemperature } : {}),
    ...(args.userCache ? { cacheDir: args.userCache } : {}),
  };
}

export const serveCommand: CommandModule<object, ServeArgs> = {
  command: "serve",
  describe: "Serve env episodes over ZeroMQ (docs/protocol.md) from N replica processes",
  builder: (y: Argv) =>
    y
      .option("envs", { type: "string", array: true, default: [BUNDLED_ENVS], describe: "bundle folder(s), folders of bundles, or bundled env ids (library or library-v1)" })
      .option("endpoint", { type: "string", default: "tcp://127.0.0.1:5555", describe: "replica 0's endpoint; replica i gets port+i (use port * for free ports)" })
      .option("replicas", { type: "number", default: 1, describe: "replica processes" })
      .option("workers", { type: "number", default: 0, describe: "engine worker threads per replica; 0: episodes run on the replica's serving thread, no thread hop (the sandbox's fuel checks stop a guest call at its deadline)" })
      .option("warm-sessions", { type: "number", default: 0, describe: "episodes per replica to ready sandboxes for before serving (every env loaded, wasm instances made), so a first burst of that many resets is as fast as later ones" })
      .option("connection-file", { type: "string", describe: "write endpoints (and CurveZMQ keys) here once serving" })
      .option("curve", { type: "boolean", default: false, describe: "require CurveZMQ even on loopback (always on for other addresses)" })
      .option("curve-allow", { type: "string", describe: "file of extra allowed client public keys (Z85), one per line" })
      .option("max-sessions", { type: "number", default: 1024, describe: "open sessions per replica" })
      .option("max-sessions-per-client", { type: "number", describe: "sessions one client connection may hold on a replica (default: --max-sessions); a bridge shared by several trainers sets it lower" })
      .option("idle-timeout", { type: "number", default: 600, describe: "close sessions unused this many seconds" })
      .option("max-frame-bytes", { type: "number", default: 8 << 20, describe: "largest request frame" })
      .option("max-in-flight", { type: "number", default: 4096, describe: "requests one replica serves at once; more get `overloaded`" })
      .option("max-snapshots", { type: "number", default: 32, describe: "snapshots one episode may hold at once; more get `too_large`" })
      .option("max-snapshot-mb", { type: "number", default: 1024, describe: "memory all snapshots of one replica may hold; more get `too_large`" })
      .option("max-action-bytes", { type: "number", default: 1 << 20, describe: "largest action one step takes (as JSON); larger get `too_large` and do not run" })
      .option("max-episode-input-mb", { type: "number", default: 64, describe: "actions one episode keeps for exact restore and replay, in total; beyond it steps get `too_large`" })
      .option("quarantine-after", { type: "number", default: 2, describe: "guest calls of one scenario the watchdog may have to stop before its resets get `scenario_quarantined`" })
      .option("hard-stop-grace-ms", { type: "number", default: 1000, describe: "how long past its own deadline a guest call may run before a watchdog acts (a backstop: the fuel checks stop calls at their deadline): with --workers W the engine worker is stopped and its other episodes restored; with --workers 0 the replica process exits and is restarted" })
      .option("checkpoint-every", { type: "number", default: 64, describe: "with --workers W: every this many steps an episode's sandbox is copied to the replica's main thread, so one restored after its worker was stopped re-runs at most this many steps (about 0.4 MB per long episode); 0: never, restores re-run the whole episode" })
      .option("max-restarts-per-minute", { type: "number", default: 10, describe: "replica restarts (and engine worker restarts) allowed per minute before serve stops with exit code 1" })
      .option("record", { type: "boolean", default: true, describe: "record every episode (--no-record: off)" })
      .option("record-failure", { choices: ["refuse", "continue"] as const, default: "refuse" as const, describe: "when a trajectory record cannot be written: refuse requests with `recording_unavailable` before they run, or continue unrecorded" })
      .option("record-dir", { type: "string", default: "trajectories", describe: "where each replica writes its trajectory file" })
      .option("parent-pid", { type: "number", describe: "stop (as on SIGTERM) when this process ends, however it ends; envscaler.launch() passes its own pid" })
      .option("remove-if-orphaned", { type: "string", describe: "a folder of the --parent-pid process that serve removes when it stops because that process ended (launch() passes its temporary folder)" })
      .option("user-model", { type: "string", describe: "simulated user's model for conversation scenarios (else ENVSCALER_USER_MODEL, else gpt-4.1)" })
      .option("user-base-url", { type: "string", describe: "simulated user's OpenAI-compatible base URL (else USER_OPENAI_BASE_URL, else OPENAI_BASE_URL); key from USER_OPENAI_API_KEY / OPENAI_API_KEY" })
      .option("user-timeout", { type: "number", describe: "seconds one simulated-user request may take (else ENVSCALER_USER_TIMEOUT, else 60)" })
      .option("user-temperature", { type: "number", describe: "simulated user's sampling temperature (else ENVSCALER_USER_TEMPERATURE, else 0.7)" })
      .option("user-cache", { type: "string", describe: "keep the simulated user's finished calls here, per episode (scenario and seed), so a resumed rollout asks nothing twice (else ENVSCALER_USER_CACHE; default: no cache)" }) as unknown as Argv<ServeArgs>,
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
