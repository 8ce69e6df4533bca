import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";

/**
 * A fresh copy of a built env in `dir` holding only `scenarios`, for playing candidate scenarios
 * without touching the bundle's own scenarios.json (which the scenario stage is replacing). The
 * caller removes `dir` when done.
 */
export function stageBundle(bundleDir: string, dir: string, scenarios: readonly unknown[]): void {
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  for (const f of ["manifest.json", "env.js"]) writeFileSync(join(dir, f), readFileSync(join(bundleDir, f)));
  writeFileSync(join(dir, "scenarios.json"), JSON.stringify(scenarios));
}
