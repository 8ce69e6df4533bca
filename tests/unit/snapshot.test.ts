// Sandbox images, recycled instances, snapshots and forks: an episode restored from an image is
// indistinguishable from one built from scratch, nothing of an earlier episode is visible in a
// later one, and a fork given the same actions gives the same observations, rewards and hashes.
import { join } from "node:path";
import { afterAll, describe, expect, test } from "vitest";
import { EnvRuntime } from "../../bridge/core/engine/env-runtime.js";
import { Episode, type StepResult } from "../../bridge/core/episode/episode.js";
import { postInitImages } from "../../bridge/core/episode/env-session.js";
import { CHECK_LIMITS, runJsCheck, runJsChecks } from "../../bridge/core/episode/checker.js";
import { StateBase } from "../../bridge/core/state/state-base.js";
import { EnvManifest } from "../../envs/format/bundle-schema.js";
import { EnvBundle } from "../../envs/format/load-bundle.js";
import { EnvRegistry } from "../../envs/format/registry.js";
import { fileSandboxHost } from "../helpers.js";

/** This file's episodes' and sessions' sandboxes (disposed after its tests). */
const sandboxes = fileSandboxHost();

const ENVS = join(import.meta.dirname, "..", "..", "envs");

// An env whose tools leave every kind of trace a guest can leave in its realm.
const POLLUTER = `
var counter = 0;
class Polluter {
  constructor(state) { this.items = state.items; this.log = state.log; }
  pollute() {
    globalThis.leaked = "secret";
    counter += 1000;
    Array.prototype.push = function () { return -1; };
    Object.prototype.toJSON = undefined;
    JSON.parse = () => ({ hijacked: true });
    for (let i = 0; i < 50; i++) Math.random();
    for (let i = 0; i < 50; i++) Date.now();
    this.items.a.n += 1;
    return true;
  }
  probe() {
    const arr = [];
    return { leaked: typeof globalThis.leaked, counter, push: arr.push(1), parse: typeof JSON.parse("1"), r: Math.random(), t: Date.now(), n: this.items.a.n };
  }
  add({ id }) { const row = { n: 0, tags: [] }; this.items[id] = row; row.tags.push("new"); this.log.push(id); return Object.keys(this.items).length; }
  bump({ id }) { this.items[id].n += 1; this.log.push("bump " + id); return this.items[id].n; }
}`;

function polluterBundle(hash = "polluter-hash"): EnvBundle {
  const names = ["pollute", "probe", "add", "bump"];
  const tools = names.map((name) => ({ type: "function" as const, function: { name, description: name, parameters: { type: "object" as const, properties: {}, additionalProperties: true } } }));
  const state = { items: { a: { n: 1, tags: [] } }, log: [] };
  const manifest = EnvManifest.parse({ format: "envscaler.env/v1", id: "polluter-v1", name: "polluter", introduction: "x", class_name: "Polluter", tools, default_state: state });
  const scenarios = new Map([["p-1", { id: "p-1", env_id: "polluter-v1", mode: "task" as const, task: "t", checks: [], max_steps: 500 }]]);
  return new EnvBundle("/virtual/polluter", manifest, POLLUTER, state, scenarios as never, hash);
}

const content = (r: StepResult) => r.observation.content;
/** The bytes of an episode's sandbox memory (reaches into private fields: a test-only view). */
const wasmBytes = (e: Episode): Buffer => Buffer.from((e as unknown as { session: { sandbox: { machine: { memory: WebAssembly.Memory } } } }).session.sandbox.machine.memory.buffer);

describe("images and recycled instances", () => {
  const bundle = polluterBundle();
  const open = async (seed: number) => {
    const e = new Episode({ sandboxes, bundle, scenario: bundle.scenario("p-1")!, seed, episodeId: `e${seed}` });
    await e.reset();
    return e;
  };

  test("nothing an episode did to its realm is visible in the next one, which starts exactly as a fresh one", async () => {
    const first = await open(7);
    const fresh = content(await first.step({ name: "probe", arguments: {} }));
    first.close();
    // pollute, then close: its instance goes back to the pool healthy
    for (let i = 0; i < 3; i++) {
      const dirty = await open(7);
      await dirty.step({ name: "pollute", arguments: {} });
      expect(JSON.parse(content(await dirty.step({ name: "probe", arguments: {} })))).toMatchObject({ leaked: "string", counter: 1000, push: -1 });
      dirty.close();
    }
    expect(sandboxes.stats().recycled).toBeGreaterThan(0);
    const next = await open(7);
    expect(content(await next.step({ name: "probe", arguments: {} }))).toBe(fresh);
    expect(JSON.parse(fresh)).toMatchObject({ leaked: "undefined", counter: 0, push: 1, parse: "number", n: 1 });
    // another seed gives another random stream from the same image
    const other = await open(8);
    expect(JSON.parse(content(await other.step({ name: "probe", arguments: {} }))).r).not.toBe(JSON.parse(fresh).r);
    next.close();
    other.close();
  });

  test("a check's sandbox sees nothing of an earlier check's pollution", async () => {
    const base = StateBase.fromState({ k: 1 });
    const { StateView } = await import("../../bridge/core/state/state-base.js");
    const inputs = { initial: new StateView(base), final: new StateView(base), actions: [], messages: [] };
    const seed: [number, number, number, number] = [1, 2, 3, 4];
    const polluter = "() => { globalThis.leak = 1; Array.prototype.includes = () => true; return true; }";
    const probe = "() => typeof globalThis.leak === 'undefined' && [1].includes(2) === false";
    for (let i = 0; i < 3; i++) expect(await runJsCheck(sandboxes, polluter, inputs, seed)).toEqual({ passed: true });
    expect(await runJsCheck(sandboxes, probe, inputs, seed)).toEqual({ passed: true });
    // each check gets its own action and message lists: one that reverses them leaves the next check's in order
    const withActions = { ...inputs, actions: [{ name: "a", arguments: {} }, { name: "b", arguments: {} }], messages: ["one", "two"] };
    const reverser = "({ actions, messages }) => actions.reverse()[0].name === 'b' && messages.reverse()[0] === 'two'";
    const inOrder = "({ actions, messages }) => actions[0].name === 'a' && messages[0] === 'one'";
    expect(await runJsChecks(sandboxes, [reverser, inOrder, reverser], withActions, seed)).toEqual([{ passed: true }, { passed: true }, { passed: true }]);
    // the checks of one scoring share a realm: a polluter before the probe changes nothing either
    expect(await runJsChecks(sandboxes, [polluter, probe, probe], inputs, seed)).toEqual([{ passed: true }, { passed: true }, { passed: true }]);
  });

  test("each check of a scoring starts from a fresh realm's seed and clock, and a faulting check fails alone", async () => {
    const base = StateBase.fromState({ k: 1 });
    const { StateView } = await import("../../bridge/core/state/state-base.js");
    const inputs = { initial: new StateView(base), final: new StateView(base), actions: [], messages: [] };
    const seed: [number, number, number, number] = [1, 2, 3, 4];
    // a check's error text shows the draw and the time it saw; an earlier check that drew and read the clock changes neither
    const first = "() => Math.random() < 2 && Date.now() > 0";
    const r0 = await runJsChecks(sandboxes, ["() => { throw new Error(String(Math.random()) + ' ' + Date.now()); }"], inputs, seed);
    const r1 = await runJsChecks(sandboxes, [first, "() => { throw new Error(String(Math.random()) + ' ' + Date.now()); }"], inputs, seed);
    expect(r1[1]).toEqual(r0[0]); // the same draw and time as in a realm of its own
    const spin = "() => { for (;;) {} }";
    const fault = await runJsChecks(sandboxes, [spin, "() => true"], inputs, seed, { ...CHECK_LIMITS, callTimeoutMs: 50 });
    expect(fault[0]).toMatchObject({ passed: false, error: expect.stringMatching(/timeout|deadline/i) });
    expect(fault[1]).toEqual({ passed: true });
  });

  test("a step costs what it writes: records created earlier are not reported again", async () => {
    const e = await open(1);
    for (let i = 0; i < 30; i++) await e.step({ name: "add", arguments: { id: `r${i}` } });
    const r = await e.step({ name: "bump", arguments: { id: "r3" } });
    // only r3 and the log changed, although 30 records were created by earlier calls
    expect(r.info.diff.map((d) => d.path)).toEqual(["/items/r3/n", "/log/30"]);
    const state = JSON.parse(e.stateJson());
    expect(state.items.r0).toEqual({ n: 0, tags: ["new"] });
    expect(state.log).toHaveLength(31);
    expect(r.info.state_hash).toBe(StateBase.fromState(state).hash().hex());
    e.close();
  });
});

describe("snapshots and forks", () => {
  const bundle = polluterBundle();

  test("a fork continues exactly; a snapshot restores any number of times; the source is untouched", async () => {
    const a = new Episode({ sandboxes, bundle, scenario: bundle.scenario("p-1")!, seed: 3, episodeId: "a" });
    await a.reset();
    await a.step({ name: "add", arguments: { id: "x" } });
    await a.step({ name: "probe", arguments: {} }); // advances RNG and clock
    const snap = a.snapshot();
    const b = await a.fork("b");
    expect(b.stepCount).toBe(2);
    const next = [{ name: "bump", arguments: { id: "x" } }, { name: "probe", arguments: {} }];
    const run = async (e: Episode) => {
      const out: string[] = [];
      for (const act of next) {
        const r = await e.step(act);
        out.push(content(r), r.info.state_hash, String(r.info.step));
      }
      return out;
    };
    const fromA = await run(a);
    expect(await run(b)).toEqual(fromA);
    for (const id of ["c", "d"]) {
      const c = await Episode.fromSnapshot({ sandboxes, bundle, scenario: bundle.scenario("p-1")!, episodeId: id }, snap);
      expect(await run(c)).toEqual(fromA);
      c.close();
    }
    // the source went on independently: a fork's writes never reach it
    await b.step({ name: "bump", arguments: { id: "a" } });
    expect(JSON.parse(a.stateJson()).items.a.n).toBe(1);
    a.close();
    b.close();
  });
});

describe("fork determinism on every bundled reference solution", () => {
  const registry = EnvRegistry.load([ENVS]);
  const cases = registry.list().flatMap((b) => [...b.scenarios.values()].filter((s) => (s.reference_actions?.length ?? 0) > 0).map((s) => ({ bundle: b, scenario: s })));

  test.each(cases.map((c) => [c.scenario.id, c] as const))("%s, forked at every step", async (_id, { bundle, scenario }) => {
    const actions = scenario.reference_actions!;
    const trace = async (e: Episode, from: number): Promise<string[]> => {
      const out: string[] = [];
      for (const act of actions.slice(from)) {
        if (e.isDone) break;
        const r = await e.step(act);
        out.push(`${content(r)}|${r.reward}|${r.terminated}|${r.info.state_hash}`);
      }
      if (!e.isDone) {
        const f = await e.finish();
        out.push(`finish|${f.reward}|${f.info.state_hash}|${JSON.stringify(f.info.reward_info)}`);
      }
      return out;
    };
    for (let k = 0; k <= actions.length; k++) {
      const source = new Episode({ sandboxes, bundle, scenario, seed: 11, episodeId: "src" });
      await source.reset();
      for (const act of actions.slice(0, k)) if (!source.isDone) await source.step(act);
      if (source.isDone) {
        source.close();
        break;
      }
      const fork = await source.fork("fork");
      // the strongest form of "the same": every byte of the fork's wasm memory is its source's
      expect(Buffer.compare(wasmBytes(fork), wasmBytes(source))).toBe(0);
      const [a, b] = [await trace(source, k), await trace(fork, k)];
      expect(b).toEqual(a);
      source.close();
      fork.close();
    }
  });
});

describe("runtime: snapshot, fork and restore ops", () => {
  let rt: EnvRuntime;
  afterAll(() => rt?.close());

  test("fork of a live episode and of a snapshot, restore back, limits answered with too_large", async () => {
    rt = await EnvRuntime.start({ envs: [ENVS], maxSnapshotsPerEpisode: 2 });
    const { episode_id } = await rt.reset("library-1", 5);
    const scenario = rt.registry.scenario("library-1")!.scenario;
    const [first, ...rest] = scenario.reference_actions!;
    await rt.step(episode_id, first);
    const snap = await rt.snapshot(episode_id);
    expect(snap).toMatchObject({ step: 1, state_hash: rt.stateHash(episode_id) });
    const child = await rt.fork({ episode_id });
    expect(child).toMatchObject({ step: 1, state_hash: snap.state_hash, forked_from: { episode_id, step: 1 } });
    const fromSnap = await rt.fork({ snapshot_id: snap.snapshot_id });
    const seq = async (id: string) => {
      const out: string[] = [];
      for (const a of rest) out.push((await rt.step(id, a)).info.state_hash);
      out.push(String((await rt.finish(id)).reward));
      return out;
    };
    const want = await seq(episode_id);
    expect(await seq(child.episode_id)).toEqual(want);
    expect(await seq(fromSnap.episode_id)).toEqual(want);
    expect(want.at(-1)).toBe("1");
    // a finished episode goes back to the snapshot and plays again
    await rt.restoreSnapshot(fromSnap.episode_id, snap.snapshot_id);
    expect(rt.stateHash(fromSnap.episode_id)).toBe(snap.state_hash);
    expect(await seq(fromSnap.episode_id)).toEqual(want);
    // limits
    const other = await rt.reset("library-1", 5);
    await rt.snapshot(other.episode_id);
    await rt.snapshot(other.episode_id);
    await expect(rt.snapshot(other.episode_id)).rejects.toMatchObject({ code: "too_large", message: expect.stringContaining("maxSnapshotsPerEpisode") });
    expect(await rt.dropSnapshot(snap.snapshot_id)).toBe(true);
    await expect(rt.fork({ snapshot_id: snap.snapshot_id })).rejects.toMatchObject({ code: "unknown_snapshot" });
    // closing an episode drops its snapshots
    const before = rt.stats().snapshots;
    await rt.closeEpisode(other.episode_id);
    expect(rt.stats().snapshots).toBe(before - 2);
  });
});

describe("dormant sandboxes", () => {
  test("a burst of resets builds the env image once and holds no more instances than the live limit", async () => {
    const { envImagesBuilt } = await import("../../bridge/core/episode/env-session.js");
    sandboxes.setMaxLive(4);
    try {
      const bundle = polluterBundle("burst-hash"); // an env this thread has no image of yet
      const before = envImagesBuilt();
      const made = sandboxes.stats().instantiated;
      const eps = Array.from({ length: 40 }, (_, i) => new Episode({ sandboxes, bundle, scenario: bundle.scenario("p-1")!, seed: i, episodeId: `burst${i}` }));
      await Promise.all(eps.map((e) => e.reset()));
      expect(envImagesBuilt() - before).toBe(1);
      const held = sandboxes.stats();
      expect(held.live).toBeLessThanOrEqual(4);
      // instances made: the image builder's, the live ones and the few made ahead of time; not one per reset
      expect(held.instantiated - made).toBeLessThan(32);
      const probes = await Promise.all(eps.map((e) => e.step({ name: "add", arguments: { id: "y" } })));
      expect(probes.map(content)).toEqual(Array(40).fill("2"));
      for (const e of eps) e.close();
    } finally {
      sandboxes.setMaxLive(256);
    }
  });

  test("warmEnv readies instances ahead: a burst of that many resets instantiates none on the way", async () => {
    const { warmEnv } = await import("../../bridge/core/episode/env-session.js");
    // a memory cap of its own, so its pool holds only what this test made
    const base = polluterBundle("warm-hash");
    const burst = (bundle: EnvBundle, tag: string) => {
      const eps = Array.from({ length: 12 }, (_, i) => new Episode({ sandboxes, bundle, scenario: bundle.scenario("p-1")!, seed: i, episodeId: `${tag}${i}` }));
      return Promise.all(eps.map((e) => e.reset())).then(() => eps);
    };
    const capped = (mb: number, hash: string) => new EnvBundle(base.dir, EnvManifest.parse({ ...base.manifest, limits: { memory_mb: mb } }), base.source, base.defaultState, base.scenarios, hash);

    const cold = capped(37, "cold-hash");
    let made = sandboxes.stats().instantiated;
    const coldEps = await burst(cold, "cold");
    expect(sandboxes.stats().instantiated - made).toBeGreaterThan(8); // the image builder's, and about one per reset
    coldEps.forEach((e) => e.close());

    const warm = capped(39, "warm2-hash");
    await warmEnv(sandboxes, warm, 12);
    expect(sandboxes.stats().fresh).toBeGreaterThanOrEqual(12);
    made = sandboxes.stats().instantiated;
    const warmEps = await burst(warm, "warm");
    // at most the pool's background top-up (4, plus what the burst took from it if the top-up ran
    // before the burst's last takes), never one per reset as in the cold burst above
    expect(sandboxes.stats().instantiated - made).toBeLessThan(8);
    expect((await Promise.all(warmEps.map((e) => e.step({ name: "add", arguments: { id: "y" } })))).map(content)).toEqual(Array(12).fill("2"));
    warmEps.forEach((e) => e.close());
  });

  test("a sandbox that sleeps right after its reset sleeps as its recipe, without a capture, and wakes exactly as it was", async () => {
    sandboxes.setMaxLive(3);
    // every reset here runs init (no post-init image), so a never-slept twin is built as the
    // sleeper was; tests/unit/post-init-images.test.ts has the same check for the image path
    const budget = postInitImages.budgetBytes;
    postInitImages.budgetBytes = 0;
    try {
      const bundle = polluterBundle("recipe-hash");
      const before = sandboxes.stats().sleeps;
      const eps: Episode[] = [];
      for (let i = 0; i < 8; i++) {
        const e = new Episode({ sandboxes, bundle, scenario: bundle.scenario("p-1")!, seed: i, episodeId: `rc${i}` });
        await e.reset();
        eps.push(e);
      }
      const after = sandboxes.stats().sleeps;
      // five of the eight went to sleep to make room, none of them copied
      expect(after.recipe - before.recipe).toBeGreaterThanOrEqual(5);
      expect(after.captured - before.captured).toBe(0);
      // each one woken (the image restored, its reset's ops run again) is its never-slept twin:
      // the same memory byte for byte, so the same RNG draws, clock and state
      for (const [i, e] of eps.entries()) {
        const twin = new Episode({ sandboxes, bundle, scenario: bundle.scenario("p-1")!, seed: i, episodeId: `rt${i}` });
        await twin.reset();
        // (reading the memory wakes the sandbox)
        expect(Buffer.compare(wasmBytes(e), wasmBytes(twin))).toBe(0);
        expect(content(await e.step({ name: "probe", arguments: {} }))).toBe(content(await twin.step({ name: "probe", arguments: {} })));
        twin.close();
      }
      // a sandbox that ran a tool call sleeps by capture again
      await eps[0]!.step({ name: "add", arguments: { id: "z" } });
      const more = Array.from({ length: 4 }, (_, i) => new Episode({ sandboxes, bundle, scenario: bundle.scenario("p-1")!, seed: 100 + i, episodeId: `rm${i}` }));
      for (const m of more) await m.reset();
      expect(sandboxes.stats().sleeps.captured).toBeGreaterThan(after.captured);
      expect(JSON.parse(eps[0]!.stateJson()).items.z).toEqual({ n: 0, tags: ["new"] });
      for (const e of [...eps, ...more]) e.close();
    } finally {
      sandboxes.setMaxLive(256);
      postInitImages.budgetBytes = budget;
    }
  });

  test("beyond the live limit, sandboxes sleep as images and wake exactly where they were", async () => {
    sandboxes.setMaxLive(3);
    try {
      const bundle = polluterBundle();
      const eps: Episode[] = [];
      for (let i = 0; i < 8; i++) {
        const e = new Episode({ sandboxes, bundle, scenario: bundle.scenario("p-1")!, seed: i, episodeId: `d${i}` });
        await e.reset();
        await e.step({ name: "add", arguments: { id: `x${i}` } });
        eps.push(e);
      }
      expect(sandboxes.stats().live).toBeLessThanOrEqual(3);
      // every episode, woken in turn, goes on from its own state, RNG and clock
      const twin = new Episode({ sandboxes, bundle, scenario: bundle.scenario("p-1")!, seed: 5, episodeId: "twin" });
      await twin.reset();
      await twin.step({ name: "add", arguments: { id: "x5" } });
      const want = content(await twin.step({ name: "probe", arguments: {} }));
      for (const [i, e] of eps.entries()) {
        const got = JSON.parse(content(await e.step({ name: "probe", arguments: {} })));
        expect(got.n).toBe(1);
        if (i === 5) expect(JSON.stringify(got)).toBe(want);
        expect(JSON.parse(e.stateJson()).items[`x${i}`]).toEqual({ n: 0, tags: ["new"] });
      }
      // a sleeping episode forks and snapshots like an awake one
      const f = await eps[0]!.fork("f0");
      expect(JSON.parse(f.stateJson()).items.x0).toEqual({ n: 0, tags: ["new"] });
      for (const e of [...eps, twin, f]) e.close();
      expect(sandboxes.stats().live).toBe(0);
    } finally {
      sandboxes.setMaxLive(256);
    }
  });
});
