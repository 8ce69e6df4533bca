// The leak check (tests/sandbox-leak-check.ts, a setup file of the whole suite) fails a file that
// leaks: proved on fixture files that leak on purpose, run in a vitest of their own (so the suite
// itself stays clean), each of which must fail with the leak named, and a clean control that passes.
import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { expect, test } from "vitest";

const ROOT = join(import.meta.dirname, "..", "..");

interface FileResult {
  name: string;
  status: string;
  message: string;
}

test("a file that leaves an episode open, a host undisposed, a global pool or a runtime unclosed fails; a clean one passes", async () => {
  const out = join(mkdtempSync(join(tmpdir(), "envscaler-leak-check-")), "report.json");
  const vitest = join(ROOT, "node_modules", "vitest", "vitest.mjs");
  // the fixtures fail on purpose, so vitest exits non-zero: the report is what is read
  await promisify(execFile)(process.execPath, [vitest, "run", "--config", "tests/fixtures/leak-check/vitest.leaky.config.ts", "--reporter=json", `--outputFile=${out}`], { cwd: ROOT, env: { ...process.env, CI: "1" } }).catch(() => undefined);
  const report = JSON.parse(readFileSync(out, "utf8")) as { testResults: FileResult[] };
  const byFile = Object.fromEntries(report.testResults.map((r) => [r.name.split("/").pop()!.replace(".leaky.ts", ""), r]));
  expect(Object.keys(byFile).sort()).toEqual(["clean", "episode-not-closed", "global-pool", "host-not-disposed", "runtime-not-closed"]);
  expect(byFile.clean!.status).toBe("passed");
  // the tests of every leaky file pass: only the leak check fails them
  for (const name of ["episode-not-closed", "global-pool", "host-not-disposed", "runtime-not-closed"]) {
    expect(byFile[name]!.status, name).toBe("failed");
    expect(byFile[name]!.message, name).toContain("QuickJS resources leaked by this test file");
  }
  expect(byFile["episode-not-closed"]!.message).toMatch(/disposed with sandboxes its owners never disposed: fileSandboxHost\(\) at \S+episode-not-closed\.leaky\.ts.*1 sandbox not disposed/);
  expect(byFile["global-pool"]!.message).toContain("2 QuickJS wasm instances are still held");
  expect(byFile["host-not-disposed"]!.message).toContain("a SandboxHost was never disposed (made at host-not-disposed.leaky.ts's module-level host)");
  expect(byFile["runtime-not-closed"]!.message).toContain("a SandboxHost was never disposed (made at EngineHost)");
}, 300_000);
