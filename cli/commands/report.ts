import { existsSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { basename, dirname, join, relative, resolve } from "node:path";
import type { ArgumentsCamelCase, Argv, CommandModule } from "yargs";
import { comparePage } from "../../agent/compare-page.js";
import { reportPage, type CategoryAccuracy } from "../../agent/report-page.js";
import type { RolloutResults } from "../../agent/summarize.js";

interface ReportArgs {
  runs: string[];
  out?: string;
}

/** A run folder (or its results.json) as rollout/eval wrote it. */
function readRun(path: string): { dir: string; results: RolloutResults } {
  const file = existsSync(path) && statSync(path).isDirectory() ? join(path, "results.json") : path;
  if (!existsSync(file)) throw new Error(`${path}: no results.json (give a run folder that \`envscaler rollout --out\` or \`envscaler eval --out\` wrote, or its results.json)`);
  let results: RolloutResults;
  try {
    results = JSON.parse(readFileSync(file, "utf8")) as RolloutResults;
  } catch (e) {
    throw new Error(`${file}: not JSON: ${(e as Error).message}`, { cause: e });
  }
  if (results.format !== "envscaler.rollout-results/v1") throw new Error(`${file}: not a rollout results file (format ${JSON.stringify(results.format)}, expected envscaler.rollout-results/v1)`);
  return { dir: dirname(resolve(file)), results };
}

export const reportCommand: CommandModule<object, ReportArgs> = {
  command: "report <runs..>",
  describe: "The report page of a rollout/eval run folder again, or two or more runs compared on one page (charts, totals, per env, settings that differ)",
  builder: (y: Argv) =>
    y
      .positional("runs", { type: "string", array: true, demandOption: true, describe: "run folders (or their results.json); the first is A, the baseline the others are compared with" })
      .option("out", { alias: "o", type: "string", describe: "the page to write (default: RUN/report.html for one run, compare.html for several)" }),
  handler: (args: ArgumentsCamelCase<ReportArgs>) => {
    const runs = args.runs.map(readRun);
    if (runs.length === 1) {
      const { dir, results } = runs[0]!;
      const out = resolve(args.out ?? join(dir, "report.html"));
      // an eval's official per-category figures, when the run has them
      const cats = join(dir, "categories.json");
      const categories = existsSync(cats) ? (JSON.parse(readFileSync(cats, "utf8")) as { categories: CategoryAccuracy }).categories : undefined;
      writeFileSync(out, reportPage(results, categories));
      console.log(`report → ${out}`);
      return;
    }
    const out = resolve(args.out ?? "compare.html");
    // each run named by its folder; the same folder name twice gets its parent too
    const names = runs.map((r) => basename(r.dir));
    const label = (i: number) => (names.filter((n) => n === names[i]).length > 1 ? relative(process.cwd(), runs[i]!.dir) || names[i]! : names[i]!);
    const page = comparePage(
      runs.map((r, i) => ({
        label: label(i),
        results: r.results,
        ...(existsSync(join(r.dir, "report.html")) ? { report: relative(dirname(out), join(r.dir, "report.html")) } : {}),
      })),
    );
    writeFileSync(out, page);
    console.log(`comparison of ${runs.length} runs → ${out}`);
  },
};
