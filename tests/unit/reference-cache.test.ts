import { expect, test } from "vitest";
import { ReferenceCache } from "../../bridge/core/episode/reference-state.js";
import type { StateView } from "../../bridge/core/state/state-base.js";
import { EnvBundle } from "../../envs/format/load-bundle.js";
import { inlineBundle, fileSandboxHost } from "../helpers.js";

/** This file's episodes' and sessions' sandboxes (disposed after its tests). */
const sandboxes = fileSandboxHost();

// a counter env whose `roll` tool draws from Math.random and whose `add` does not
const SOURCE = `class Dice {
  constructor(s) { this.total = s.total; }
  add(a) { this.total += a.n; return this.total; }
  roll() { this.total += Math.floor(Math.random() * 1000); return this.total; }
}`;

function withReference(id: string, actions: { name: string; arguments: Record<string, unknown> }[]): EnvBundle {
  const b = inlineBundle(id, "Dice", SOURCE, ["add", "roll"], { total: 0 });
  const s = { ...b.scenario(`${id}-1`)!, reference_actions: actions };
  return new EnvBundle(b.dir, b.manifest, b.source, b.defaultState, new Map([[s.id, s]]), `${id}-hash`);
}

const total = (v: StateView | { error: string }) => ("error" in v ? v.error : v.toJsonOf("total"));

test("a reference replay that draws no random number is made once and serves every seed", async () => {
  const bundle = withReference("plain", [{ name: "add", arguments: { n: 2 } }, { name: "add", arguments: { n: 3 } }]);
  const cache = new ReferenceCache(sandboxes);
  // episodes of many seeds finishing at once, then more later
  const first = await Promise.all([1, 2, 3, 4].map((seed) => cache.get(bundle, "plain-1", seed)));
  const later = await cache.get(bundle, "plain-1", 99);
  expect([...first, later].map(total)).toEqual(["5", "5", "5", "5", "5"]);
  expect(cache.replays).toBe(1);
  expect(new Set([...first, later]).size).toBe(1);
});

test("a reference replay that draws random numbers is made per seed, and the same seed gives the same state", async () => {
  const bundle = withReference("dice", [{ name: "roll", arguments: {} }, { name: "add", arguments: { n: 1 } }]);
  const cache = new ReferenceCache(sandboxes);
  const [a, b, c] = (await Promise.all([1, 2, 3].map((seed) => cache.get(bundle, "dice-1", seed)))) as [StateView, StateView, StateView];
  expect(new Set([a, b, c].map(total)).size).toBe(3);
  expect(cache.replays).toBe(3);
  // a fresh cache replays seed 2 to the same state; this cache answers it from memory
  expect(total(await new ReferenceCache(sandboxes).get(bundle, "dice-1", 2))).toBe(total(b));
  expect(await cache.get(bundle, "dice-1", 2)).toBe(b);
  expect(cache.replays).toBe(3);
});

test("draws the env's constructor makes count too", async () => {
  // (the constructor's own fields other than the state's: the state's keys are set after it runs)
  const src = SOURCE.replace("this.total = s.total;", "this.salt = Math.floor(Math.random() * 1000);").replace("this.total += a.n;", "this.total += a.n + this.salt;");
  const b0 = inlineBundle("ctor", "Dice", src, ["add", "roll"], { total: 0 });
  const s = { ...b0.scenario("ctor-1")!, reference_actions: [{ name: "add", arguments: { n: 1 } }] };
  const bundle = new EnvBundle(b0.dir, b0.manifest, b0.source, b0.defaultState, new Map([[s.id, s]]), "ctor-hash");
  const cache = new ReferenceCache(sandboxes);
  const states = await Promise.all([1, 2].map((seed) => cache.get(bundle, "ctor-1", seed)));
  expect(total(states[0]!)).not.toBe(total(states[1]!));
  expect(cache.replays).toBe(2);
});
