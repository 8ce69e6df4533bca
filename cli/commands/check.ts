import type { ArgumentsCamelCase, Argv, CommandModule } from "yargs";
import type { CheckReport } from "../../bridge/tools/check/check-bundle.js";
import { checkBundleIsolated } from "../../bridge/tools/check/check-isolated.js";
import { findBundleDirs } from "../../envs/format/load-bundle.js";

interface CheckArgs {
  paths: string[];
  quiet: boolean;
  probes: boolean;
}

export const checkCommand: CommandModule<object, CheckArgs> = {
  command: "check <paths..>",
  describe: "Validate env bundles: schema, sandbox load, tools, state schema, checks, reference solutions",
  builder: (y: Argv) =>
    y
      .positional("paths", { type: "string", array: true, demandOption: true, describe: "a bundle folder, or a folder of bundles" })
      .option("quiet", { type: "boolean", default: false, describe: "print only failing bundles" })
      .option("probes", { type: "boolean", default: true, describe: "probe each scenario for checks that can be gamed (up to 4 s a scenario; --no-probes skips them)" }),
  handler: async (args: ArgumentsCamelCase<CheckArgs>) => {
    let failed = 0;
    let total = 0;
    let badPaths = 0;
    for (const path of args.paths) {
      let dirs: string[];
      try {
        dirs = findBundleDirs(path);
      } catch (e) {
        console.error(`✗ ${path}\n    ${(e as Error).message}`);
        badPaths++;
        continue;
      }
      if (dirs.length === 0) {
        console.error(`✗ ${path}\n    no bundles here (a bundle is a folder with a manifest.json)`);
        badPaths++;
      }
      for (const dir of dirs) {
        total++;
        const report: CheckReport = await checkBundleIsolated(dir, { probes: args.probes });
        const ok = report.problems.length === 0;
        if (!ok) failed++;
        if (ok && args.quiet) continue;
        const mark = ok ? "✓" : "✗";
        console.log(`${mark} ${report.envId} (${report.tools} tools, ${report.scenarios} scenarios) ${report.dir}`);
        for (const p of report.problems) console.log(`    error: ${p}`);
        for (const w of report.warnings) console.log(`    warning: ${w}`);
        const probed = Object.entries(report.probes);
        if (probed.length) {
          const [bestId, best] = probed.reduce((a, b) => (b[1].randomBest > a[1].randomBest ? b : a));
          const droppable = probed.flatMap(([, p]) => p.droppable);
          const writes = droppable.filter((d) => d.wrote).length;
          console.log(
            `    probes: ${probed.length} scenarios; a random agent's best reward ${best.randomBest}` +
              `${best.randomBest > 0 ? ` (${bestId})` : ""}; reference actions that can be left out at 1.0: ${droppable.length - writes} reads, ${writes} writes`,
          );
        }
      }
    }
    console.log(`${total - failed}/${total} bundles passed${badPaths ? `; ${badPaths} path(s) held no bundle` : ""}`);
    process.exitCode = failed || badPaths ? 1 : 0;
  },
};
