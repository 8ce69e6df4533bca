import { createHash } from "node:crypto";
import { existsSync, readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { importTaubench, type TaubenchDomain } from "../envs/taubench/import-taubench.js";
import { acebench, bfcl } from "./benchmark-bfcl-acebench.js";
import type { Benchmark } from "./benchmark.js";

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
