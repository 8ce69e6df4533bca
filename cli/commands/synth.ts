import { join } from "node:path";
import { MultiBar, Presets } from "cli-progress";
import type { ArgumentsCamelCase, Argv, CommandModule } from "yargs";
import { LlmClient, type JsonMode, type StageEndpoint, type StageUsage } from "../../synth/llm/llm-client.js";
import { runSynth, type SynthStage } from "../../synth/pipeline.js";
import { CODE_WAYS, type CodeWay } from "../../synth/stages/build-env.js";
import type { TaskFormat } from "../../synth/stages/mine.js";

interface SynthArgs {
  stage: SynthStage;
  out: string;
  input?: string;
  format: TaskFormat;
  model: string;
  baseUrl?: string;
  stageModel: string[];
  concurrency: number;
  limit?: number;
  rounds: number;
  threshold: number;
  perEnv: number;
  conversationEvery: number;
  codeMode: CodeWay;
  codeFallback: CodeWay | "none";
  scenarioFallback: "derived" | "none";
  cache?: string;
  progress: boolean;
  timeout?: number;
  maxRetries?: number;
  maxTokens?: number;
  jsonMode?: JsonMode;
  reaskTemperatureStep?: number;
}

const STAGES = ["mine", "plan", "code", "method", "body", "test", "judge", "scenario"];
/** The code stage's other ways of writing the class, which take its endpoint unless given their own. */
const CODE_STAGES = ["method", "body"];

/**
 * Per-stage endpoints: --model/--base-url for all, then ENVSCALER_SYNTH_<STAGE>_MODEL /
 * _BASE_URL / _API_KEY, then --stage-model stage=model. Keys come from the environment only.
 * `method` and `body` (the code stage's one-method-at-a-time and scaffolded ways) take the code
 * stage's endpoint unless they are given their own.
 */
export function stageEndpoints(args: { model: string; baseUrl?: string; stageModel: string[] }, env: NodeJS.ProcessEnv = process.env): Record<string, StageEndpoint> {
  const base: StageEndpoint = { model: env.ENVSCALER_SYNTH_MODEL ?? args.model, baseURL: args.baseUrl ?? env.ENVSCALER_SYNTH_BASE_URL, apiKey: env.ENVSCALER_SYNTH_API_KEY };
  const out: Record<string, StageEndpoint> = { default: base };
  for (const s of STAGES) {
    const p = `ENVSCALER_SYNTH_${s.toUpperCase()}_`;
    out[s] = { model: env[`${p}MODEL`] ?? base.model, baseURL: env[`${p}BASE_URL`] ?? base.baseURL, apiKey: env[`${p}API_KEY`] ?? base.apiKey };
  }
  for (const pair of args.stageModel) {
    const [stage, model] = pair.split("=");
    if (!stage || !model || !STAGES.includes(stage)) throw new Error(`--stage-model wants stage=model with stage one of ${STAGES.join(", ")}; got ${pair}`);
    out[stage] = { ...out[stage]!, model };
  }
  for (const stage of CODE_STAGES) {
    const own = ["MODEL", "BASE_URL", "API_KEY"].some((k) => env[`ENVSCALER_SYNTH_${stage.toUpperCase()}_${k}`] !== undefined) || args.stageModel.some((p) => p.startsWith(`${stage}=`));
    if (!own) out[stage] = { ...out.code! };
  }
  return out;
}

function envNumber(env: NodeJS.ProcessEnv, name: string): number | undefined {
  const raw = env[name];
  if (raw === undefined || raw.trim() === "") return undefined;
  const n = Number(raw);
  if (!Number.isFinite(n)) throw new Error(`${name} must be a number; got '${raw}'`);
  return n;
}

const JSON_MODES: readonly JsonMode[] = ["off", "object", "schema"];
const isJsonMode = (s: string): s is JsonMode => (JSON_MODES as readonly string[]).includes(s);

/**
 * The LLM call limits, JSON mode and re-ask temperature step: the flag, else ENVSCALER_LLM_TIMEOUT
 * (seconds) / ENVSCALER_LLM_MAX_RETRIES / ENVSCALER_LLM_MAX_TOKENS / ENVSCALER_LLM_JSON_MODE /
 * ENVSCALER_LLM_REASK_TEMPERATURE_STEP, else the defaults (120 s, 4 retries, the server's own
 * token cap, off, 0.3).
 */
export function llmLimits(
  args: { timeout?: number; maxRetries?: number; maxTokens?: number; jsonMode?: string; reaskTemperatureStep?: number },
  env: NodeJS.ProcessEnv = process.env,
): { timeoutMs: number; maxRetries: number; maxTokens?: number; jsonMode: JsonMode; reaskTemperatureStep: number } {
  const timeout = args.timeout ?? envNumber(env, "ENVSCALER_LLM_TIMEOUT") ?? 120;
  const maxRetries = args.maxRetries ?? envNumber(env, "ENVSCALER_LLM_MAX_RETRIES") ?? 4;
  const maxTokens = args.maxTokens ?? envNumber(env, "ENVSCALER_LLM_MAX_TOKENS");
  if (!(timeout > 0)) throw new Error(`the LLM timeout must be a positive number of seconds; got ${timeout}`);
  if (!(Number.isInteger(maxRetries) && maxRetries >= 0)) throw new Error(`the LLM max retries must be an integer >= 0; got ${maxRetries}`);
  if (maxTokens !== undefined && !(Number.isInteger(maxTokens) && maxTokens > 0)) throw new Error(`the LLM max tokens must be a positive integer; got ${maxTokens}`);
  const jsonMode = args.jsonMode ?? env.ENVSCALER_LLM_JSON_MODE ?? "off";
  if (!isJsonMode(jsonMode)) throw new Error(`the JSON mode must be one of ${JSON_MODES.join(", ")}; got '${jsonMode}'`);
  const reaskTemperatureStep = args.reaskTemperatureStep ?? envNumber(env, "ENVSCALER_LLM_REASK_TEMPERATURE_STEP") ?? 0.3;
  if (!(reaskTemperatureStep >= 0 && reaskTemperatureStep <= 1)) throw new Error(`the re-ask temperature step must be between 0 and 1; got ${reaskTemperatureStep}`);
  return { timeoutMs: timeout * 1000, maxRetries, ...(maxTokens !== undefined ? { maxTokens } : {}), jsonMode, reaskTemperatureStep };
}

/** Which progress bar an LLM stage's calls belong to. */
const BAR_OF: Record<string, string> = { mine: "mine", plan: "build", code: "build", method: "build", body: "build", test: "build", judge: "build", scenario: "scenarios" };

/** The LLM counters that a progress bar or log line shows, summed over the stages given. */
export function llmCounters(usage: Record<string, StageUsage>, stages?: string[]): string {
  const t = { calls: 0, retries: 0, timeouts: 0, reasks: 0, truncated: 0 };
  for (const [stage, u] of Object.entries(usage)) {
    if (stages && !stages.includes(BAR_OF[stage] ?? stage)) continue;
    for (const k of Object.keys(t) as (keyof typeof t)[]) t[k] += u[k] ?? 0;
  }
  return `calls ${t.calls} retries ${t.retries} timeouts ${t.timeouts} re-asks ${t.reasks} (cut ${t.truncated})`;
}

/** The run's LLM summary: replies the model got wrong and calls the endpoint failed are different problems. */
export function llmSummary(t: StageUsage): string {
  return [
    `LLM: ${t.calls} calls, ${t.cache_hits} from cache, ${t.prompt_tokens}+${t.completion_tokens} tokens`,
    `${t.reasks} re-asks (${t.truncated} cut at the token limit)`,
    `${t.closed} JSON replies that stopped before their closing brackets closed and used`,
    `${t.invalid} replies still unusable after re-asks (bad JSON, wrong schema or failing code)`,
    `${t.failures} calls failed on the transport after ${t.retries} retries (${t.timeouts} timeouts)`,
  ].join("; ");
}

export const synthCommand: CommandModule<object, SynthArgs> = {
  command: "synth <stage>",
  describe: "Synthesize envs from task text: mine, build (plan, code, dual-agent test), scenarios, or all",
  builder: (y: Argv) =>
    y
      .positional("stage", { choices: ["mine", "build", "scenarios", "all"] as const, demandOption: true })
      .option("out", { type: "string", demandOption: true, describe: "output folder (mined.json, build/, envs/, report.json, .cache/)" })
      .option("input", { type: "string", describe: "task texts for the mine stage" })
      .option("format", { choices: ["jsonl", "json", "api-bank"] as const, default: "jsonl" as const })
      .option("model", { type: "string", default: "gpt-4.1", describe: "model for every stage (see --stage-model)" })
      .option("base-url", { type: "string", describe: "OpenAI-compatible base URL (default OPENAI_BASE_URL, else OpenAI)" })
      .option("stage-model", { type: "string", array: true, default: [], describe: "stage=model, e.g. test=gpt-4.1-mini (stages: mine plan code method body test judge scenario)" })
      .option("concurrency", { type: "number", default: 8, describe: "LLM calls in flight" })
      .option("limit", { type: "number", describe: "judge at most this many tasks in the mine stage" })
      .option("rounds", { type: "number", default: 12, describe: "dual-agent test rounds per env" })
      .option("threshold", { type: "number", default: 0.85, describe: "keep envs whose (pass+warning)/total reaches this" })
      .option("per-env", { type: "number", default: 3, describe: "scenarios per env" })
      .option("conversation-every", { type: "number", default: 3, describe: "every n-th scenario is a conversation (0: none)" })
      .option("code-mode", { choices: CODE_WAYS, default: "whole" as const, describe: "how the build stage writes each env class: whole (one reply), methods (one method per tool), scaffold (the class, helpers and argument checks from the plan; the model writes each tool's body)" })
      .option("code-fallback", { choices: [...CODE_WAYS, "none"] as const, default: "methods" as const, describe: "how the class is written when --code-mode fails (none: the env is rejected)" })
      .option("scenario-fallback", { choices: ["derived", "none"] as const, default: "derived" as const, describe: "when the model's task scenario fails vetting after its re-asks: build one around a state-changing call the dual-agent test verified (the model writes only the task text), or none" })
      .option("cache", { type: "string", describe: "LLM call cache (default OUT/.cache)" })
      .option("progress", { type: "boolean", default: true, describe: "progress on stderr: bars on a terminal, else a line every ENVSCALER_PROGRESS_INTERVAL seconds (default 5)" })
      .option("timeout", { type: "number", describe: "seconds one LLM request may take before it is cancelled and retried (else ENVSCALER_LLM_TIMEOUT, else 120)" })
      .option("max-retries", { type: "number", describe: "retries of one LLM request after a transport error or timeout (else ENVSCALER_LLM_MAX_RETRIES, else 4)" })
      .option("max-tokens", { type: "number", describe: "max_tokens of every LLM request; a reply cut there is re-asked (else ENVSCALER_LLM_MAX_TOKENS, else the server's cap)" })
      .option("json-mode", { choices: JSON_MODES, describe: "how JSON replies are asked for: off (the prompt), object (response_format json_object), schema (each stage's JSON Schema, enforced as it generates by llama.cpp, vLLM and other servers with constrained decoding; best for small models) (else ENVSCALER_LLM_JSON_MODE, else off)" })
      .option("reask-temperature-step", { type: "number", describe: "how much each re-ask of an invalid reply raises the temperature, up to 1.0 (0: not at all); small models repeat a reply byte for byte at a low temperature (else ENVSCALER_LLM_REASK_TEMPERATURE_STEP, else 0.3)" }) as unknown as Argv<SynthArgs>,
  handler: async (args: ArgumentsCamelCase<SynthArgs>) => {
    const bars = args.progress && process.stderr.isTTY ? new MultiBar({ format: "{stage} [{bar}] {value}/{total} | {llm}", stream: process.stderr }, Presets.shades_classic) : null;
    const seen = new Map<string, ReturnType<MultiBar["create"]>>();
    const counts = new Map<string, { done: number; total: number }>();
    // a retry or a timeout shows on its bar at once, not only when an item finishes
    const refresh = () => {
      for (const [stage, bar] of seen) bar.update(counts.get(stage)?.done ?? 0, { llm: llmCounters(llm.usage, [stage]) });
    };
    const llm = new LlmClient({ endpoints: stageEndpoints(args), cacheDir: args.cache ?? join(args.out, ".cache"), concurrency: args.concurrency, ...llmLimits(args), onEvent: () => bars && refresh() });
    // with stderr not a terminal (a log file, CI, nohup) a plain line every few seconds says the run is alive
    const started = Date.now();
    const intervalS = Number(process.env.ENVSCALER_PROGRESS_INTERVAL ?? 5) || 5;
    const ticker =
      args.progress && !bars
        ? setInterval(() => {
            const stages = [...counts].map(([s, c]) => `${s} ${c.done}/${c.total}`).join(", ") || "starting";
            process.stderr.write(`synth ${Math.round((Date.now() - started) / 1000)}s: ${stages} | ${llm.inFlight} in flight, ${llmCounters(llm.usage)}\n`);
          }, intervalS * 1000)
        : null;
    ticker?.unref();
    try {
      const report = await runSynth(llm, {
        stage: args.stage,
        out: args.out,
        input: args.input,
        format: args.format,
        limit: args.limit,
        rounds: args.rounds,
        threshold: args.threshold,
        perEnv: args.perEnv,
        conversationEvery: args.conversationEvery,
        codeMode: args.codeMode,
        codeFallback: args.codeFallback,
        scenarioFallback: args.scenarioFallback,
        progress: (stage, done, total) => {
          counts.set(stage, { done, total });
          if (!bars) return;
          const bar = seen.get(stage) ?? bars.create(total, 0, { stage: stage.padEnd(9), llm: "" });
          seen.set(stage, bar);
          bar.setTotal(total);
          refresh();
        },
      });
      bars?.stop();
      const t = llm.totals();
      console.log(`mined envs: ${report.mine?.envs ?? "-"}; built: ${report.build?.envs.filter((e) => e.kept).length ?? "-"} kept of ${report.build?.envs.length ?? "-"}; served: ${Object.keys(report.scenarios?.envs ?? {}).length} envs, ${Object.values(report.scenarios?.envs ?? {}).flat().length} scenarios`);
      console.log(`${llmSummary(t)}; report: ${join(args.out, "report.json")}`);
      // an overnight run that produced nothing (an unreachable endpoint, a model that never
      // answers in shape) must not look like success to the script that started it
      const produced =
        args.stage === "mine" ? report.mine?.envs : args.stage === "build" ? report.build?.envs.filter((e) => e.kept).length : Object.keys(report.scenarios?.envs ?? {}).length;
      if (produced === 0) {
        console.error(
          `envscaler synth ${args.stage}: nothing was produced (${t.failures} LLM calls failed on the transport, ${t.invalid} replies still unusable after re-asks); every rejection and its reason is in report.json`,
        );
        process.exitCode = 1;
      }
    } finally {
      if (ticker) clearInterval(ticker);
      bars?.stop();
    }
  },
};
