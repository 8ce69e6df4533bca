import { execFile } from "node:child_process";
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
