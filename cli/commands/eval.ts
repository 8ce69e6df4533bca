import { writeFileSync } from "node:fs";
import { join } from "node:path";
import type { ArgumentsCamelCase, Argv, CommandModule } from "yargs";
import { BENCHMARKS } from "../../agent/benchmarks.js";
import { OutcomeLog } from "../../agent/outcome-log.js";
import { reportPage } from "../../agent/report-page.js";
import { rolloutOptions, rolloutWith, type RolloutArgs } from "./rollout.js";

/** The official accuracy per category: the share of episodes whose reward is 1 (BFCL and ACEBench have no partial credit). */
export function accuracyByCategory(
  episodes: { scenario_id: string; reward: number; reward_info?: unknown }[],
  categoryOf: (id: string) => string,
  metricsOf?: (rewardInfo: unknown) => Record<string, number | null>,
): Record<string, { episodes: number; passed: number; accuracy: number; [metric: string]: number }> {
  const out: Record<string, { episodes: number; passed: number; accuracy: number; [metric: string]: number }> = {};
  const sums: Record<string, Record<string, number>> = {};
  for (const e of episodes) {
    const cat = categoryOf(e.scenario_id);
    const c = (out[cat] ??= { episodes: 0, passed: 0, accuracy: 0 });
    c.episodes++;
    if (e.reward === 1) c.passed++;
    c.accuracy = c.passed / c.episodes;
    // a metric averages over the episodes that report it
    for (const [k, v] of Object.entries(metricsOf?.(e.reward_info) ?? {})) {
      if (v === null) continue;
      const s = (sums[cat] ??= {});
      s[k] = (s[k] ?? 0) + v;
      s[`${k}#n`] = (s[`${k}#n`] ?? 0) + 1;
      c[k] = s[k] / s[`${k}#n`]!;
    }
  }
  return out;
}

interface EvalArgs extends RolloutArgs {
  benchmark: string;
  from?: string;
  domain: string[];
  split: string;
  limit?: number;
  python?: string;
}

export const evalCommand: CommandModule<object, EvalArgs> = {
  command: "eval <benchmark>",
  describe: "A rollout with a benchmark's own protocol and scoring (taubench, bfcl, acebench); the report names the data version, models and settings",
  builder: (y: Argv) =>
    rolloutOptions(y)
      .positional("benchmark", { choices: Object.keys(BENCHMARKS), demandOption: true })
      .option("from", { type: "string", describe: "the benchmark's data folder (taubench: ../shared/benchmarks/taubench; acebench: ../shared/benchmarks/acebench; bfcl: the bfcl_eval package folder, found with --python)" })
      .option("domain", { type: "string", array: true, default: [] as string[], describe: "only these domains or categories (taubench: retail, airline; bfcl: base, miss_func, miss_param, long_context; acebench: multi_step, multi_turn)" })
      .option("split", { type: "string", default: "test", describe: "task split" })
      .option("python", { type: "string", describe: "bfcl: the Python interpreter that has bfcl-eval installed, as for `import bfcl` (default: $BFCL_PYTHON or python3)" })
      .option("limit", { type: "number", describe: "only the first N tasks of each domain (smoke runs; the report says so)" }) as unknown as Argv<EvalArgs>,
  handler: async (args: ArgumentsCamelCase<EvalArgs>) => {
    if (args.limit !== undefined && !(Number.isInteger(args.limit) && args.limit > 0)) throw new Error(`--limit takes a whole number of tasks per domain, at least 1 (got ${args.limit}); leave it out to run every task`);
    const bench = BENCHMARKS[args.benchmark]!;
    const plan = bench.prepare({ from: args.from ?? bench.defaultFrom ?? "", domain: args.domain, split: args.split, out: args.out, python: args.python });
    // said on stderr now and kept in the report and categories.json, where the score is read later
    const notComparable: string[] = [];
    if (plan.needsUser && !args.userModel && !args.userBaseUrl) notComparable.push("no simulated user (--user-model/--user-base-url): each conversation ends after the agent's first reply");
    if (args.maxSteps !== undefined && args.maxSteps !== plan.maxSteps)
      notComparable.push(`--max-steps ${args.maxSteps} caps every episode, unlike the benchmark's protocol (${plan.maxSteps === undefined ? "each task's own cap" : `${plan.maxSteps} steps`})`);
    for (const w of notComparable) console.error(`envscaler eval ${args.benchmark}: ${w}, so the score is not comparable with published ones`);
    const scenarios = args.limit === undefined ? plan.scenarios : plan.scenarios.flatMap((p) => Array.from({ length: args.limit! }, (_, i) => p.replace(/\*$/, String(i))));
    const benchmark = {
      ...(args.limit === undefined ? plan.benchmark : { ...plan.benchmark, split: `${plan.benchmark.split} (first ${args.limit} tasks per domain only)` }),
      ...(notComparable.length ? { not_comparable: notComparable } : {}),
    };
    const run = await rolloutWith({ ...args, envs: plan.envs, scenarios, maxSteps: args.maxSteps ?? plan.maxSteps }, { benchmark });
    if (plan.categoryOf) {
      // the outcomes with their reward info (the summary rows leave it out)
      const keys = new Set(run.results.episodes.map((e) => e.key));
      const outcomes = [...OutcomeLog.read(join(args.out, "episodes.jsonl")).values()].filter((o) => keys.has(o.key));
      const categories = accuracyByCategory(outcomes.length === keys.size ? outcomes : run.results.episodes, plan.categoryOf, plan.metricsOf);
      writeFileSync(join(args.out, "categories.json"), `${JSON.stringify({ benchmark, categories }, null, 1)}\n`);
      // the page the rollout wrote, again with the official per-category figures stdout shows
      writeFileSync(run.reportPath, reportPage(run.results, categories));
      console.log(`accuracy per category: ${Object.entries(categories).map(([c, v]) => `${c} ${v.accuracy.toFixed(3)} (${v.passed}/${v.episodes})${v.process_accuracy !== undefined ? `, process ${v.process_accuracy.toFixed(3)}` : ""}`).join(" · ")}`);
    }
  },
};
