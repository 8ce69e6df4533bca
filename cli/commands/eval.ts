import type { ArgumentsCamelCase, Argv, CommandModule } from "yargs";
import { BENCHMARKS } from "../../agent/benchmarks.js";
import { rolloutOptions, rolloutWith, type RolloutArgs } from "./rollout.js";

interface EvalArgs extends RolloutArgs {
  benchmark: string;
  from: string;
  domain: string[];
  split: string;
  limit?: number;
}

export const evalCommand: CommandModule<object, EvalArgs> = {
  command: "eval <benchmark>",
  describe: "A rollout with a benchmark's own protocol and scoring (taubench); the report names the data version, models and settings",
  builder: (y: Argv) =>
    rolloutOptions(y)
      .positional("benchmark", { choices: Object.keys(BENCHMARKS), demandOption: true })
      .option("from", { type: "string", default: "../shared/benchmarks/taubench", describe: "the benchmark's data folder" })
      .option("domain", { type: "string", array: true, default: [] as string[], describe: "only these domains (taubench: retail, airline)" })
      .option("split", { type: "string", default: "test", describe: "task split" })
      .option("limit", { type: "number", describe: "only the first N tasks of each domain (smoke runs; the report says so)" }) as unknown as Argv<EvalArgs>,
  handler: async (args: ArgumentsCamelCase<EvalArgs>) => {
    const plan = BENCHMARKS[args.benchmark]!.prepare({ from: args.from, domain: args.domain, split: args.split, out: args.out });
    if (plan.needsUser && !args.userModel && !args.userBaseUrl)
      console.error(`envscaler eval ${args.benchmark}: no simulated user (--user-model/--user-base-url): each conversation ends after the agent's first reply, so the score is not comparable with published ones`);
    const scenarios = args.limit === undefined ? plan.scenarios : plan.scenarios.flatMap((p) => Array.from({ length: args.limit! }, (_, i) => p.replace(/\*$/, String(i))));
    const benchmark = args.limit === undefined ? plan.benchmark : { ...plan.benchmark, split: `${plan.benchmark.split} (first ${args.limit} tasks per domain only)` };
    await rolloutWith({ ...args, envs: plan.envs, scenarios, maxSteps: args.maxSteps ?? plan.maxSteps }, { benchmark });
  },
};
