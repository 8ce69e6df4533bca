import { writeFileSync } from "node:fs";
import { join } from "node:path";
import type { ArgumentsCamelCase, Argv, CommandModule } from "yargs";
import { EnvRuntime } from "../../bridge/core/engine/env-runtime.js";
import { McpHttpServer } from "../../bridge/fronts/mcp/mcp-http-server.js";
import { serveStdio } from "../../bridge/fronts/mcp/mcp-stdio.js";
import { ScenarioPicker } from "../../bridge/fronts/mcp/scenario-picker.js";
import { TrajectoryWriter } from "../../bridge/tools/record/trajectory-writer.js";
import { createLogger } from "../../bridge/fronts/zmq/logger.js";
import { envsOptions, hostOptions, recordOptions, sessionOptions, snapshotOptions, userConfigFromArgs, userOptions, watchdogOptions, workersOptions, type UserArgs } from "../option-groups.js";

interface McpArgs extends UserArgs {
  envs: string[];
  scenario?: string;
  scenarios?: string;
  seed?: number;
  host: string;
  port: number;
  stdio: boolean;
  token?: string;
  controlToken?: string;
  allowOrigin: string[];
  allowHost: string[];
  workers: number;
  maxSessions: number;
  idleTimeout: number;
  maxInFlight: number;
  maxQueuedPerSession: number;
  maxBodyBytes: number;
  requestTimeout: number;
  hardStopGraceMs: number;
  maxRestartsPerMinute: number;
  maxSnapshots: number;
  maxSnapshotMb: number;
  record: boolean;
  recordDir: string;
  connectionFile?: string;
  resultFile?: string;
}

export const mcpCommand: CommandModule<object, McpArgs> = {
  command: "mcp",
  describe: "Serve env episodes as MCP servers: one sandboxed episode per MCP session (docs/mcp.md)",
  builder: (y: Argv) =>
    userOptions(recordOptions(watchdogOptions(snapshotOptions(sessionOptions(workersOptions(hostOptions(envsOptions(y))))))))
      .option("scenario", { type: "string", describe: "every session plays this scenario" })
      .option("scenarios", { type: "string", describe: "sessions may play the scenarios whose ids match this glob (e.g. 'library-*')" })
      .conflicts("scenario", "scenarios")
      .option("seed", { type: "number", describe: "seed of sessions that name none (default: random per session)" })
      .option("port", { type: "number", default: 8765, describe: "port (0: a free one, printed)" })
      .option("stdio", { type: "boolean", default: false, describe: "serve one episode over stdin/stdout instead of HTTP" })
      .option("token", { type: "string", describe: "bearer token of the MCP endpoint (or ENVSCALER_MCP_TOKEN); required off loopback" })
      .option("control-token", { type: "string", describe: "bearer token of the /control routes (or ENVSCALER_MCP_CONTROL_TOKEN; generated and printed if unset)" })
      .option("allow-origin", { type: "string", array: true, default: [], describe: "browser Origin allowed besides loopback ones (repeatable)" })
      .option("allow-host", { type: "string", array: true, default: [], describe: "Host header name accepted besides loopback names and the bound address (repeatable)" })
      .option("max-queued-per-session", { type: "number", default: 16, describe: "tool calls waiting on one session; more get an overloaded tool error" })
      .option("max-body-bytes", { type: "number", default: 4 << 20, describe: "largest request body" })
      .option("request-timeout", { type: "number", default: 120, describe: "seconds a whole HTTP request (headers and body) may take to arrive; a slower one gets 408 and its connection is closed" })
      .option("connection-file", { type: "string", describe: "write the URLs and the control token here (mode 0600) once serving" })
      .option("result-file", { type: "string", describe: "--stdio: write the episode's score here when the client disconnects" }) as unknown as Argv<McpArgs>,
  handler: async (args: ArgumentsCamelCase<McpArgs>) => {
    const log = createLogger("envscaler-mcp");
    const recorder = args.record ? new TrajectoryWriter(join(args.recordDir, `mcp-${new Date().toISOString().replace(/[:.]/g, "")}-${process.pid}.jsonl`)) : null;
    const runtime = await EnvRuntime.start({
      envs: args.envs,
      workers: args.workers,
      user: userConfigFromArgs(args),
      recorder,
      hardStopGraceMs: args.hardStopGraceMs,
      maxRestartsPerMinute: args.maxRestartsPerMinute,
      maxSnapshotsPerEpisode: args.maxSnapshots,
      maxSnapshotBytes: args.maxSnapshotMb * 1024 * 1024,
    });
    const shutdown = async () => {
      await runtime.close();
      recorder?.close();
    };
    try {
      const picker = new ScenarioPicker(runtime.registry, { scenario: args.scenario, scenarios: args.scenarios });
      if (args.stdio) {
        // stdout is the MCP channel: the outcome goes to stderr (and --result-file)
        const outcome = await serveStdio({ runtime, picker, seed: args.seed });
        const line = JSON.stringify({ ...outcome, trajectories: recorder?.path ?? null });
        process.stderr.write(`${line}\n`);
        if (args.resultFile) writeFileSync(args.resultFile, `${line}\n`);
        return;
      }
      const server = new McpHttpServer({
        runtime,
        picker,
        host: args.host,
        port: args.port,
        token: args.token ?? process.env.ENVSCALER_MCP_TOKEN ?? null,
        controlToken: args.controlToken ?? process.env.ENVSCALER_MCP_CONTROL_TOKEN ?? null,
        allowedOrigins: args.allowOrigin,
        allowedHosts: args.allowHost,
        seed: args.seed,
        limits: { maxSessions: args.maxSessions, idleTimeoutS: args.idleTimeout, maxInFlight: args.maxInFlight, maxQueuedPerSession: args.maxQueuedPerSession, maxBodyBytes: args.maxBodyBytes, requestTimeoutMs: positiveSeconds("--request-timeout", args.requestTimeout) * 1000 },
        logger: log,
      });
      const url = await server.start();
      const generated = !(args.controlToken ?? process.env.ENVSCALER_MCP_CONTROL_TOKEN);
      const info = { mcp: url, control: server.controlUrl, scenarios: picker.ids.length, pid: process.pid };
      if (args.connectionFile) writeFileSync(args.connectionFile, JSON.stringify({ ...info, control_token: server.controlToken }, null, 2), { mode: 0o600 });
      log.info({ ...info, recording: recorder?.path ?? null }, "mcp serving");
      // the one line a script waits for on stdout; a generated control token is only known here
      console.log(JSON.stringify(generated ? { ...info, control_token: server.controlToken } : info));
      await new Promise<void>((resolve) => {
        const stop = () => {
          log.info("stopping");
          void server.stop().then(resolve);
        };
        process.once("SIGTERM", stop);
        process.once("SIGINT", stop);
      });
    } finally {
      await shutdown();
    }
  },
};

/** A flag's value in seconds, refused unless a positive number (0 or a negative would turn the cut-off off or make every request late). */
function positiveSeconds(flag: string, value: number): number {
  if (!(value > 0) || !Number.isFinite(value)) throw new Error(`${flag} must be a positive number of seconds; got ${value}`);
  return value;
}
