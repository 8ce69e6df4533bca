// Per-scenario images (bridge/core/episode/post-init-images.ts): a reset that starts from a
// scenario's sandbox captured after its init, and a scoring whose check realm has the scenario's
// state preloaded, give exactly what running init and parsing every state read give, on every
// bundled env's reference solutions; an init that draws on the seed or reads the clock is never
// captured; checks read the episode's changes over the preloaded base and cannot write it; the
// caches keep to their byte budgets.
import { afterEach, describe, expect, test } from "vitest";
import { Episode, type StepResult } from "../../bridge/core/episode/episode.js";
import { postInitImages } from "../../bridge/core/episode/env-session.js";
import { checkBaseImages, runJsChecks } from "../../bridge/core/episode/checker.js";
import { StateBase } from "../../bridge/core/state/state-base.js";
import { StateTracker } from "../../bridge/core/state/state-tracker.js";
import { PostInitImages } from "../../bridge/core/episode/post-init-images.js";
import { BUNDLED_ENVS } from "../../envs/bundled.js";
import { EnvRegistry } from "../../envs/format/registry.js";
import type { EnvBundle } from "../../envs/format/load-bundle.js";
import { fileSandboxHost, inlineBundle } from "../helpers.js";

const sandboxes = fileSandboxHost();
const budget = postInitImages.budgetBytes;
const checkBudget = checkBaseImages.budgetBytes;
afterEach(() => {
  postInitImages.budgetBytes = budget;
  checkBaseImages.budgetBytes = checkBudget;
});

type Seen = { content: string; reward: number; hash: string; terminated: boolean; checks?: unknown }[];
let n = 0;

/** Plays `actions` from a reset at `seed`: every observation, reward and state hash. */
async function play(bundle: EnvBundle, scenarioId: string, seed: number, actions: { name: string; arguments: Record<string, unknown> }[]): Promise<Seen> {
  const e = new Episode({ sandboxes, bundle, scenario: bundle.scenario(scenarioId)!, seed, episodeId: `pi${n++}` });
  try {
    const first = await e.reset();
    const seen: Seen = [{ content: first.observation.content, reward: 0, hash: first.info.state_hash, terminated: false }];
    for (const a of actions) {
      const r: StepResult = await e.step(a);
      seen.push({ content: r.observation.content, reward: r.reward, hash: r.info.state_hash, terminated: r.terminated });
      if (r.terminated || r.truncated) return seen;
    }
    // scored as the client's finish scores it: every check's verdict
    const end = await e.finish();
    seen.push({ content: end.observation.content, reward: end.reward, hash: end.info.state_hash, terminated: end.terminated, checks: end.info.reward_info });
    return seen;
  } finally {
    e.close();
  }
}

describe("a reset from a post-init image plays as one that runs init", () => {
  const registry = EnvRegistry.load([BUNDLED_ENVS]);
  const cases = registry.list().flatMap((bundle) =>
    [...bundle.scenarios.values()].filter((s) => s.reference_actions?.length).slice(0, 3).map((s) => ({ env: bundle.manifest.id, bundle, id: s.id, actions: s.reference_actions! })),
  );

  test("there are bundled scenarios to play", () => {
    expect(cases.length).toBeGreaterThan(10);
  });

  test.each(cases.map((c) => [c.id, c] as const))("%s", async (_id, c) => {
    // runs init at every reset, and every scoring parses the states it reads
    for (const cache of [postInitImages, checkBaseImages]) {
      cache.clear();
      cache.budgetBytes = 0;
    }
    const byInit = [await play(c.bundle, c.id, 7, c.actions), await play(c.bundle, c.id, 8, c.actions)];
    expect(byInit[0]!.at(-1)!.checks).toBeDefined();
    // first open counts, second captures (and plays from the session it captured), third restores;
    // the same for the scorings' check images with the scenario's state preloaded
    postInitImages.clear();
    postInitImages.budgetBytes = budget;
    checkBaseImages.clear();
    checkBaseImages.budgetBytes = checkBudget;
    const before = postInitImages.stats().captured;
    expect(await play(c.bundle, c.id, 7, c.actions)).toEqual(byInit[0]);
    expect(await play(c.bundle, c.id, 7, c.actions)).toEqual(byInit[0]);
    expect(postInitImages.stats().captured).toBe(before + 1);
    expect(await play(c.bundle, c.id, 7, c.actions)).toEqual(byInit[0]);
    expect(await play(c.bundle, c.id, 8, c.actions)).toEqual(byInit[1]);
  });
});

// An env that keeps a random number and the time its constructor saw, and a tool that draws again.
const DRAWS_IN_INIT = `
class Drawer {
  constructor(state) { this.box = state.box; this.lucky = Math.random(); }
  peek() { return { lucky: this.lucky, next: Math.random() }; }
}`;
const READS_CLOCK_IN_INIT = `
class Clocked {
  constructor(state) { this.box = state.box; this.opened = Date.now(); }
  peek() { return { opened: this.opened, now: Date.now() }; }
}`;
const PLAIN = `
class Plain {
  constructor(state) { this.box = state.box; }
  peek() { return { r: Math.random(), t: Date.now() }; }
}`;

const peek1 = async (bundle: EnvBundle, seed: number) => (await play(bundle, bundle.manifest.id.replace(/-v1$/, "-1"), seed, [{ name: "peek", arguments: {} }]))[1]!.content;

describe("which inits are captured", () => {
  const peek = async (bundle: EnvBundle, seed: number) => (await play(bundle, bundle.manifest.id.replace(/-v1$/, "-1"), seed, [{ name: "peek", arguments: {} }]))[1]!.content;

  test("an init that draws Math.random is run for every episode: each seed keeps its own draws", async () => {
    const bundle = inlineBundle("drawer", "Drawer", DRAWS_IN_INIT, ["peek"], { box: { a: { n: 1 } } });
    const before = postInitImages.stats().captured;
    const seen = [];
    for (const seed of [1, 2, 3, 1]) seen.push(await peek(bundle, seed));
    expect(postInitImages.stats().captured).toBe(before);
    expect(new Set(seen.slice(0, 3)).size).toBe(3);
    expect(seen[3]).toBe(seen[0]);
  });

  test("an init that reads the clock is run for every episode", async () => {
    const bundle = inlineBundle("clocked", "Clocked", READS_CLOCK_IN_INIT, ["peek"], { box: { a: { n: 1 } } });
    const before = postInitImages.stats().captured;
    for (const seed of [1, 2, 3]) await peek(bundle, seed);
    expect(postInitImages.stats().captured).toBe(before);
  });

  test("a pristine init is captured once, and the seed and clock are the episode's after it", async () => {
    const bundle = inlineBundle("plain", "Plain", PLAIN, ["peek"], { box: { a: { n: 1 } } });
    postInitImages.budgetBytes = 0;
    const byInit = [await peek(bundle, 1), await peek(bundle, 2)];
    expect(byInit[0]).not.toBe(byInit[1]);
    postInitImages.budgetBytes = budget;
    const before = postInitImages.stats().captured;
    const fromImage = [];
    for (const seed of [1, 2, 1, 2]) fromImage.push(await peek(bundle, seed));
    expect(postInitImages.stats().captured).toBe(before + 1);
    expect(fromImage).toEqual([...byInit, ...byInit]);
  });
});

describe("a burst of resets captures one image", () => {
  test("opens in flight together: one captures, the others run init and see the same", async () => {
    const bundle = inlineBundle("bursty", "Plain", PLAIN, ["peek"], { box: { a: { n: 1 } } });
    const before = postInitImages.stats().captured;
    await peek1(bundle, 1); // counted
    const seen = await Promise.all([2, 3, 4, 5, 6, 7, 8, 9].map((seed) => peek1(bundle, seed)));
    expect(postInitImages.stats().captured).toBe(before + 1);
    // and the episodes from the image see what the ones that ran init saw
    expect(await Promise.all([2, 3, 4, 5, 6, 7, 8, 9].map((seed) => peek1(bundle, seed)))).toEqual(seen);
  });

  test("the capture is handed to the next open when the open told to capture fails", () => {
    const images = new PostInitImages<string>(1 << 20);
    expect(images.plan("k")).toEqual({ image: null, capture: false });
    expect(images.plan("k")).toEqual({ image: null, capture: true });
    expect(images.plan("k")).toEqual({ image: null, capture: false }); // one capture at a time
    images.release("k");
    expect(images.plan("k")).toEqual({ image: null, capture: true });
    images.keep("k", "img", 10);
    images.release("k"); // a kept image is not given up
    expect(images.plan("k")).toEqual({ image: "img" });
  });
});

describe("checks over a preloaded initial state", () => {
  // base: a, b, c; the episode changed a, deleted b, added d (and left c as it was)
  const base = StateBase.fromState({ items: { a: { n: 1, tags: ["x"] }, b: { n: 2, tags: [] }, c: { n: 3, tags: [] } }, counter: 7 });
  const initial = new StateTracker(base).snapshot();
  const tracker = new StateTracker(base);
  tracker.apply({ records: [["items", "a", JSON.stringify({ n: 10, tags: ["x", "y"] })], ["items", "b", null], ["items", "d", JSON.stringify({ n: 4, tags: [] })]], values: [["counter", "8"]] });
  const inputs = { initial, final: tracker.snapshot(), actions: [], messages: [] };
  const checks = [
    "({final}) => final.items.a.n === 10 && final.items.a.tags.join() === 'x,y'",
    "({final}) => final.items.b === undefined && !('b' in final.items) && Object.keys(final.items).join() === 'a,c,d'",
    "({final}) => final.items.c.n === 3 && final.items.d.n === 4 && final.counter === 8",
    "({initial}) => initial.items.a.n === 1 && initial.items.b.n === 2 && Object.keys(initial.items).join() === 'a,b,c'",
    "({initial, final}) => Object.values(final.items).map((r) => r.n).join() === '10,3,4' && Object.values(initial.items).map((r) => r.n).join() === '1,2,3'",
    // a check that writes into a record the base shares: refused, and nothing a later check sees
    "({initial, final}) => { try { initial.items.c.n = 99; } catch (e) {} try { final.items.c.tags.push(1); } catch (e) {} return initial.items.c.n === 3 && final.items.c.tags.length === 0; }",
    "({initial, final}) => initial.items.c.n === 3 && final.items.c.n === 3 && final.items.c.tags.length === 0",
  ];

  test("read the episode's changes over the base, in the state's order, and cannot write the shared records", async () => {
    checkBaseImages.clear();
    const before = checkBaseImages.stats().captured;
    // counted, captured (scored in the sandbox that preloaded), restored from the image
    for (let i = 0; i < 3; i++) expect(await runJsChecks(sandboxes, checks, inputs, [1, 2, 3, 4])).toEqual(checks.map(() => ({ passed: true })));
    expect(checkBaseImages.stats().captured).toBe(before + 1);
  });

  test("collections a plain object cannot hold in order (index-like ids, ids Object.prototype has) read as the others, and no view can be written", async () => {
    // `odd` keeps its lazy proxy (index-like ids, names Object.prototype has), and so does `more` in
    // the final state (an index-like id added after "a": a plain object would list it first);
    // `items` is a plain frozen view; all must read and refuse writes alike
    const oddBase = StateBase.fromState({ odd: { "10": { n: 1 }, "2": { n: 2 }, toString: { n: 3 }, constructor: { n: 4 } }, items: { a: { n: 1 }, b: { n: 2 } }, more: { a: { n: 1 } } });
    const t = new StateTracker(oddBase);
    t.apply({ records: [["odd", "__proto__", JSON.stringify({ n: 5 })], ["odd", "2", null], ["items", "c", JSON.stringify({ n: 6 })], ["items", "a", null], ["more", "7", JSON.stringify({ n: 7 })]], values: [] });
    const odd = { initial: new StateTracker(oddBase).snapshot(), final: t.snapshot(), actions: [], messages: [] };
    const writes = (v: string) => ["z = {}", "a = 1", "['10'] = 1"].map((w) => `(() => { try { ${v}${w.startsWith("[") ? "" : "."}${w}; return false; } catch (e) { return String(e).includes('read-only'); } })()`).join(" && ");
    const oddChecks = [
      "({initial}) => Object.keys(initial.odd).join() === '2,10,toString,constructor' && initial.odd.toString.n === 3 && initial.odd.constructor.n === 4 && initial.odd['2'].n === 2",
      "({final}) => Object.keys(final.odd).join() === '10,toString,constructor,__proto__' && final.odd['__proto__'].n === 5 && !('2' in final.odd) && Object.values(final.odd).map((r) => r.n).join() === '1,3,4,5'",
      "({initial, final}) => Object.keys(initial.items).join() === 'a,b' && Object.keys(final.items).join() === 'b,c' && final.items.c.n === 6 && final.items.a === undefined && !final.items.hasOwnProperty('a')",
      "({initial, final}) => Object.keys(initial.more).join() === 'a' && Object.keys(final.more).join() === 'a,7' && final.more['7'].n === 7",
      `({initial, final}) => ${writes("initial.items")} && ${writes("final.items")} && ${writes("final.odd")} && ${writes("final.more")}`,
      "({initial, final}) => { for (const v of [initial.items, final.items]) { try { delete v.b; return false; } catch (e) {} try { Object.defineProperty(v, 'q', { value: 1 }); return false; } catch (e) {} try { Object.setPrototypeOf(v, null); return false; } catch (e) {} } return final.items.b.n === 2 && Object.getPrototypeOf(final.items) === Object.prototype; }",
    ];
    checkBaseImages.clear();
    const before = checkBaseImages.stats().captured;
    for (let i = 0; i < 3; i++) expect(await runJsChecks(sandboxes, oddChecks, odd, [1, 2, 3, 4])).toEqual(oddChecks.map(() => ({ passed: true })));
    expect(checkBaseImages.stats().captured).toBe(before + 1);
  });

  test("states over two bases are scored without a preload", async () => {
    const other = { ...inputs, initial: new StateTracker(StateBase.fromState({ items: { a: { n: 1, tags: [] } }, counter: 0 })).snapshot() };
    const before = checkBaseImages.stats().captured;
    for (let i = 0; i < 3; i++) expect((await runJsChecks(sandboxes, [checks[0]!, checks[2]!], other, [1, 2, 3, 4])).every((v) => v.passed)).toBe(true);
    expect(checkBaseImages.stats().captured).toBe(before);
  });
});

describe("sleeping sandboxes started from an image", () => {
  /** The bytes of an episode's sandbox memory (reaches into private fields: a test-only view). */
  const wasmBytes = (e: Episode): Buffer => Buffer.from((e as unknown as { session: { sandbox: { machine: { memory: WebAssembly.Memory } } } }).session.sandbox.machine.memory.buffer);

  test("sleep as their recipe (the image and configure), without a capture, and wake byte for byte as a never-slept twin", async () => {
    const bundle = inlineBundle("sleeper", "Plain", PLAIN, ["peek"], { box: { a: { n: 1 } } });
    const scenario = bundle.scenario("sleeper-1")!;
    for (let i = 0; i < 2; i++) {
      const warm = new Episode({ sandboxes, bundle, scenario, seed: 0, episodeId: `sw${i}` });
      await warm.reset();
      warm.close();
    }
    expect(postInitImages.stats().kept).toBeGreaterThan(0);
    sandboxes.setMaxLive(3);
    try {
      const before = sandboxes.stats().sleeps;
      const eps: Episode[] = [];
      for (let i = 0; i < 8; i++) {
        const e = new Episode({ sandboxes, bundle, scenario, seed: i, episodeId: `sl${i}` });
        await e.reset();
        eps.push(e);
      }
      const after = sandboxes.stats().sleeps;
      expect(after.recipe - before.recipe).toBeGreaterThanOrEqual(5);
      expect(after.captured - before.captured).toBe(0);
      for (const [i, e] of eps.entries()) {
        const twin = new Episode({ sandboxes, bundle, scenario, seed: i, episodeId: `st${i}` });
        await twin.reset();
        expect(Buffer.compare(wasmBytes(e), wasmBytes(twin))).toBe(0);
        expect((await e.step({ name: "peek", arguments: {} })).observation.content).toBe((await twin.step({ name: "peek", arguments: {} })).observation.content);
        twin.close();
      }
      for (const e of eps) e.close();
    } finally {
      sandboxes.setMaxLive(256);
    }
  });
});

describe("the cache's bounds", () => {
  test("images are kept to the byte budget, least recently opened out", () => {
    const c = new PostInitImages<string>(100);
    for (const k of ["a", "b", "c"]) {
      expect(c.plan(k)).toEqual({ image: null, capture: false });
      expect(c.plan(k)).toEqual({ image: null, capture: true });
      c.keep(k, `image ${k}`, 40);
    }
    // a and b, then c: 120 bytes; a (the oldest) went
    expect(c.stats()).toMatchObject({ kept: 2, bytes: 80 });
    expect(c.plan("a")).toEqual({ image: null, capture: false });
    expect(c.plan("b")).toEqual({ image: "image b" });
    expect(c.plan("c")).toEqual({ image: "image c" });
  });

  test("an image over the whole budget is not kept; a varying init is never captured", () => {
    const c = new PostInitImages<string>(100);
    c.plan("big");
    c.plan("big");
    c.keep("big", "huge", 101);
    expect(c.stats()).toMatchObject({ kept: 0, bytes: 0 });
    c.plan("v");
    c.plan("v");
    c.varies("v");
    expect(c.plan("v")).toEqual({ image: null, capture: false });
  });

  test("budget 0 captures nothing", () => {
    const c = new PostInitImages<string>(0);
    c.plan("k");
    expect(c.plan("k")).toEqual({ image: null, capture: false });
  });
});
