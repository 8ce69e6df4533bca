// Issue 32: byte and count budgets hold under concurrency (reserved before the copy), the retry
// memory is bounded in bytes and forgets closed sessions, and replies name no server path.
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import { expect, test } from "vitest";
import { Dealer } from "zeromq";
import { EnvRuntime } from "../../bridge/core/engine/env-runtime.js";
import { BridgeServer } from "../../bridge/fronts/zmq/bridge-server.js";
import { RetryMemory } from "../../bridge/fronts/zmq/retry-memory.js";
import { TrajectoryWriter } from "../../bridge/tools/record/trajectory-writer.js";
import { decodeFrame, encodeFrame } from "../../protocol/codec.js";
import { PROTOCOL_VERSION } from "../../protocol/messages.js";
import { FIXTURES, fileSandboxHost } from "../helpers.js";

/** This file's episodes' and sessions' sandboxes (disposed after its tests). */
const sandboxes = fileSandboxHost();

async function oneSnapshotBytes(): Promise<number> {
  const rt = await EnvRuntime.start({ envs: [FIXTURES], workers: 0 });
  try {
    const { episode_id } = await rt.reset("notes-1", 1);
    return (await rt.snapshot(episode_id)).bytes;
  } finally {
    await rt.close();
  }
}

test("--max-snapshot-mb bounds what snapshots hold, sequential and concurrent", async () => {
  const one = await oneSnapshotBytes();
  const limit = Math.floor(3.5 * one);
  const rt = await EnvRuntime.start({ envs: [FIXTURES], workers: 1, maxSnapshotBytes: limit });
  try {
    // sequential, one episode: the fourth would take it over the limit
    const a = await rt.reset("notes-1", 1);
    const taken: string[] = [];
    for (let i = 0; i < 6; i++) {
      const r = await rt.snapshot(a.episode_id).then((s) => s.snapshot_id, (e: { code: string }) => e.code);
      taken.push(r);
    }
    expect(taken.filter((t) => t === "too_large")).toHaveLength(3);
    expect(rt.stats().snapshot_bytes).toBeLessThanOrEqual(limit);
    for (const id of taken) if (id !== "too_large") await rt.dropSnapshot(id);
    expect(rt.stats().snapshot_bytes).toBe(0);

    // concurrent, first snapshots of ten episodes (nothing known of their size before)
    const eps = await Promise.all(Array.from({ length: 10 }, (_, i) => rt.reset("notes-1", 10 + i)));
    const results = await Promise.allSettled(eps.map((e) => rt.snapshot(e.episode_id)));
    const ok = results.filter((r) => r.status === "fulfilled");
    expect(ok.length).toBe(3);
    for (const r of results) if (r.status === "rejected") expect(r.reason).toMatchObject({ code: "too_large", message: expect.stringMatching(/maxSnapshotBytes/) });
    expect(rt.stats()).toMatchObject({ snapshots: 3 });
    expect(rt.stats().snapshot_bytes).toBeLessThanOrEqual(limit);
  } finally {
    await rt.close();
  }
});

test("per-episode snapshot count holds under concurrent snapshots of one episode", async () => {
  const rt = await EnvRuntime.start({ envs: [FIXTURES], workers: 1, maxSnapshotsPerEpisode: 2 });
  try {
    const { episode_id } = await rt.reset("notes-1", 1);
    const results = await Promise.allSettled(Array.from({ length: 6 }, () => rt.snapshot(episode_id)));
    expect(results.filter((r) => r.status === "fulfilled")).toHaveLength(2);
    expect(rt.stats().snapshots).toBe(2);
  } finally {
    await rt.close();
  }
});

test("the retry memory is bounded in bytes and forgets a closed session's replies", async () => {
  const mem = new RetryMemory<{ pad: string }>(4096, 60_000, 10_000);
  for (let i = 0; i < 50; i++) mem.remember(`k${i}`, "step", `s${i % 2}`, Promise.resolve({ pad: "x".repeat(1000) }));
  await new Promise((r) => setTimeout(r, 0));
  expect(mem.heldBytes).toBeLessThanOrEqual(10_000);
  expect(mem.size).toBeLessThanOrEqual(10);
  expect(mem.get("k49")).toBeDefined(); // the newest stay
  expect(mem.get("k0")).toBeUndefined();
  mem.remember("close-s1", "close", "s1", Promise.resolve({ pad: "" }));
  mem.forgetSession("s1");
  expect(mem.get("k49")).toBeUndefined(); // s1's step
  expect(mem.get("k48")).toBeDefined(); // s0's
  expect(mem.get("close-s1")).toBeDefined(); // a resent close still gets its reply
  // the per-session index goes with the entries: dropped by age/count/bytes or forgotten
  const many = new RetryMemory<{ pad: string }>(100, 60_000, 1 << 20);
  for (let i = 0; i < 1000; i++) many.remember(`m${i}`, "step", `s${i}`, Promise.resolve({ pad: "" }));
  await new Promise((r) => setTimeout(r, 0));
  expect([many.size, many.sessions]).toEqual([100, 100]);
  many.forgetSession("s999");
  expect([many.size, many.sessions, many.get("m999")]).toEqual([99, 99, undefined]);
  // a key remembered again replaces its entry (and its session's place in the index)
  many.remember("m998", "step", "other", Promise.resolve({ pad: "" }));
  many.forgetSession("s998");
  expect(many.get("m998")).toBeDefined();
  many.forgetSession("other");
  expect([many.get("m998"), many.sessions]).toEqual([undefined, 98]);
});

test("a step resent after its session closed is not answered from memory", async () => {
  const runtime = await EnvRuntime.start({ envs: [FIXTURES], workers: 0 });
  const server = new BridgeServer({ runtime, endpoint: "tcp://127.0.0.1:*", logger: pino({ level: "silent" }) });
  await server.start();
  const sock = new Dealer({ receiveTimeout: 10_000 });
  sock.connect(server.endpoint);
  const ask = async (m: Record<string, unknown>) => {
    await sock.send(encodeFrame({ v: PROTOCOL_VERSION, ...m }));
    const [b] = await sock.receive();
    return decodeFrame(b!) as { ok: boolean; result?: { session_id?: string }; error?: { code: string } };
  };
  try {
    const r = await ask({ id: 1, op: "reset", scenario_id: "notes-1", seed: 1 });
    const sid = r.result!.session_id!;
    const step = { id: 2, op: "step", session_id: sid, action: { name: "list_notes", arguments: { user_id: "u1" } } };
    expect((await ask(step)).ok).toBe(true);
    expect((await ask(step)).ok).toBe(true); // a retry while the session is open: the remembered reply
    expect((await ask({ id: 3, op: "close", session_id: sid })).ok).toBe(true);
    expect(await ask(step)).toMatchObject({ ok: false, error: { code: "session_closed" } });
  } finally {
    sock.close();
    await server.stop();
    await runtime.close();
  }
});

test("recording_unavailable names no server path", async () => {
  const dir = mkdtempSync(join(tmpdir(), "rec-path-"));
  const rt = await EnvRuntime.start({ envs: [FIXTURES], recorder: new TrajectoryWriter(join(dir, "a.jsonl"), { reserveBytes: Number.MAX_SAFE_INTEGER }) });
  try {
    const e = await rt.reset("notes-1", 1).then(() => null, (x: Error & { code: string }) => x);
    expect(e).toMatchObject({ code: "recording_unavailable" });
    expect(e!.message).not.toContain(dir);
    expect(e!.message).not.toMatch(/\/tmp\//);
  } finally {
    await rt.close();
  }
});

test("closed episodes' sandboxes are kept for reuse only up to RECYCLED_MAX_TOTAL_BYTES", async () => {
  const { Episode } = await import("../../bridge/core/episode/episode.js");
  const { RECYCLED_MAX_TOTAL_BYTES } = await import("../../bridge/core/sandbox/sandbox-host.js");
  const { inlineBundle } = await import("../helpers.js");
  // each episode's wasm memory grows to ~48 MiB (a healthy instance, recycled on close) and stays so
  const bundle = inlineBundle("grow", "Grow", `class Grow { constructor(s) {} grow() { const a = []; for (let i = 0; i < 40; i++) a.push("x".repeat(1 << 20) + i); return a.length; } }`, ["grow"], {});
  const scenario = [...bundle.scenarios.values()][0]!;
  for (let i = 0; i < 8; i++) {
    const ep = new Episode({ sandboxes, bundle, scenario, seed: i, episodeId: `g${i}`, reference: () => Promise.reject(new Error("unused")) });
    await ep.reset();
    const r = await ep.step({ name: "grow", arguments: {} });
    expect(r.observation.content).toBe("40");
    ep.close();
  }
  expect(sandboxes.stats().recycled_bytes).toBeLessThanOrEqual(RECYCLED_MAX_TOTAL_BYTES);
  expect(sandboxes.stats().recycled_bytes).toBeGreaterThan(0);
}, 120_000);
