import type { ArgumentsCamelCase, Argv, CommandModule } from "yargs";
import { BFCL_CATEGORIES, BFCL_EVAL_VERSION, bfclDataHashes, findBfclPackage, importBfcl } from "../../envs/bfcl/import-bfcl.js";
import { importTaubench, type TaubenchDomain } from "../../envs/taubench/import-taubench.js";
import { ACEBENCH_CATEGORIES, ACEBENCH_COMMIT, acebenchDataHash, importAcebench } from "../../envs/acebench/import-acebench.js";

/** The asked categories, all of this benchmark's own (the --category choices are the union of both benchmarks'). */
export function categoriesOf<T extends string>(benchmark: string, all: readonly T[], asked: readonly string[] | undefined): T[] {
  if (!asked?.length) return [...all];
  const foreign = asked.filter((c) => !(all as readonly string[]).includes(c));
  if (foreign.length) throw new Error(`${foreign.join(", ")} ${foreign.length > 1 ? "are not categories" : "is not a category"} of ${benchmark}; its categories are: ${all.join(", ")}`);
  return [...new Set(asked)] as T[];
}

interface ImportArgs {
  source: "taubench" | "bfcl" | "acebench";
  from?: string;
  out: string;
  domain?: TaubenchDomain[];
  category?: string[];
  python?: string;
}

export const importCommand: CommandModule<object, ImportArgs> = {
  command: "import <source>",
  describe: "Write env bundles for an existing benchmark: tau-bench (retail, airline) from its data folder, BFCL v3 multi-turn from the installed bfcl-eval, or ACEBench-Agent from its folder",
  builder: (y: Argv) =>
    y
      .positional("source", { choices: ["taubench", "bfcl", "acebench"] as const, demandOption: true })
      .option("from", { type: "string", describe: "the benchmark's data folder (tau-bench: e.g. ../shared/benchmarks/taubench; acebench: default ../shared/benchmarks/acebench; bfcl: the bfcl_eval package folder, found with --python when omitted)" })
      .option("out", { type: "string", demandOption: true, describe: "where to write the bundles" })
      .option("domain", { choices: ["retail", "airline"] as const, array: true, describe: "tau-bench: only these domains" })
      .option("category", { choices: [...BFCL_CATEGORIES, ...ACEBENCH_CATEGORIES], array: true, describe: "bfcl, acebench: only these categories" })
      .option("python", { type: "string", describe: "bfcl: the Python interpreter that has bfcl-eval installed (default: $BFCL_PYTHON or python3)" }),
  // async: a throw becomes a rejection that main's fail handler prints as one line (a sync throw escapes as a stack trace)
  // eslint-disable-next-line @typescript-eslint/require-await
  handler: async (args: ArgumentsCamelCase<ImportArgs>) => {
    if (args.source === "acebench") {
      const from = args.from ?? "../shared/benchmarks/acebench";
      const cats = categoriesOf("ACEBench", ACEBENCH_CATEGORIES, args.category);
      const written = importAcebench(from, args.out, cats, args.python);
      console.log(`ACEBench ${ACEBENCH_COMMIT.slice(0, 7)} at ${from}; data sha256 ${acebenchDataHash(from)}`);
      for (const w of written) console.log(`${w.envId}: ${w.scenarios} scenarios → ${w.dir}`);
      return;
    }
    if (args.source === "bfcl") {
      const cats = categoriesOf("BFCL", BFCL_CATEGORIES, args.category);
      const pkg = args.from ?? findBfclPackage(args.python);
      const written = importBfcl(pkg, args.out, cats, args.python);
      console.log(`bfcl-eval ${BFCL_EVAL_VERSION} (pinned) at ${pkg}; data sha256: ${JSON.stringify(bfclDataHashes(pkg, cats))}`);
      console.log(`${written.length} bundles, ${written.reduce((n, w) => n + w.scenarios, 0)} scenarios → ${args.out}`);
      return;
    }
    if (!args.from) throw new Error("--from is required for taubench");
    for (const w of importTaubench(args.from, args.out, args.domain)) console.log(`${w.envId}: ${w.scenarios} scenarios → ${w.dir}`);
  },
};
