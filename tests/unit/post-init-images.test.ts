// Post-init images (bridge/core/episode/post-init-images.ts): a reset that starts from a scenario's
// sandbox captured after its init plays exactly as one that runs init, on every bundled env's
// reference solutions; an init that draws on the seed or reads the clock is never captured; the
// cache keeps to its byte budget.
import { afterEach, describe, expect, test } from "vitest";
import { Episode, type StepResult } from "../../bridge/core/episode/episode.js";
import { postInitImages } from "../../bridge/core/episode/env-session.js";
import { PostInitImages } from "../../bridge/core/episode/post-init-images.js";
import { BUNDLED_ENVS } from "../../envs/bundled.js";
import { EnvRegistry } from "../../envs/format/registry.js";
import type { EnvBundle } from "../../envs/format/load-bundle.js";
import { fileSandboxHost, inlineBundle } from "../helpers.js";

const sandboxes = fileSandboxHost();
const budget = postInitImages.budgetBytes;
afterEach(() => {
  postInitImages.budgetBytes = budget;
});

type Seen = { content: string; reward: number; hash: string; terminated: boolean }[];
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
      if (r.terminated || r.truncated) break;
    }
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
    // runs init at every reset
    postInitImages.clear();
    postInitImages.budgetBytes = 0;
    const byInit = [await play(c.bundle, c.id, 7, c.actions), await play(c.bundle, c.id, 8, c.actions)];
    // first open counts, second captures (and plays from the session it captured), third restores
    postInitImages.clear();
    postInitImages.budgetBytes = budget;
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
