// SandboxHost: one engine's wasm instances and sandboxes. Its invariants hold through opening,
// sleeping, waking and closing episodes; two hosts share nothing; disposing one leaves nothing held
// and it then refuses new work; an in-thread runtime's engine disposes its host when it closes.
import { afterEach, expect, test } from "vitest";
import { EnvRuntime } from "../../bridge/core/engine/env-runtime.js";
import { Episode } from "../../bridge/core/episode/episode.js";
import { liveInstances, newBlankInstance } from "../../bridge/core/sandbox/quickjs-machine.js";
import { SandboxHost, SandboxHostDisposed } from "../../bridge/core/sandbox/sandbox-host.js";
import { FIXTURES, fileSandboxHost, notesBundle } from "../helpers.js";

const bundle = notesBundle();
const scenario = bundle.scenario("notes-1")!;
const sandboxes = fileSandboxHost();
const opened: Episode[] = [];
afterEach(() => opened.splice(0).forEach((e) => e.close()));

async function open(host: SandboxHost, seed: number): Promise<Episode> {
  const e = new Episode({ sandboxes: host, bundle, scenario, seed, episodeId: `h${seed}` });
  opened.push(e);
  await e.reset();
  return e;
}

const add = { name: "add_note", arguments: { user_id: "u1", title: "t", body: "b" } };

test("the live count is what the open episodes hold, within the live limit, and nothing once they close", async () => {
  const host = new SandboxHost({ maxLive: 3, label: "live-count" });
  try {
    const eps: Episode[] = [];
    for (let i = 0; i < 7; i++) {
      eps.push(await open(host, i));
      const s = host.stats();
      expect(s.sandboxes).toBe(i + 1); // one sandbox per open episode (the image builder's was disposed)
      expect(s.live).toBe(Math.min(i + 1, 3));
      host.checkInvariants();
    }
    // waking each in turn keeps the limit: the least recently used goes to sleep
    for (const e of eps) {
      await e.step(add);
      expect(host.stats().live).toBeLessThanOrEqual(3);
      host.checkInvariants();
    }
    expect(host.stats().sleeps.captured + host.stats().sleeps.recipe).toBeGreaterThan(0);
    for (const e of eps.splice(0, 4)) e.close();
    expect(host.stats().sandboxes).toBe(3);
    host.checkInvariants();
    for (const e of eps) e.close();
    expect(host.stats()).toMatchObject({ live: 0, sandboxes: 0 });
    expect(host.stats().recycled).toBeGreaterThan(0); // closed episodes' instances wait for reuse
    host.checkInvariants();
  } finally {
    host.dispose();
  }
});

test("an instance is pooled or attached, never both: pooling one twice is refused", async () => {
  const host = new SandboxHost({ label: "twice" });
  const inst = await newBlankInstance(256 * 65536);
  try {
    host.recycle(inst);
    expect(inst.pooled).toBe(true);
    expect(() => host.recycle(inst)).toThrow(/pooled twice/);
    host.checkInvariants();
  } finally {
    host.dispose();
  }
  expect(inst.pooled).toBe(false);
  expect(inst.dropped).toBe(true);
});

test("two hosts in one thread share no instance: one's closed episodes are not the other's pool", async () => {
  const a = new SandboxHost({ label: "a" });
  const b = new SandboxHost({ label: "b" });
  try {
    (await open(a, 1)).close();
    expect(a.stats().recycled).toBeGreaterThan(0);
    expect(b.stats()).toMatchObject({ fresh: 0, recycled: 0, live: 0, sandboxes: 0, instantiated: 0 });
    const before = b.stats().instantiated;
    (await open(b, 2)).close();
    expect(b.stats().instantiated).toBeGreaterThan(before); // it made its own: a's recycled one was not lent
  } finally {
    a.dispose();
    b.dispose();
  }
});

test("dispose leaves nothing held; the episodes still open find their sandbox gone; the host refuses new work", async () => {
  const baseline = liveInstances();
  const host = new SandboxHost({ label: "disposed-with-open-episodes" });
  const e = await open(host, 3);
  expect(liveInstances()).toBeGreaterThan(baseline);
  host.dispose();
  expect(liveInstances()).toBe(baseline);
  expect(host.stats()).toMatchObject({ live: 0, fresh: 0, recycled: 0 });
  host.checkInvariants();
  // the leak check notes a host disposed under an open episode (this test does it on purpose)
  expect(SandboxHost.leaks().disposedWithLive).toContainEqual(expect.stringContaining("disposed-with-open-episodes (1 sandbox not disposed, 1 of them live)"));
  SandboxHost.forgetLeaks("disposed-with-open-episodes");
  const step = await e.step(add);
  expect(step.info.error).toMatchObject({ code: "env_crashed" });
  expect(step.info.error!.message).toContain("sandbox already disposed");
  // no new sandbox, no prefill: a clear error naming the host
  await expect(open(host, 4)).rejects.toThrow(SandboxHostDisposed);
  await expect(open(host, 5)).rejects.toThrow(/sandbox host "disposed-with-open-episodes" is disposed/);
  await expect(host.prefill(256 * 65536, 1)).rejects.toThrow(SandboxHostDisposed);
  expect(liveInstances()).toBe(baseline);
});

test("a sandbox asleep when its host is disposed cannot wake: the host refuses it", async () => {
  const host = new SandboxHost({ maxLive: 2, label: "asleep" });
  const eps = [await open(host, 1), await open(host, 2), await open(host, 3)];
  expect(host.stats().live).toBe(2); // the first sleeps
  for (const e of eps.slice(1)) e.close();
  host.dispose();
  SandboxHost.forgetLeaks("asleep");
  await expect(eps[0]!.step(add)).rejects.toThrow(/waking a sandbox: the sandbox host "asleep" is disposed/);
});

test("a runtime with an in-thread engine disposes its engine's host when it closes, open episodes and all", async () => {
  const baseline = liveInstances();
  const rt = await EnvRuntime.start({ envs: [FIXTURES], workers: 0, warmSessions: 3 });
  const r = await rt.reset("notes-1", 1);
  await rt.step(r.episode_id, add);
  await rt.reset("notes-1", 2);
  expect(liveInstances()).toBeGreaterThan(baseline);
  await rt.close();
  expect(liveInstances()).toBe(baseline);
  expect(SandboxHost.leaks().disposedWithLive).toEqual([]);
});

test("a fork group's instances are recycled for the next group: the pool counts what they wrote, not their memory's size", async () => {
  const host = new SandboxHost({ label: "fork-group" });
  try {
    const src = await open(host, 1);
    await src.step(add);
    const snap = src.snapshot();
    const group = async (round: number) => {
      const forks = [];
      for (let i = 0; i < 64; i++) forks.push(await Episode.fromSnapshot({ sandboxes: host, bundle, scenario, episodeId: `fg${round}-${i}` }, snap));
      forks.forEach((f) => f.close());
    };
    await group(0);
    const s = host.stats();
    // all 64 kept: each holds well under a MiB of written memory, though each memory is 16 MiB
    expect(s.recycled).toBeGreaterThanOrEqual(64);
    expect(s.recycled_bytes).toBeLessThan(64 * (4 << 20));
    await group(1);
    expect(host.stats().instantiated).toBe(s.instantiated);
    src.close();
  } finally {
    host.dispose();
  }
});

test("an instance's written memory counts the most its machines ever wrote (the heap's break never goes down)", async () => {
  const { inlineBundle } = await import("../helpers.js");
  const { touchedBytes } = await import("../../bridge/core/sandbox/quickjs-machine.js");
  // 8 MiB of strings, dropped when the call returns
  const big = inlineBundle("big", "Big", `class Big { constructor(s) {} big() { const a = []; for (let i = 0; i < 8; i++) a.push("x".repeat(1 << 20) + i); return a.length; } small() { return 1; } }`, ["big", "small"], {});
  const host = new SandboxHost({ label: "touched" });
  try {
    const e = new Episode({ sandboxes: host, bundle: big, scenario: big.scenario("big-1")!, seed: 1, episodeId: "big" });
    await e.reset();
    await e.step({ name: "big", arguments: {} });
    await e.step({ name: "small", arguments: {} });
    const inst = (e as unknown as { session: { sandbox: { awake: { instance: Parameters<typeof touchedBytes>[0] } } } }).session.sandbox.awake.instance;
    e.close();
    expect(touchedBytes(inst)).toBeGreaterThan(8 << 20);
    expect(host.stats().recycled_bytes).toBe(touchedBytes(inst));
  } finally {
    host.dispose();
  }
});

test("the file's own host ends as it began", () => {
  expect(sandboxes.stats()).toMatchObject({ live: 0, sandboxes: 0 });
});
