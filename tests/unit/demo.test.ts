import { execFile } from "node:child_process";
import { cpSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { expect, test } from "vitest";
import { FIXTURES } from "../helpers.js";

const run = promisify(execFile);
const CLI = join(import.meta.dirname, "..", "..", "cli", "main.ts");

test("envscaler demo plays a reference episode over the wire: task, calls, observations, state changes, reward", async () => {
  const { stdout } = await run("npx", ["tsx", CLI, "demo", "--envs", FIXTURES, "--scenario", "notes-1"]);
  expect(stdout).toMatch(/^bridge at tcp:\/\/127\.0\.0\.1:\d+ \(protocol v2\)/);
  expect(stdout).toMatch(/TASK: Add a note titled 'todo'/);
  expect(stdout).toMatch(/→ add_note\(\{"user_id":"u2","title":"todo","body":"call mom"\}\)/);
  expect(stdout).toMatch(/Δ remove \/notes\/n1/);
  expect(stdout).toMatch(/reward 1 \(client\)|reward 1 \(text_reply\)/);
  expect(stdout).toMatch(/✓ Is n1 deleted\?/);
});

test("demo prints the final text reply it sends: the last step of a task episode is on screen before the reward", async () => {
  const { stdout } = await run(process.execPath, ["--import", "tsx", CLI, "demo"], { maxBuffer: 1 << 22 });
  const lines = stdout.split("\n");
  const reply = lines.findIndex((l) => l.startsWith("→ reply: "));
  const reward = lines.findIndex((l) => /^reward 1 \(text_reply\)$/.test(l));
  expect(reply, stdout).toBeGreaterThan(0);
  expect(lines[reply]!.length).toBeGreaterThan("→ reply: ".length + 3);
  // the env's answer to it, then the score
  expect(lines[reply + 1]).toBe("  Task finished");
  expect(reward).toBeGreaterThan(reply);
}, 60_000);

test("a failing command prints one line and exits 1; a path without bundles fails check", async () => {
  const fail = (args: string[]) => run(process.execPath, ["--import", "tsx", CLI, ...args]).then(
    () => { throw new Error(`envscaler ${args.join(" ")} succeeded`); },
    (e: { code: number; stdout: string; stderr: string }) => e,
  );
  const demo = await fail(["demo", "--envs", FIXTURES, "--scenario", "nope"]);
  expect(demo.code).toBe(1);
  expect(demo.stderr.trim()).toBe("envscaler: no scenario nope (`npx envscaler list` lists them all)");
  const check = await fail(["check", join(FIXTURES, "does-not-exist")]);
  expect(check.code).toBe(1);
  expect(check.stdout).toContain("0/0 bundles passed; 1 path(s) held no bundle");
  const usage = await fail(["no-such-command"]);
  expect(usage.code).toBe(1);
  expect(usage.stderr).toMatch(/Unknown argument: no-such-command/);
}, 60_000);

test("demo on a scenario without a reference solution (as imported BFCL/ACEBench tasks are) says so and what to do instead, instead of scoring 0", async () => {
  const dir = mkdtempSync(join(tmpdir(), "envscaler-demo-"));
  cpSync(join(FIXTURES, "notes"), join(dir, "notes"), { recursive: true });
  const file = join(dir, "notes", "scenarios.json");
  const scenarios = JSON.parse(readFileSync(file, "utf8")) as Record<string, unknown>[];
  for (const s of scenarios) { delete s.reference_actions; delete s.reference_messages; }
  writeFileSync(file, JSON.stringify(scenarios));
  const r = await run(process.execPath, ["--import", "tsx", CLI, "demo", "--envs", dir, "--scenario", "notes-1"]).then(
    () => { throw new Error("demo succeeded"); },
    (e: { code: number; stdout: string; stderr: string }) => e,
  );
  expect(r.code).toBe(1);
  expect(r.stdout).not.toMatch(/reward/);
  expect(r.stderr.trim()).toMatch(/^envscaler: scenario notes-1 has no reference solution to play .*envscaler\.launch\(envs=\[.*`npx envscaler ui --envs .*`npx envscaler eval`/);
}, 60_000);
