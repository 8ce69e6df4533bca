import { join } from "node:path";
import { MultiBar, Presets } from "cli-progress";
import type { ArgumentsCamelCase, Argv, CommandModule } from "yargs";
import { LlmClient, type StageEndpoint } from "../../synth/llm/llm-client.js";
import { runSynth, type SynthStage } from "../../synth/pipeline.js";
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
  cache?: string;
  progress: boolean;
}

const STAGES = ["mine", "plan", "code", "test", "judge", "scenario"];

/**
 * Per-stage endpoints: --model/--base-url for all, then ENVSCALER_SYNTH_<STAGE>_MODEL /
 * _BASE_URL / _API_KEY, then --stage-model stage=model. Keys come from the environment only.
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
  return out;
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
      .option("stage-model", { type: "string", array: true, default: [], describe: "stage=model, e.g. test=gpt-4.1-mini (stages: mine plan code test judge scenario)" })
      .option("concurrency", { type: "number", default: 8, describe: "LLM calls in flight" })
      .option("limit", { type: "number", describe: "judge at most this many tasks in the mine stage" })
      .option("rounds", { type: "number", default: 12, describe: "dual-agent test rounds per env" })
      .option("threshold", { type: "number", default: 0.85, describe: "keep envs whose (pass+warning)/total reaches this" })
      .option("per-env", { type: "number", default: 3, describe: "scenarios per env" })
      .option("conversation-every", { type: "number", default: 3, describe: "every n-th scenario is a conversation (0: none)" })
      .option("cache", { type: "string", describe: "LLM call cache (default OUT/.cache)" })
      .option("progress", { type: "boolean", default: true, describe: "progress bars on stderr" }) as unknown as Argv<SynthArgs>,
  handler: async (args: ArgumentsCamelCase<SynthArgs>) => {
    const llm = new LlmClient({ endpoints: stageEndpoints(args), cacheDir: args.cache ?? join(args.out, ".cache"), concurrency: args.concurrency });
    const bars = args.progress && process.stderr.isTTY ? new MultiBar({ format: "{stage} [{bar}] {value}/{total}", stream: process.stderr }, Presets.shades_classic) : null;
    const seen = new Map<string, ReturnType<MultiBar["create"]>>();
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
        progress: (stage, done, total) => {
          if (!bars) return;
          const bar = seen.get(stage) ?? bars.create(total, 0, { stage: stage.padEnd(9) });
          seen.set(stage, bar);
          bar.setTotal(total);
          bar.update(done);
        },
      });
      bars?.stop();
      const t = llm.totals();
      console.log(`mined envs: ${report.mine?.envs ?? "-"}; built: ${report.build?.envs.filter((e) => e.kept).length ?? "-"} kept of ${report.build?.envs.length ?? "-"}; served: ${Object.keys(report.scenarios?.envs ?? {}).length} envs, ${Object.values(report.scenarios?.envs ?? {}).flat().length} scenarios`);
      console.log(`LLM: ${t.calls} calls, ${t.cache_hits} from cache, ${t.reasks} re-asks, ${t.failures} failed, ${t.prompt_tokens}+${t.completion_tokens} tokens; report: ${join(args.out, "report.json")}`);
      // an overnight run that produced nothing (an unreachable endpoint, a model that never
      // answers in shape) must not look like success to the script that started it
      const produced =
        args.stage === "mine" ? report.mine?.envs : args.stage === "build" ? report.build?.envs.filter((e) => e.kept).length : Object.keys(report.scenarios?.envs ?? {}).length;
      if (produced === 0) {
        console.error(`envscaler synth ${args.stage}: nothing was produced (${t.failures} LLM calls failed); every rejection and its reason is in report.json`);
        process.exitCode = 1;
      }
    } finally {
      bars?.stop();
    }
  },
};
