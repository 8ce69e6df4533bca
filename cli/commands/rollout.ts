import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import type { ArgumentsCamelCase, Argv, CommandModule } from "yargs";
import { readSystemPromptFile, type AgentMode } from "../../agent/system-prompt.js";
import { checkReachable } from "../../agent/reachability.js";
import { OutcomeLog } from "../../agent/outcome-log.js";
import { runRollout, type RolloutRun } from "../../agent/rollout.js";
import { ABORTING_KINDS } from "../../agent/run-episode.js";
import type { RunSettings } from "../../agent/summarize.js";
import { resolveUserConfig } from "../../bridge/core/episode/user-simulator.js";
import { llmEnv, llmEnvNumber } from "../../llm/llm-env.js";
import { createLogger } from "../../bridge/fronts/zmq/logger.js";
import { Supervisor, type ConnectionInfo } from "../../bridge/fronts/zmq/supervisor.js";
import { envsOptions, userConfigFromArgs, userOptions, workersOptions, type UserArgs } from "../option-groups.js";

export interface RolloutArgs extends UserArgs {
  scenarios: string[];
  envs: string[];
  connectionFile?: string;
  replicas: number;
  workers: number;
  out: string;
  trials: number;
  seed: number;
  concurrency: number;
  maxSteps?: number;
  agentMode: AgentMode;
  model: string;
  baseUrl?: string;
  apiKey?: string;
  temperature?: number;
  topP?: number;
  maxTokens?: number;
  extraBody?: string;
  timeout?: number;
  retries?: number;
  backoff: number;
  systemPrompt?: string;
  progress?: boolean;
}

/** The options `rollout` and `eval` share. */
export function rolloutOptions<T>(y: Argv<T>): Argv<T> {
  return userOptions(workersOptions(y))
    .option("out", { type: "string", demandOption: true, describe: "run folder: episodes.jsonl, results.json, report.html, trajectories/, the call cache (run again to resume)" })
    .option("connection-file", { type: "string", describe: "join a running bridge (`envscaler serve --connection-file`) instead of starting one" })
    .option("replicas", { type: "number", default: 1, describe: "replicas of the bridge this command starts" })
    .option("trials", { type: "number", default: 1, describe: "episodes per scenario (trial t uses seed + t)" })
    .option("seed", { type: "number", default: 0, describe: "seed of trial 0" })
    .option("concurrency", { type: "number", default: 4, describe: "episodes in flight" })
    .option("max-steps", { type: "number", describe: "agent steps per episode (default: the scenario's max_steps)" })
    .option("agent-mode", { choices: ["fc", "prompt"] as const, default: "fc", describe: "fc: the tools API; prompt: tools in the system prompt, <tool_call> text" })
    .option("model", { type: "string", demandOption: true, describe: "the agent's model" })
    .option("base-url", { type: "string", describe: "the agent's OpenAI-compatible endpoint (else ENVSCALER_AGENT_BASE_URL, else OPENAI_BASE_URL)" })
    .option("api-key", { type: "string", describe: "else ENVSCALER_AGENT_API_KEY, else OPENAI_API_KEY" })
    .option("temperature", { type: "number" })
    .option("top-p", { type: "number" })
    .option("max-tokens", { type: "number" })
    .option("extra-body", { type: "string", describe: 'JSON merged into each request, e.g. \'{"chat_template_kwargs":{"enable_thinking":false}}\'' })
    .option("timeout", { type: "number", describe: "seconds per model call attempt (else ENVSCALER_AGENT_TIMEOUT, else ENVSCALER_LLM_TIMEOUT, else 120)" })
    .option("retries", { type: "number", describe: "retries of a model call on transport errors, timeouts, 429 and 5xx (else ENVSCALER_AGENT_MAX_RETRIES, else ENVSCALER_LLM_MAX_RETRIES, else 4)" })
    .option("backoff", { type: "number", default: 1000, describe: "first retry delay in ms (doubles per retry)" })
    .option("system-prompt", { type: "string", describe: 'file replacing the agent\'s instructions: text, or JSON {"task": …, "conversation": …}' })
    .option("progress", { type: "boolean", describe: "progress bar (default: when stderr is a terminal)" });
}

/** Starts (or joins) a bridge, runs the rollout, stops what it started, prints a summary. */
export async function rolloutWith(args: RolloutArgs, extra: { benchmark: RunSettings["benchmark"] } = { benchmark: null }): Promise<RolloutRun> {
  const baseURL = args.baseUrl ?? llmEnv("AGENT", "BASE_URL");
  if (!baseURL) throw new Error("no agent endpoint: pass --base-url or set ENVSCALER_AGENT_BASE_URL or OPENAI_BASE_URL");
  const timeoutS = args.timeout ?? llmEnvNumber("AGENT", "TIMEOUT") ?? 120;
  const maxRetries = args.retries ?? llmEnvNumber("AGENT", "MAX_RETRIES") ?? 4;
  let extraBody: Record<string, unknown> | undefined;
  if (args.extraBody) {
    try {
      extraBody = JSON.parse(args.extraBody) as Record<string, unknown>;
    } catch (e) {
      throw new Error(`--extra-body is not JSON: ${(e as Error).message}`, { cause: e });
    }
  }
  const wantsUser = Boolean(args.userModel || args.userBaseUrl);
  // the user's calls are cached in the run folder like the agent's, so a resumed run asks it nothing it already answered
  const user = wantsUser ? { ...userConfigFromArgs(args, {}), cacheDir: args.userCache ?? join(resolve(args.out), "user-cache") } : null;
  let supervisor: Supervisor | null = null;
  let endpoints: string[];
  let curve;
  let trajectoriesDir: string | undefined;
  if (args.connectionFile) {
    const info = JSON.parse(readFileSync(args.connectionFile, "utf8")) as ConnectionInfo;
    endpoints = info.endpoints;
    // a connection file outlives a bridge that was killed: say so now, not after the first reset's 10-minute timeout
    await Promise.all(
      endpoints.map((e) =>
        checkReachable(e).catch((err: Error) => {
          throw new Error(`${args.connectionFile}: ${err.message}`, { cause: err });
        }),
      ),
    );
    if (info.curve) curve = { serverPublicKey: info.curve.server_public_key, publicKey: info.curve.client_public_key, secretKey: info.curve.client_secret_key };
  } else {
    process.env.ENVSCALER_LOG_LEVEL ??= "warn";
    trajectoriesDir = join(resolve(args.out), "trajectories");
    // its episodes start together: each replica readies sandboxes for its share of them before the first reset
    const warmSessions = Math.ceil(args.concurrency / Math.max(1, args.replicas));
    supervisor = new Supervisor({ envs: args.envs, endpoint: "tcp://127.0.0.1:*", replicas: args.replicas, workers: args.workers, warmSessions, user, recordDir: trajectoriesDir, logger: createLogger("envscaler-rollout") });
    endpoints = (await supervisor.start()).endpoints;
  }
  const progress = args.progress ?? Boolean(process.stderr.isTTY);
  try {
    const run = await runRollout({
      endpoints,
      curve,
      scenarios: args.scenarios,
      trials: args.trials,
      seed: args.seed,
      concurrency: args.concurrency,
      agent: { agentMode: args.agentMode, maxSteps: args.maxSteps, promptOverride: args.systemPrompt ? readSystemPromptFile(args.systemPrompt) : undefined },
      model: {
        baseURL,
        apiKey: args.apiKey,
        model: args.model,
        sampling: { temperature: args.temperature, top_p: args.topP, max_tokens: args.maxTokens, extra_body: extraBody },
        timeoutMs: timeoutS * 1000,
        maxRetries,
        backoffMs: args.backoff,
      },
      out: args.out,
      trajectoriesDir,
      settings: { benchmark: extra.benchmark, system_prompt: args.systemPrompt ?? "default", user: wantsUser ? { model: args.userModel ?? null, base_url: resolveUserConfig(user!).baseURL ?? null, temperature: resolveUserConfig(user!).temperature } : null },
      progress,
      // no bar (stderr not a terminal, e.g. under nohup): a line per episode, so a slow model's run can be watched
      onEpisode: progress ? undefined : (o) => process.stderr.write(`episode ${o.key} done: reward ${o.reward.toFixed(3)}, ${o.steps} steps, ${o.end_reason ?? "no end"}${o.failures.length ? `, failures: ${[...new Set(o.failures.map((f) => f.kind))].join(" ")}` : ""}, ${(o.wall_ms / 1000).toFixed(0)} s\n`),
    });
    const t = run.results.totals;
    const pk = Object.entries(t.pass_hat_k).map(([k, v]) => `pass^${k} ${v === null ? "—" : v.toFixed(3)}`).join(" · ");
    console.log(`${run.results.episodes.length}/${run.results.planned} episodes (${run.played} played, ${run.skipped} already done) · mean reward ${t.mean_reward.toFixed(3)} · success ${(100 * t.success_rate).toFixed(1)}% · ${pk}`);
    const fails = Object.entries(run.results.failures).filter(([, f]) => f.episodes).map(([k, f]) => `${k} ${f.episodes}`);
    if (fails.length) console.log(`failures (episodes): ${fails.join(", ")}`);
    console.log(`results → ${run.resultsPath}\nreport → ${run.reportPath}`);
    // episodes the endpoint or the bridge cut short are not the model's results: say why, loudly,
    // and exit non-zero, so an unreachable endpoint never reads as a score of 0
    const keys = new Set(run.results.episodes.map((e) => e.key));
    const cut = [...OutcomeLog.read(join(args.out, "episodes.jsonl")).values()].filter((x) => keys.has(x.key) && x.failures.some((f) => ABORTING_KINDS.includes(f.kind)));
    if (cut.length) {
      const first = cut[0]!.failures.find((f) => ABORTING_KINDS.includes(f.kind))!;
      console.error(`envscaler: ${cut.length} of ${run.results.planned} episodes could not finish (${first.kind}: ${first.message}); they count as failures in these results and are played again when the same command runs again`);
      process.exitCode = 3;
    }
    return run;
  } finally {
    await supervisor?.stop();
  }
}

export const rolloutCommand: CommandModule<object, RolloutArgs> = {
  command: "rollout",
  describe: "Play an agent model (any OpenAI-compatible endpoint) on scenarios over the bridge; record, score and report",
  builder: (y: Argv) =>
    envsOptions(rolloutOptions(y))
      .option("scenarios", { type: "string", array: true, default: [] as string[], describe: "scenario ids, globs (library-*) or env ids (default: all)" }) as unknown as Argv<RolloutArgs>,
  handler: async (args: ArgumentsCamelCase<RolloutArgs>) => {
    await rolloutWith(args);
  },
};
