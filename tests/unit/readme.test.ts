import { execFile } from "node:child_process";
import { existsSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { expect, test } from "vitest";

const run = promisify(execFile);
const ROOT = join(import.meta.dirname, "..", "..");

test("the README's library example runs as written (package self-import of the build)", async () => {
  expect(existsSync(join(ROOT, "dist", "bridge", "core", "engine", "env-runtime.js")), "run `npm run build` first (npm test does)").toBe(true);
  const readme = readFileSync(join(ROOT, "README.md"), "utf8");
  const section = readme.slice(readme.indexOf("## Library use"));
  const code = /```ts\n([\s\S]*?)```/.exec(section)?.[1];
  expect(code).toContain('from "envscaler/');
  // inside the package, so that `envscaler/...` resolves through package.json's exports as it does for a dependent
  const file = join(ROOT, `.readme-example-${process.pid}.mjs`);
  writeFileSync(file, code!);
  try {
    const { stdout } = await run(process.execPath, [file], { cwd: ROOT, timeout: 60_000 });
    // "Task Completed" right away: the task is not done, so the reward is below 1 and the checks say why
    expect(stdout).toMatch(/^0(\.\d+)? \{/);
    expect(stdout).toContain("checks");
  } finally {
    rmSync(file, { force: true });
  }
}, 90_000);
