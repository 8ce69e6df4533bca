import { existsSync, statSync, writeFileSync } from "node:fs";
import type { ArgumentsCamelCase, Argv, CommandModule } from "yargs";
import { episodePage } from "../../bridge/record/episode-page.js";
import { replayAll } from "../../bridge/record/replay.js";
import { selectForSft } from "../../bridge/record/sft-export.js";
import { LEGACY_FORMAT, readTrajectories, TrajectoryFormatError, type RecordedEpisode } from "../../bridge/record/trajectory-reader.js";
import { BUNDLED_ENVS } from "../../envs/bundled.js";
import { closeMatches } from "./close-matches.js";

/** Exit code for a file this version cannot read (1 is "an episode diverged"). */
const EXIT_UNREADABLE = 2;

function load(file: string, episode?: string): RecordedEpisode[] {
  if (!existsSync(file)) throw new Error(`no file ${file} (serve records episodes to --record-dir, default ./trajectories)`);
  if (statSync(file).isDirectory()) throw new Error(`${file} is a folder; name one of its trajectory files (.jsonl)`);
  let t;
  try {
    t = readTrajectories(file);
  } catch (e) {
    // another tool's file, a newer format, an empty file: say so and stop, never "0/0 replayed"
    if (!(e instanceof TrajectoryFormatError) && (e as NodeJS.ErrnoException).code === undefined) throw e;
    console.error(`envscaler: ${(e as Error).message}`);
    process.exit(EXIT_UNREADABLE);
  }
  if (t.format === LEGACY_FORMAT) console.error(`${file}: no format header: read as a file of the earlier, unversioned format (the same records)`);
  for (const s of t.skipped) console.error(`${file}:${s.line}: skipped: ${s.reason}`);
  const eps = episode ? t.episodes.filter((e) => e.start.episode_id === episode) : t.episodes;
  if (episode && eps.length === 0) {
    const near = closeMatches(episode, t.episodes.map((e) => e.start.episode_id), 3);
    throw new Error(`no episode ${episode} in ${file}${near.length ? `; did you mean ${near.join(", ")}?` : ` (it holds ${t.episodes.length} episodes)`}`);
  }
  return eps;
}

interface ReplayArgs {
  file: string;
  episode?: string;
  envs: string[];
  json: boolean;
}

export const replayCommand: CommandModule<object, ReplayArgs> = {
  command: "replay <file>",
  describe: "Re-execute recorded episodes in fresh sandboxes and verify every observation and state hash",
  builder: (y: Argv) =>
    y
      .positional("file", { type: "string", demandOption: true })
      .option("episode", { type: "string", describe: "only this episode id" })
      .option("envs", { type: "string", array: true, default: [BUNDLED_ENVS], describe: "bundle folders the episodes were played on" })
      .option("json", { type: "boolean", default: false, describe: "print the results as JSON" }) as unknown as Argv<ReplayArgs>,
  handler: async (args: ArgumentsCamelCase<ReplayArgs>) => {
    const results = await replayAll(args.envs, load(args.file, args.episode));
    if (args.json) console.log(JSON.stringify(results));
    else
      for (const r of results) {
        const mark = !r.ok ? "✗" : r.complete ? "✓" : "◐";
        const cut = r.complete
          ? ""
          : r.ok
            ? ` — incomplete: the recording stops after step ${r.steps} with no end (the server was stopped mid-episode, or it is still running); replayed up to its last record`
            : " — incomplete: the recording has no end";
        console.log(`${mark} ${r.episode_id} (${r.scenario_id}, ${r.steps} steps)${cut}${r.changed.length ? ` — changed since recording: ${r.changed.join(", ")}` : ""}`);
        if (r.divergence) {
          const d = r.divergence;
          console.log(`    first divergence at step ${d.step}: ${d.what}\n    recorded: ${d.expected}\n    replayed: ${d.actual}`);
        }
      }
    const bad = results.filter((r) => !r.ok).length;
    const partial = results.filter((r) => r.ok && !r.complete).length;
    if (!args.json) {
      const parts = [`${results.length - bad - partial}/${results.length} episodes replayed exactly`];
      if (partial) parts.push(`${partial} incomplete (matched up to their last record)`);
      if (bad) parts.push(`${bad} diverged`);
      console.log(parts.join("; "));
    }
    process.exitCode = bad ? 1 : 0;
  },
};

interface ViewArgs {
  file: string;
  episode?: string;
  output: string;
}

export const viewCommand: CommandModule<object, ViewArgs> = {
  command: "view <file>",
  describe: "Write a self-contained HTML page of a recorded episode",
  builder: (y: Argv) =>
    y
      .positional("file", { type: "string", demandOption: true })
      .option("episode", { type: "string", describe: "episode id (default: the first in the file)" })
      .option("output", { alias: "o", type: "string", demandOption: true, describe: "the HTML file to write" }) as unknown as Argv<ViewArgs>,
  handler: async (args: ArgumentsCamelCase<ViewArgs>) => {
    const e = load(args.file, args.episode)[0];
    if (!e) throw new Error(`no episodes in ${args.file}`);
    writeFileSync(args.output, episodePage(e));
    console.log(`${e.start.episode_id} → ${args.output}`);
  },
};

interface ExportArgs {
  format: "sft";
  file: string;
  output: string;
  minReward?: number;
  minTurns?: number;
  maxTurns?: number;
}

export const exportCommand: CommandModule<object, ExportArgs> = {
  command: "export <format> <file>",
  describe: "Export recorded episodes as OpenAI-format chat data (JSONL) for SFT",
  builder: (y: Argv) =>
    y
      .positional("format", { choices: ["sft"] as const, demandOption: true })
      .positional("file", { type: "string", demandOption: true })
      .option("output", { alias: "o", type: "string", demandOption: true })
      .option("min-reward", { type: "number", describe: "keep episodes with at least this reward" })
      .option("min-turns", { type: "number" })
      .option("max-turns", { type: "number" }) as unknown as Argv<ExportArgs>,
  handler: async (args: ArgumentsCamelCase<ExportArgs>) => {
    const records = selectForSft(load(args.file), { minReward: args.minReward, minTurns: args.minTurns, maxTurns: args.maxTurns });
    writeFileSync(args.output, records.map((r) => JSON.stringify(r)).join("\n") + (records.length ? "\n" : ""));
    console.log(`${records.length} episodes → ${args.output}`);
  },
};
