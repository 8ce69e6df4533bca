import { existsSync, readdirSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { ArgumentsCamelCase, Argv, CommandModule } from "yargs";
import { episodePage } from "../../bridge/tools/record/episode-page.js";
import { replayAll } from "../../bridge/tools/record/replay.js";
import { exportSft, exportSummary, isConversation, originalFilter, type SftFilter, type SftFormat } from "../../bridge/tools/record/sft-export.js";
import { systemPrompt } from "../../agent/system-prompt.js";
import { LEGACY_FORMAT, readTrajectories, TrajectoryFormatError, type RecordedEpisode, type TrajectoryFile } from "../../bridge/tools/record/trajectory-reader.js";
import { BUNDLED_ENVS } from "../../envs/bundled.js";
import { closeMatches } from "./close-matches.js";

/** Exit code for a file this version cannot read (1 is "an episode diverged"). */
const EXIT_UNREADABLE = 2;

function loadFile(file: string): TrajectoryFile {
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
  return t;
}

/** A trajectory file, or a folder of them (a bridge's record dir, a rollout's trajectories/). */
function load(file: string, episode?: string): RecordedEpisode[] {
  if (!existsSync(file)) {
    // unreadable like a foreign file (exit 2); 1 means an episode diverged
    console.error(`envscaler: no file ${file} (serve records episodes to --record-dir, default ./trajectories)`);
    process.exit(EXIT_UNREADABLE);
  }
  const files = statSync(file).isDirectory() ? readdirSync(file).filter((f) => f.endsWith(".jsonl")).sort().map((f) => join(file, f)) : [file];
  const all = files.flatMap((f) => loadFile(f).episodes);
  const eps = episode ? all.filter((e) => e.start.episode_id === episode) : all;
  if (episode && eps.length === 0) {
    const near = closeMatches(episode, all.map((e) => e.start.episode_id), 3);
    throw new Error(`no episode ${episode} in ${file}${near.length ? `; did you mean ${near.join(", ")}?` : ` (it holds ${all.length} episodes)`}`);
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
      .option("json", { type: "boolean", default: false, describe: "print the results as JSON" }),
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
      .option("output", { alias: "o", type: "string", demandOption: true, describe: "the HTML file to write" }),
  // async: a throw (no such episode, an unwritable -o) becomes a rejection main prints as one line; yargs'
  // .fail() never sees a synchronous throw, which escaped as a Node stack trace
  // eslint-disable-next-line @typescript-eslint/require-await
  handler: async (args: ArgumentsCamelCase<ViewArgs>) => {
    const e = load(args.file, args.episode)[0];
    if (!e) throw new Error(`no episodes in ${args.file}`);
    writeFileSync(args.output, episodePage(e));
    console.log(`${e.start.episode_id} → ${args.output}`);
  },
};

interface ExportArgs {
  format: "sft" | SftFormat;
  file: string;
  output: string;
  minReward?: number;
  minTurns?: number;
  maxTurns?: number;
  requireThink: boolean;
  requireDone: boolean;
  originalFilter: boolean;
  systemPrompt: "env" | "agent";
}

export const exportCommand: CommandModule<object, ExportArgs> = {
  command: "export <format> <file>",
  describe: "Export recorded episodes (a trajectory file or folder) as SFT data (JSONL): OpenAI chat (sft, chat), LlamaFactory alpaca with history, ShareGPT",
  builder: (y: Argv) =>
    y
      .positional("format", { choices: ["sft", "chat", "alpaca", "sharegpt"] as const, demandOption: true, describe: "sft = chat: OpenAI messages + tools; alpaca: one sample per assistant turn with history; sharegpt: LlamaFactory conversations with function_call/observation" })
      .positional("file", { type: "string", demandOption: true })
      .option("output", { alias: "o", type: "string", demandOption: true })
      .option("min-reward", { type: "number", describe: "keep episodes with at least this reward" })
      .option("min-turns", { type: "number", describe: "keep episodes with at least this many assistant turns" })
      .option("max-turns", { type: "number", describe: "keep episodes with at most this many assistant turns" })
      .option("require-think", { type: "boolean", default: false, describe: "keep episodes whose every assistant turn has <think> reasoning" })
      .option("require-done", { type: "boolean", default: false, describe: "keep tasks whose last reply says 'Task Completed' and conversations the user ended with ###STOP###" })
      .option("original-filter", { type: "boolean", default: false, describe: "EnvScaler's filter: turns in [3,29] (tasks) / [5,39] (conversations), --require-think, --require-done" })
      .option("system-prompt", { choices: ["env", "agent"] as const, default: "env" as const, describe: "system message: the env's introduction and rules, or the rollout agent's default prompt (with them)" }) as unknown as Argv<ExportArgs>,
  // async for the same reason as view's: a missing output folder is one line, not a stack
  // eslint-disable-next-line @typescript-eslint/require-await
  handler: async (args: ArgumentsCamelCase<ExportArgs>) => {
    const given: SftFilter = { minReward: args.minReward, minTurns: args.minTurns, maxTurns: args.maxTurns, requireThink: args.requireThink || undefined, requireDone: args.requireDone || undefined };
    const defined = Object.fromEntries(Object.entries(given).filter(([, v]) => v !== undefined)) as SftFilter;
    const filter = args.originalFilter ? (e: RecordedEpisode) => ({ ...originalFilter(e), ...defined }) : defined;
    const system =
      args.systemPrompt === "agent"
        ? (e: RecordedEpisode) => systemPrompt({ mode: isConversation(e) ? "conversation" : "task", agentMode: "fc", introduction: e.start.introduction, rules: e.start.rules, tools: e.start.tools })
        : undefined;
    const result = exportSft(load(args.file), args.format === "sft" ? "chat" : args.format, filter, system);
    writeFileSync(args.output, result.records.map((r) => JSON.stringify(r)).join("\n") + (result.records.length ? "\n" : ""));
    console.log(exportSummary(result, args.output));
  },
};
