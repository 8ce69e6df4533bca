import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import cliProgress from "cli-progress";
import pLimit from "p-limit";
import { canonicalJson } from "../protocol/canonical-json.js";
import { episodePage } from "../bridge/tools/record/episode-page.js";
import { readTrajectories } from "../bridge/tools/record/trajectory-reader.js";
import { BridgeClient, type BridgeClientOptions } from "./bridge-client.js";
import { ModelClient, type ModelClientOptions } from "./model-client.js";
import { OutcomeLog } from "./outcome-log.js";
import { reportPage } from "./report-page.js";
import { ABORTING_KINDS, runEpisode, type AgentOptions, type EpisodeOutcome, type EpisodeSpec } from "./run-episode.js";
import { selectScenarios, type ScenarioInfo } from "./select-scenarios.js";
import { summarize, type RolloutResults, type RunSettings } from "./summarize.js";

export interface RolloutOptions {
  /** The bridge's replica endpoints; episodes are spread over them. */
  endpoints: string[];
  curve?: BridgeClientOptions["curve"];
  /** Scenario ids, globs or env ids; empty: every scenario the bridge serves. */
  scenarios: string[];
  trials: number;
  /** Trial t of every scenario uses seed + t. */
  seed: number;
  concurrency: number;
  agent: AgentOptions;
  model: Omit<ModelClientOptions, "cacheDir">;
  out: string;
  /** Where the bridge records (a bridge this process started); its episodes get pages linked from the report. */
  trajectoriesDir?: string;
  /** What the report says about the run besides the model (benchmark, user simulator). */
  settings: Pick<RunSettings, "benchmark" | "user"> & Partial<Pick<RunSettings, "system_prompt">>;
  progress?: boolean;
  /** Called after each episode (tests, custom progress). */
  onEpisode?: (o: EpisodeOutcome) => void;
}

export interface RolloutRun {
  results: RolloutResults;
  /** Episodes played by this call (the rest came from an earlier, interrupted run). */
  played: number;
  skipped: number;
  resultsPath: string;
  reportPath: string;
}

/**
 * Plays every (scenario, trial) episode not finished in `out` already, `concurrency` at a time,
 * then writes results.json and report.html. Resuming is the same call: finished episodes are read
 * back from episodes.jsonl, and the model calls of an interrupted episode come from the call cache.
 */
export async function runRollout(o: RolloutOptions): Promise<RolloutRun> {
  const started = new Date().toISOString();
  const t0 = performance.now();
  mkdirSync(o.out, { recursive: true });
  const settings: RunSettings = {
    system_prompt: "default",
    ...o.settings,
    model: o.model.model,
    base_url: o.model.baseURL,
    agent_mode: o.agent.agentMode,
    sampling: { ...(o.model.sampling ?? {}) },
    trials: o.trials,
    max_steps: o.agent.maxSteps ?? null,
    scenarios: o.scenarios,
    seed: o.seed,
  };
  claimRunFolder(o.out, settings);
  const clients = o.endpoints.map((e) => new BridgeClient(e, { timeoutMs: 600_000, curve: o.curve }));
  const model = new ModelClient({ ...o.model, cacheDir: join(o.out, "cache") });
  const logPath = join(o.out, "episodes.jsonl");
  const done = OutcomeLog.read(logPath);
  const log = new OutcomeLog(logPath);
  let bar: cliProgress.SingleBar | null = null;
  try {
    const listed = await clients[0]!.request<{ scenarios: ScenarioInfo[] }>("list_scenarios");
    const scenarios = selectScenarios(listed.scenarios, o.scenarios);
    const plan: EpisodeSpec[] = scenarios.flatMap((s) => Array.from({ length: o.trials }, (_, t) => ({ key: `${s.scenario_id}#${t}`, scenario_id: s.scenario_id, env_id: s.env_id, trial: t, seed: o.seed + t })));
    const finished = (k: string) => {
      const d = done.get(k);
      return d !== undefined && !d.failures.some((f) => ABORTING_KINDS.includes(f.kind));
    };
    const todo = plan.filter((p) => !finished(p.key));
    const outcomes = new Map<string, EpisodeOutcome>(plan.filter((p) => finished(p.key)).map((p) => [p.key, done.get(p.key)!]));

    if (o.progress) {
      bar = new cliProgress.SingleBar({ format: "{bar} {value}/{total} episodes | mean reward {reward} | {tps} tok/s | {eta_formatted}", hideCursor: true, stream: process.stderr }, cliProgress.Presets.shades_classic);
      bar.start(plan.length, outcomes.size, { reward: "—", tps: "0" });
    }
    let tokens = 0;
    const limit = pLimit(Math.max(1, o.concurrency));
    let next = 0;
    await Promise.all(
      todo.map((spec) =>
        limit(async () => {
          const client = clients[next++ % clients.length]!;
          const outcome = await runEpisode(client, model, spec, o.agent);
          log.append(outcome);
          outcomes.set(spec.key, outcome);
          tokens += outcome.usage.completion_tokens;
          o.onEpisode?.(outcome);
          if (bar) {
            const rs = [...outcomes.values()].map((x) => x.reward);
            bar.update(outcomes.size, { reward: (rs.reduce((a, b) => a + b, 0) / rs.length).toFixed(3), tps: (tokens / ((performance.now() - t0) / 1000)).toFixed(1) });
          }
        }),
      ),
    );
    bar?.stop();
    bar = null;

    const pages = o.trajectoriesDir ? writeEpisodePages(o.trajectoriesDir, join(o.out, "episodes"), new Set([...outcomes.values()].map((x) => x.episode_id).filter((x): x is string => !!x))) : undefined;
    const results = summarize(settings, plan.map((p) => outcomes.get(p.key)!).filter(Boolean), { started, planned: plan.length, wall_s: (performance.now() - t0) / 1000, pages });
    const resultsPath = join(o.out, "results.json");
    const reportPath = join(o.out, "report.html");
    writeFileSync(resultsPath, `${JSON.stringify(results, null, 1)}\n`);
    writeFileSync(reportPath, reportPage(results));
    return { results, played: todo.length, skipped: plan.length - todo.length, resultsPath, reportPath };
  } finally {
    bar?.stop();
    log.close();
    for (const c of clients) c.close();
  }
}

/**
 * What a run's finished episodes depend on: a run folder resumed with any of these changed would
 * report the earlier episodes under the new settings. (More scenarios or trials, or another URL
 * for the same model, extend a run and are allowed.)
 */
function episodeDeterminants(s: RunSettings): Record<string, unknown> {
  const { model, agent_mode, system_prompt, sampling, max_steps, user, seed } = s;
  // eval --limit only says how many tasks ran (more extend a run); the split itself counts
  const benchmark = s.benchmark && { name: s.benchmark.name, data_version: s.benchmark.data_version, split: s.benchmark.split.replace(/ \(first .* only\)$/, ""), protocol: s.benchmark.protocol };
  return { model, agent_mode, system_prompt, sampling: JSON.parse(JSON.stringify(sampling)) as unknown, max_steps, user_model: user?.model ?? null, user_temperature: user?.temperature ?? null, benchmark, seed };
}

/** Records the run's settings in `out/run.json`, or refuses a folder whose earlier run had other ones. */
function claimRunFolder(out: string, settings: RunSettings): void {
  const path = join(out, "run.json");
  const mine = episodeDeterminants(settings);
  if (existsSync(path)) {
    const theirs = (JSON.parse(readFileSync(path, "utf8")) as { determinants: Record<string, unknown> }).determinants;
    const differ = Object.keys({ ...mine, ...theirs }).filter((k) => canonicalJson(mine[k] ?? null) !== canonicalJson(theirs[k] ?? null));
    if (differ.length)
      throw new Error(`${out} holds a run made with other settings (${differ.map((k) => `${k}: ${canonicalJson(theirs[k] ?? null)} there, ${canonicalJson(mine[k] ?? null)} now`).join("; ")}); its finished episodes would be reported under the new ones. Resume it with the same settings, or use another --out.`);
    return;
  }
  writeFileSync(path, `${JSON.stringify({ determinants: mine }, null, 1)}\n`);
}

/** One page per played episode, from the bridge's trajectory files; returns episode id → path relative to the run folder. */
function writeEpisodePages(trajectoriesDir: string, pagesDir: string, wanted: Set<string>): Map<string, string> {
  const pages = new Map<string, string>();
  if (!existsSync(trajectoriesDir)) return pages;
  mkdirSync(pagesDir, { recursive: true });
  for (const f of readdirSync(trajectoriesDir).filter((x) => x.endsWith(".jsonl"))) {
    for (const e of readTrajectories(join(trajectoriesDir, f)).episodes) {
      const id = e.start.episode_id;
      if (!wanted.has(id)) continue;
      const name = `${id.replace(/[^A-Za-z0-9_-]/g, "_")}.html`;
      writeFileSync(join(pagesDir, name), episodePage(e));
      pages.set(id, `episodes/${name}`);
    }
  }
  return pages;
}
