import { existsSync } from "node:fs";
import { join } from "node:path";
import { ACEBENCH_CATEGORIES, ACEBENCH_COMMIT, acebenchDataHash, importAcebench, processAccuracyOf } from "../envs/acebench/import-acebench.js";
import { BFCL_CATEGORIES, BFCL_EVAL_VERSION, bfclDataHashes, findBfclPackage, importBfcl } from "../envs/bfcl/import-bfcl.js";
import type { Benchmark } from "./benchmark.js";

function pick<T extends string>(all: readonly T[], asked: string[], what: string): T[] {
  const bad = asked.filter((c) => !(all as readonly string[]).includes(c));
  if (bad.length) throw new Error(`unknown ${what} ${bad.join(", ")}: choose from ${all.join(", ")}`);
  return (asked.length ? asked : all) as T[];
}

/** The category of a BFCL scenario id (multi_turn_miss_func_12 → miss_func). */
export const bfclCategoryOf = (scenarioId: string) => /^multi_turn_(.+)_\d+$/.exec(scenarioId)?.[1] ?? "other";

/**
 * BFCL v3 multi-turn from the installed bfcl-eval (--from: its bfcl_eval folder; default: found
 * with $BFCL_PYTHON or python3). Categories come from --domain (base, miss_func, miss_param,
 * long_context); the official per-category accuracy is the share of tasks that pass every turn.
 */
export const bfcl: Benchmark = {
  name: "bfcl",
  describe: "BFCL v3 multi-turn (base, miss_func, miss_param, long_context: 200 tasks each), official checker per turn, accuracy per category",
  prepare({ from, domain, split, out, python }) {
    if (split !== "test") throw new Error(`BFCL multi-turn has no ${split} split: its tasks are one test set (leave --split out)`);
    const cats = pick(BFCL_CATEGORIES, domain, "BFCL category");
    const pkg = from || findBfclPackage(python);
    const bundles = join(out, "bundles");
    importBfcl(pkg, bundles, cats, python);
    const hashes = bfclDataHashes(pkg);
    return {
      envs: [bundles],
      scenarios: cats.map((c) => `multi_turn_${c}_*`),
      // each scenario carries BFCL's own cap: 20 steps per turn (past it the task is force-terminated)
      maxSteps: undefined,
      needsUser: false,
      categoryOf: bfclCategoryOf,
      benchmark: {
        name: "bfcl",
        split: cats.join(", "),
        data_version: `bfcl-eval ${BFCL_EVAL_VERSION}, data sha256 ${cats.map((c) => `${c} ${hashes[`question/${c}`]}/${hashes[`possible_answer/${c}`]}`).join(", ")}`,
        protocol: "BFCL's multi-turn inference loop (user turns; a reply without tool calls ends the turn; 20 steps per turn); official checker: state and ground-truth outputs at every turn, all or nothing",
      },
    };
  },
};

/** The category of an ACEBench scenario id (agent_multi_step_3 → multi_step). */
export const acebenchCategoryOf = (scenarioId: string) => /^agent_(multi_(?:step|turn))_\d+$/.exec(scenarioId)?.[1] ?? "other";

/**
 * ACEBench-Agent, English (--from: the ACEBench folder, default ../shared/benchmarks/acebench):
 * 20 multi-step tasks and 30 multi-turn conversations with a simulated user following ACEBench's
 * user prompt; the reward is the official end-to-end state check.
 */
export const acebench: Benchmark = {
  name: "acebench",
  defaultFrom: "../shared/benchmarks/acebench",
  describe: "ACEBench-Agent English (multi_step: 20 tasks, multi_turn: 30 conversations with a simulated user), end-to-end state accuracy per category",
  prepare({ from, domain, split, out }) {
    if (split !== "test") throw new Error(`ACEBench-Agent has no ${split} split: its tasks are one test set (leave --split out)`);
    const cats = pick(ACEBENCH_CATEGORIES, domain, "ACEBench category");
    if (!existsSync(join(from, "data", "data_agent_multi_step.json"))) throw new Error(`${from} is not an ACEBench agent folder: pass --from (e.g. ../shared/benchmarks/acebench)`);
    const bundles = join(out, "bundles");
    importAcebench(from, bundles, cats);
    return {
      envs: [bundles],
      scenarios: cats.map((c) => `agent_${c}_*`),
      maxSteps: undefined,
      needsUser: cats.includes("multi_turn"),
      categoryOf: acebenchCategoryOf,
      metricsOf: (info) => ({ process_accuracy: processAccuracyOf(info) }),
      benchmark: {
        name: "acebench",
        split: cats.join(", "),
        data_version: `ACEBench ${ACEBENCH_COMMIT.slice(0, 7)} (English agent data), data sha256 ${acebenchDataHash(from)}`,
        protocol: "multi_step: the question, then the agent until a reply containing \"finish conversation\" (a text reply without it is answered with ACEBench's continue prompt); multi_turn: a simulated user with ACEBench's user prompt; reward: ACEBench's end-to-end check of the saved class attributes (all or nothing)",
      },
    };
  },
};
