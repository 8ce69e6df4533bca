import { existsSync } from "node:fs";
import { join } from "node:path";
import type { ArgumentsCamelCase, Argv, CommandModule } from "yargs";
import { ModelAgentPlayer } from "../../agent/ui-agent-player.js";
import { UiServer } from "../../bridge/fronts/ui/ui-server.js";
import { envsOptions, hostOptions, snapshotOptions, userConfigFromArgs, userOptions, type UserArgs } from "../option-groups.js";

interface UiArgs extends UserArgs {
  envs: string[];
  trajectories: string;
  port: number;
  host: string;
  idleTimeout: number;
  maxEpisodes: number;
  hardStopGraceMs: number;
  maxSnapshots: number;
  maxSnapshotMb: number;
  agentBaseUrl?: string;
  agentModel?: string;
}

/** A synth run folder (report.json + envs/) stands for its served bundles. */
const envFolder = (dir: string) => (existsSync(join(dir, "report.json")) && existsSync(join(dir, "envs")) ? join(dir, "envs") : dir);

export const uiCommand: CommandModule<object, UiArgs> = {
  command: "ui",
  describe: "Serve a local web playground: browse envs, play episodes by hand or with a model (undo, branch), inspect, replay and export trajectories",
  builder: (y: Argv) =>
    userOptions(snapshotOptions(hostOptions(envsOptions(y))))
      .option("trajectories", { type: "string", default: "trajectories", describe: "folder of recorded trajectory files (*.jsonl)" })
      .option("port", { type: "number", default: 8080, describe: "0 picks a free port" })
      .option("idle-timeout", { type: "number", default: 1800, describe: "close an episode nobody touched for this many seconds" })
      .option("max-episodes", { type: "number", default: 32, describe: "episodes open at once across all pages" })
      .option("hard-stop-grace-ms", { type: "number", default: 1000, describe: "how long past its own deadline a guest call may run before the watchdog stops it" })
      .option("agent-base-url", { type: "string", describe: "the agent form's OpenAI-compatible endpoint to start with (default: OPENAI_BASE_URL)" })
      .option("agent-model", { type: "string", describe: "the agent form's model to start with" }) as unknown as Argv<UiArgs>,
  handler: async (args: ArgumentsCamelCase<UiArgs>) => {
    const ui = await UiServer.start({
      envs: args.envs.map(envFolder),
      trajectories: args.trajectories,
      port: args.port,
      host: args.host,
      user: userConfigFromArgs(args),
      idleMs: args.idleTimeout * 1000,
      maxEpisodes: args.maxEpisodes,
      hardStopGraceMs: args.hardStopGraceMs,
      maxSnapshots: args.maxSnapshots,
      maxSnapshotMb: args.maxSnapshotMb,
      agent: { baseURL: args.agentBaseUrl ?? process.env.OPENAI_BASE_URL, model: args.agentModel },
      agentPlayer: new ModelAgentPlayer(),
    });
    // the one line a script may wait for on stdout
    console.log(JSON.stringify({ ui: ui.openUrl }));
    console.error(`envscaler ui: open ${ui.openUrl}${ui.token ? "  (bound beyond loopback: the token in this link is required)" : ""}`);
    await new Promise<void>((resolve) => {
      const stop = () => void ui.close().then(resolve);
      process.once("SIGINT", stop);
      process.once("SIGTERM", stop);
    });
  },
};
