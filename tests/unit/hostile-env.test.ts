import { cpSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, test } from "vitest";
import { Episode } from "../../bridge/core/episode/episode.js";
import { loadBundle } from "../../envs/format/load-bundle.js";
import { fileSandboxHost, inlineBundle } from "../helpers.js";

/** This file's episodes' and sessions' sandboxes (disposed after its tests). */
const sandboxes = fileSandboxHost();

const bundle = loadBundle(join(import.meta.dirname, "..", "fixtures", "hostile", "hostile"));
// the memory and output bombs of hostile-v1 under a 60 s deadline: which limit stops a call is the
// one reached first, and on a loaded machine hostile-v1's 300 ms deadline came before 64 MB filled
const faults = loadBundle(join(import.meta.dirname, "..", "fixtures", "faults", "faults"));
/**
 * hostile-v1 itself under a 30 s deadline, for the tools whose outcome is a tool error the episode
 * survives (deep recursion, deep or cyclic JSON): on a loaded machine 300 ms was not always enough
 * to reach the limit that answers them.
 */
const patient = (() => {
  const dir = mkdtempSync(join(tmpdir(), "hostile-"));
  cpSync(join(import.meta.dirname, "..", "fixtures", "hostile", "hostile"), dir, { recursive: true });
  const manifest = JSON.parse(readFileSync(join(dir, "manifest.json"), "utf8")) as { limits: { call_timeout_ms: number } };
  manifest.limits.call_timeout_ms = 30_000;
  writeFileSync(join(dir, "manifest.json"), JSON.stringify(manifest));
  return loadBundle(dir);
})();
const open: Episode[] = [];

async function fresh(seed = 1, from = bundle): Promise<Episode> {
  const scenario = [...from.scenarios.values()][0]!;
  const e = new Episode({ sandboxes, bundle: from, scenario, seed, episodeId: `e${open.length}` });
  open.push(e);
  await e.reset();
  return e;
}
const call = (e: Episode, name: string) => e.step({ name, arguments: {} });

afterEach(() => {
  for (const e of open.splice(0)) e.close();
});

/** Every hostile case must leave the next episode fully working. */
async function nextEpisodeWorks(): Promise<void> {
  const e = await fresh();
  const r = await call(e, "ping");
  expect(r.observation.content).toBe('"pong"');
  expect(r.terminated).toBe(false);
}

describe("faults end only their own episode, with a typed error", () => {
  test("an infinite loop in a tool: env_timeout", async () => {
    const e = await fresh();
    const t0 = Date.now();
    const r = await call(e, "spin");
    expect(Date.now() - t0).toBeLessThan(5000);
    expect(r).toMatchObject({ terminated: true, reward: 0, info: { end_reason: "env_fault", error: { code: "env_timeout" } } });
    await expect(call(e, "ping")).rejects.toMatchObject({ code: "episode_done" });
    await nextEpisodeWorks();
  });

  test("a memory bomb: env_oom, stopped at the sandbox's own memory cap", async () => {
    const e = await fresh(1, faults);
    const r = await call(e, "bomb");
    expect(r.info.error?.code).toBe("env_oom");
    await nextEpisodeWorks();
  });

  test("output over the size limit: env_output_invalid", async () => {
    const e = await fresh(1, faults);
    const r = await call(e, "big_output");
    expect(r.info.error?.code).toBe("env_output_invalid");
    await nextEpisodeWorks();
  });
});

describe("neutralised: the agent sees an error and the episode goes on", () => {
  test.each(["recurse", "deep_json", "deep_parse", "cyclic"])("%s", async (tool) => {
    const e = await fresh(1, patient);
    const r = await call(e, tool);
    expect(r.terminated).toBe(false);
    expect(r.observation.tool_results![0]!.ok).toBe(false);
    expect(JSON.parse(r.observation.content).error.type).toBe("tool_exception");
    expect((await call(e, "ping")).observation.content).toBe('"pong"');
  });

  test("a native builtin driven over a huge array-like is refused instead of hanging", async () => {
    const e = await fresh();
    const t0 = Date.now();
    const r = await call(e, "array_like_hang");
    expect(Date.now() - t0).toBeLessThan(2000);
    expect(r.observation.content).toMatch(/over the sandbox limit/);
    expect(r.terminated).toBe(false);
  });
});

test("no host capabilities are reachable", async () => {
  const e = await fresh();
  const r = await call(e, "escape");
  expect(JSON.parse(r.observation.content)).toEqual({
    process: "undefined",
    require: "undefined",
    fetch: "undefined",
    setTimeout: "undefined",
    ctor: "undefined",
    globals: [],
    // no module loader is installed: import() only yields a promise, and the host never runs its jobs
    importIs: "promise",
  });
});

test("console exists in env and check realms and its methods do nothing: a log line neither fails a call nor reaches the host", async () => {
  const source = `class Logger {
  constructor(state) { this.box = state.box; console.log("init", state); }
  note() { console.log("a", { deep: [1, 2] }); console.warn("w"); console.error(new Error("e")); console.table([1]); console.group("g"); console.groupEnd(); this.box.n = (this.box.n || 0) + 1; return { n: this.box.n, kind: typeof console.log, keys: Object.keys(console).length }; }
}`;
  const b = inlineBundle("logger", "Logger", source, ["note"], { box: { n: 0 } });
  const scenario = { ...b.scenario("logger-1")!, checks: [{ kind: "js" as const, description: "logs", source: "({final}) => { console.log(final.box); console.error('x'); return final.box.n === 1; }" }] };
  const e = new Episode({ sandboxes, bundle: b, scenario, seed: 1, episodeId: "logger" });
  open.push(e);
  const writes: string[] = [];
  const out = process.stdout.write.bind(process.stdout);
  const err = process.stderr.write.bind(process.stderr);
  process.stdout.write = ((c: string) => (writes.push(String(c)), true));
  process.stderr.write = ((c: string) => (writes.push(String(c)), true));
  try {
    await e.reset();
    const r = await e.step({ name: "note", arguments: {} });
    // enumerable: false on the global, but its methods are plain own properties
    expect(JSON.parse(r.observation.content)).toEqual({ n: 1, kind: "function", keys: 18 });
    const end = await e.step("done");
    expect(end.info.reward_info!.checks.map((c) => [c.passed, c.error])).toEqual([[true, undefined]]);
  } finally {
    process.stdout.write = out;
    process.stderr.write = err;
  }
  expect(writes.filter((w) => /init|deep|\bw\b/.test(w))).toEqual([]);
});

test("an env that patches built-ins cannot fool the checks, which run in their own realm", async () => {
  const e = await fresh();
  await call(e, "patch_builtins");
  const r = await e.step("All done.");
  expect(r.reward).toBe(1);
  expect(r.info.reward_info!.checks.every((c) => c.passed)).toBe(true);
});

test("Math.random and Date are deterministic per seed, and the time zone is pinned", async () => {
  const runs = await Promise.all([1, 1, 2].map(async (seed) => JSON.parse((await call(await fresh(seed), "nondet")).observation.content)));
  expect(runs[0]).toEqual(runs[1]);
  expect(runs[0].r).not.toEqual(runs[2].r);
  expect(runs[0].tz).toBe(0);
  expect(runs[0].iso.startsWith("2025-01-01T09:00")).toBe(true);
  expect(runs[0].viaProto).toBeGreaterThan(runs[0].now); // the prototype's constructor is the virtual clock too
});

test("sandboxes made ahead of time (the warm pool) take this episode's seed and clock, and nothing from earlier ones", async () => {
  // 8 episodes in a row: some get pooled instances, some fresh ones, and one patches its builtins first
  const seen = new Map<number, string>();
  for (const seed of [7, 8, 7, 8, 7, 8, 7, 8]) {
    const e = await fresh(seed);
    if (seed === 8) await call(e, "patch_builtins"); // its own realm only
    const r = (await call(e, "nondet")).observation.content;
    if (seen.has(seed)) expect(r).toBe(seen.get(seed));
    else seen.set(seed, r);
    const pong = await call(e, "ping");
    expect(pong.observation.content).toBe('"pong"');
    e.close();
    await new Promise((resolve) => setImmediate(resolve)); // let the pool refill between episodes
  }
  expect(seen.get(7)).not.toBe(seen.get(8));
});
