import { execFile } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { expect, test } from "vitest";
import { EnvRuntime } from "../../bridge/core/engine/env-runtime.js";
import { TrajectoryWriter } from "../../bridge/tools/record/trajectory-writer.js";
import { closeMatches } from "../../cli/commands/close-matches.js";
import { listing } from "../../cli/commands/list.js";
import { BUNDLED_ENVS } from "../../envs/bundled.js";
import { FIXTURES } from "../helpers.js";

const run = promisify(execFile);
const cli = join(import.meta.dirname, "..", "..", "cli", "main.ts");
/** Runs the CLI; resolves with its exit code and output whether it failed or not. */
const envscaler = (...args: string[]) =>
  run(process.execPath, ["--import", "tsx", cli, ...args]).then(
    (r) => ({ code: 0, stdout: r.stdout, stderr: r.stderr }),
    (e: { code: number; stdout: string; stderr: string }) => ({ code: e.code, stdout: e.stdout, stderr: e.stderr }),
  );

test("close matches: the same family first, then by edit distance", () => {
  const ids = ["library-1", "library-2", "library-10", "bank-1", "hotel-1", "libary-3"];
  expect(closeMatches("library-99", ids)).toEqual(["library-1", "library-2", "library-10", "libary-3"]);
  expect(closeMatches("hotl-1", ids)).toEqual(["hotel-1"]);
  expect(closeMatches("zzzzzz", ids)).toEqual([]);
});

test("list: envs and their scenarios from bundle folders; an unknown --env names the known ones", () => {
  const { envs } = listing({ what: "all", envs: [FIXTURES] });
  expect(envs.map((e) => e.env_id)).toEqual(["notes-v1"]);
  expect(envs[0]!.scenarios.map((s) => [s.scenario_id, s.mode])).toEqual([
    ["notes-1", "task"],
    ["notes-2", "conversation"],
  ]);
  expect(() => listing({ what: "all", envs: [FIXTURES], env: "nope-v1" })).toThrow(/no env nope-v1; the envs are: notes-v1/);
  expect(listing({ what: "envs", envs: [BUNDLED_ENVS] }).envs.map((e) => e.env_id)).toContain("library-v1");
});

test("the CLI: list prints envs and scenarios; a mistyped scenario lists close matches; view/export of a missing file or episode is one line, no stack", async () => {
  const list = await envscaler("list", "--envs", FIXTURES);
  expect(list.code).toBe(0);
  expect(list.stdout).toMatch(/^notes-v1 {2}Notes \(test fixture\) \(6 tools, 2 scenarios\)\n {2}notes-1 +task +Add a note/);
  const envsOnly = await envscaler("list", "envs", "--json");
  expect(JSON.parse(envsOnly.stdout).map((e: { env_id: string }) => e.env_id)).toContain("library-v1");

  const demo = await envscaler("demo", "--scenario", "library-99");
  expect(demo.code).toBe(1);
  expect(demo.stderr.trim()).toBe("envscaler: no scenario library-99; did you mean library-1, library-2, library-3, library-4, library-5? (`npx envscaler list` lists them all)");

  const dir = mkdtempSync(join(tmpdir(), "envscaler-cli-"));
  for (const args of [
    ["view", join(dir, "missing.jsonl"), "-o", join(dir, "x.html")],
    ["export", "sft", join(dir, "missing.jsonl"), "-o", join(dir, "x.jsonl")],
  ]) {
    const r = await envscaler(...args);
    expect(r.code).toBe(2); // unreadable input (1 is "an episode diverged")
    expect(r.stderr.trim()).toBe(`envscaler: no file ${join(dir, "missing.jsonl")} (serve records episodes to --record-dir, default ./trajectories)`);
  }
  const empty = join(dir, "empty.jsonl");
  writeFileSync(empty, "");
  const noEpisode = await envscaler("view", empty, "--episode", "abc", "-o", join(dir, "x.html"));
  // an empty file is not a trajectory file at all: refused with one line, before any episode lookup
  expect(noEpisode.stderr.trim()).toBe(`envscaler: ${empty} is empty: it holds no trajectory records`);
  expect(noEpisode.stderr).not.toMatch(/\n\s+at /);
}, 180_000);

test("the CLI: import and list failures are one `envscaler:` line with exit 1, no Node stack or Python traceback; categories are per benchmark", async () => {
  const dir = mkdtempSync(join(tmpdir(), "envscaler-cli-"));
  // an interpreter without bfcl-eval, as a fresh machine has: a traceback on stderr, exit 1
  const python = join(dir, "python");
  writeFileSync(python, `#!/bin/sh\necho 'Traceback (most recent call last):' >&2\necho '  File "<string>", line 1, in <module>' >&2\necho "ModuleNotFoundError: No module named 'bfcl_eval'" >&2\nexit 1\n`, { mode: 0o755 });
  const out = join(dir, "out");
  const cases: [string[], RegExp][] = [
    [["import", "bfcl", "--python", python, "--out", out], /^envscaler: bfcl-eval is not importable with \S+python \(ModuleNotFoundError: No module named 'bfcl_eval'\): install it .*--python or \$BFCL_PYTHON/],
    [["import", "acebench", "--from", join(dir, "nope"), "--out", out], /^envscaler: \S+nope is not an ACEBench agent data folder/],
    [["import", "bfcl", "--category", "multi_step", "--from", join(dir, "nope"), "--out", out], /^envscaler: multi_step is not a category of BFCL; its categories are: base, miss_func, miss_param, long_context$/],
    [["import", "acebench", "--category", "base", "--out", out], /^envscaler: base is not a category of ACEBench; its categories are: multi_step, multi_turn$/],
    // eval bfcl takes the same --python as import bfcl (it was "Unknown argument: python" under the whole help)
    [["eval", "bfcl", "--python", python, "--out", join(dir, "run"), "--model", "m", "--base-url", "http://127.0.0.1:9/v1"], /^envscaler: bfcl-eval is not importable with \S+python \(ModuleNotFoundError/],
    // BFCL has one test set: --split train is refused, not silently ignored
    [["eval", "bfcl", "--split", "train", "--python", python, "--out", join(dir, "run"), "--model", "m", "--base-url", "http://127.0.0.1:9/v1"], /^envscaler: BFCL multi-turn has no train split/],
    [["list", "--env", "nope"], /^envscaler: no env nope; the envs are: .*library-v1/],
    [["list", "--envs", join(dir, "missing")], /^envscaler: \S+missing: not a directory$/],
  ];
  for (const [args, message] of cases) {
    const r = await envscaler(...args);
    expect(r.code, args.join(" ")).toBe(1);
    expect(r.stderr.trim(), args.join(" ")).toMatch(message);
    expect(r.stderr.trim().split("\n"), args.join(" ")).toHaveLength(1);
  }
}, 300_000);

test("the CLI: view of an episode a real trajectory file does not hold, and export to a folder that does not exist, are one line with exit 1, no stack", async () => {
  const dir = mkdtempSync(join(tmpdir(), "envscaler-cli-"));
  const file = join(dir, "t.jsonl");
  const writer = new TrajectoryWriter(file);
  const rt = await EnvRuntime.start({ envs: [FIXTURES], recorder: writer });
  try {
    const r = await rt.reset("notes-1", 1, "ep-recorded");
    await rt.finish(r.episode_id);
  } finally {
    await rt.close();
    writer.close();
  }
  const view = await envscaler("view", file, "--episode", "ep-recordd", "-o", join(dir, "x.html"));
  expect(view.code).toBe(1);
  expect(view.stderr.trim()).toBe(`envscaler: no episode ep-recordd in ${file}; did you mean ep-recorded?`);
  const exp = await envscaler("export", "sft", file, "-o", join(dir, "no-such-folder", "x.jsonl"));
  expect(exp.code).toBe(1);
  expect(exp.stderr.trim()).toMatch(/^envscaler: ENOENT: no such file or directory, open '.*no-such-folder\/x\.jsonl'$/);
  // and the file itself is readable: the same commands with a good episode and output succeed
  expect((await envscaler("view", file, "--episode", "ep-recorded", "-o", join(dir, "x.html"))).code).toBe(0);
}, 180_000);
