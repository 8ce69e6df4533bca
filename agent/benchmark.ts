import type { RunSettings } from "./summarize.js";

// What `envscaler eval` needs of a benchmark (tau-bench, BFCL, ACEBench: agent/benchmarks.ts,
// agent/benchmark-bfcl-acebench.ts), in a file of its own so those two need not import each other.

/** What a benchmark's protocol fixes for a rollout: which bundles, which scenarios, and how the report names it. */
export interface BenchmarkPlan {
  envs: string[];
  scenarios: string[];
  /** The benchmark's own step cap (the original's run_main max_steps_map); undefined: each scenario's max_steps. */
  maxSteps: number | undefined;
  /** True when its scenarios are conversations that need the simulated user to be comparable. */
  needsUser: boolean;
  benchmark: NonNullable<RunSettings["benchmark"]>;
  /** The benchmark's category of a scenario, when it reports accuracy per category (BFCL, ACEBench). */
  categoryOf?: (scenarioId: string) => string;
  /** Further official figures of an episode, read from its reward info, averaged per category (ACEBench's process accuracy). */
  metricsOf?: (rewardInfo: unknown) => Record<string, number | null>;
}

export interface BenchmarkArgs {
  from: string;
  domain: string[];
  split: string;
  /** The run folder; a benchmark may write its bundles under it. */
  out: string;
  /** bfcl: the Python interpreter with bfcl-eval (default $BFCL_PYTHON or python3). */
  python?: string;
}

export interface Benchmark {
  name: string;
  /** --from when it is not given. */
  defaultFrom?: string;
  describe: string;
  prepare(args: BenchmarkArgs): BenchmarkPlan;
}
