import { createHash } from "node:crypto";
import { existsSync, readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { importTaubench, type TaubenchDomain } from "../envs/taubench/import-taubench.js";
import { acebench, bfcl } from "./benchmark-bfcl-acebench.js";
import type { RunSettings } from "./summarize.js";

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

function sha256Files(paths: string[]): string {
  const h = createHash("sha256");
  for (const p of paths) h.update(readFileSync(p));
  return h.digest("hex").slice(0, 16);
}

const taubench: Benchmark = {
  name: "taubench",
  defaultFrom: "../shared/benchmarks/taubench",
  describe: "tau-bench retail (test: 115 tasks) and airline (test: 50 tasks), simulated user, all-or-nothing reward, pass^k",
  prepare({ from, domain, split, out }) {
    const domains = (domain.length ? domain : ["retail", "airline"]) as TaubenchDomain[];
    for (const d of domains) {
      const tasks = join(from, d, `tasks_${split}.json`);
      if (!existsSync(tasks)) throw new Error(`${tasks} does not exist: --from must be a tau-bench data folder (e.g. ../shared/benchmarks/taubench) with a ${split} split for ${d}`);
    }
    // bundles are written from the data each time, so the run always plays the data it names
    const bundles = join(out, "bundles");
    importTaubench(from, bundles, domains);
    const files = domains.flatMap((d) => [join(from, d, `tasks_${split}.json`), ...readdirSync(join(from, d, "data")).sort().map((f) => join(from, d, "data", f))]);
    return {
      envs: [bundles],
      scenarios: domains.map((d) => `${d}-${split}-*`),
      maxSteps: 30,
      needsUser: true,
      benchmark: {
        name: "taubench",
        split: domains.map((d) => `${d} ${split}`).join(", "),
        data_version: `tau-bench data (${domains.map((d) => `taubench-${d}-v1`).join(", ")}), tasks+db sha256 ${sha256Files(files)}`,
        protocol: "conversation with a simulated user; reward all-or-nothing (final database equals the ground truth's and every required output said); pass^k over trials",
      },
    };
  },
};

/** Benchmarks `envscaler eval` knows. */
export const BENCHMARKS: Record<string, Benchmark> = { taubench, bfcl, acebench };
