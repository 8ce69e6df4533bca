import type { ArgumentsCamelCase, Argv, CommandModule } from "yargs";
import { BFCL_CATEGORIES, BFCL_EVAL_VERSION, bfclDataHashes, findBfclPackage, importBfcl, type BfclCategory } from "../../envs/bfcl/import-bfcl.js";
import { importTaubench, type TaubenchDomain } from "../../envs/taubench/import-taubench.js";

interface ImportArgs {
  source: "taubench" | "bfcl";
  from?: string;
  out: string;
  domain?: TaubenchDomain[];
  category?: BfclCategory[];
  python?: string;
}

export const importCommand: CommandModule<object, ImportArgs> = {
  command: "import <source>",
  describe: "Write env bundles for an existing benchmark: tau-bench (retail, airline) from its data folder, or BFCL v3 multi-turn from the installed bfcl-eval",
  builder: (y: Argv) =>
    y
      .positional("source", { choices: ["taubench", "bfcl"] as const, demandOption: true })
      .option("from", { type: "string", describe: "the benchmark's data folder (tau-bench: e.g. ../shared/benchmarks/taubench; bfcl: the bfcl_eval package folder, found with --python when omitted)" })
      .option("out", { type: "string", demandOption: true, describe: "where to write the bundles" })
      .option("domain", { choices: ["retail", "airline"] as const, array: true, describe: "tau-bench: only these domains" })
      .option("category", { choices: BFCL_CATEGORIES, array: true, describe: "bfcl: only these categories" })
      .option("python", { type: "string", describe: "bfcl: the Python interpreter that has bfcl-eval installed (default: $BFCL_PYTHON or python3)" }),
  handler: (args: ArgumentsCamelCase<ImportArgs>) => {
    if (args.source === "bfcl") {
      const pkg = args.from ?? findBfclPackage(args.python);
      const written = importBfcl(pkg, args.out, args.category ?? BFCL_CATEGORIES, args.python);
      console.log(`bfcl-eval ${BFCL_EVAL_VERSION} (pinned) at ${pkg}; data sha256: ${JSON.stringify(bfclDataHashes(pkg))}`);
      console.log(`${written.length} bundles, ${written.reduce((n, w) => n + w.scenarios, 0)} scenarios → ${args.out}`);
      return;
    }
    if (!args.from) throw new Error("--from is required for taubench");
    for (const w of importTaubench(args.from, args.out, args.domain)) console.log(`${w.envId}: ${w.scenarios} scenarios → ${w.dir}`);
  },
};
