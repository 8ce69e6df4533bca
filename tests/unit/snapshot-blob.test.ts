// Snapshots moved between runtimes as bytes (export_snapshot / import_snapshot): an imported
// snapshot's forks continue exactly as the source does, and a blob that is not one of ours, from
// another version or env, corrupted, tampered with or over a limit is refused with a typed error
// before it costs anything.
import { join } from "node:path";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { Dealer } from "zeromq";
import { BridgeClient, BridgeError } from "../../agent/bridge-client.js";
import { EnvRuntime } from "../../bridge/core/engine/env-runtime.js";
import { BridgeServer } from "../../bridge/fronts/zmq/bridge-server.js";
import { decodeSnapshotPayload, encodeSnapshotBlob, readSnapshotBlobHeader, type SnapshotBlobHeader, type SnapshotPayload } from "../../bridge/core/engine/snapshot-blob.js";
import { decodeFrame, encodeFrame } from "../../protocol/codec.js";
import { PROTOCOL_VERSION, RESULT_SCHEMAS } from "../../protocol/messages.js";

const ENVS = join(import.meta.dirname, "..", "..", "envs");
const V = "0.1.0";
const MAX = 8 << 20;
const silent = pino({ level: "silent" });

/** The blob with its header changed (the payload and its digest kept). */
function withHeader(blob: Buffer, change: (h: SnapshotBlobHeader) => void): Buffer {
  const { header, body } = readSnapshotBlobHeader(blob);
  change(header);
  const head = encodeFrame(header);
  const prefix = Buffer.from(blob.subarray(0, 11));
  prefix.writeUInt32BE(head.length, 7);
  return Buffer.concat([prefix, head, body]);
}

/** The blob re-made with its payload changed (a well-formed blob of a tampered snapshot). */
function withPayload(blob: Buffer, change: (p: SnapshotPayload) => void, deflateAbove?: number): Buffer {
  const { header, body } = readSnapshotBlobHeader(blob);
  const payload = decodeSnapshotPayload(header, body);
  change(payload);
  const { format: _f, protocol_version: _p, raw_bytes: _r, encoding: _e, sha256: _s, ...rest } = header;
  return encodeSnapshotBlob(payload, rest, deflateAbove);
}

describe("snapshots moved between runtimes", () => {
  let a: EnvRuntime;
  let b: EnvRuntime;
  beforeAll(async () => {
    // two runtimes as two replicas are: engine worker threads of the same stack size
    [a, b] = await Promise.all([EnvRuntime.start({ envs: [ENVS], workers: 1 }), EnvRuntime.start({ envs: [ENVS], workers: 1, maxSnapshotsPerEpisode: 2, maxSnapshotBytes: 64 << 20 })]);
  });
  afterAll(async () => {
    await a?.close();
    await b?.close();
  });

  const trace = async (rt: EnvRuntime, id: string, actions: unknown[]): Promise<string[]> => {
    const out: string[] = [];
    for (const act of actions) {
      const r = await rt.step(id, act);
      out.push(`${r.observation.content}|${r.reward}|${r.terminated}|${r.info.state_hash}|${r.info.step}`);
      if (r.terminated || r.truncated) return out;
    }
    const f = await rt.finish(id);
    out.push(`finish|${f.reward}|${f.info.state_hash}|${JSON.stringify(f.info.reward_info)}`);
    return out;
  };

  test("library-1 exported at every step and forked in another runtime continues exactly; so does a held snapshot's export", async () => {
    const actions = a.registry.scenario("library-1")!.scenario.reference_actions!;
    for (let k = 0; k <= actions.length; k++) {
      const src = await a.reset("library-1", 9);
      for (const act of actions.slice(0, k)) await a.step(src.episode_id, act);
      const blob = await a.exportSnapshot({ episode_id: src.episode_id }, { version: V, maxBlobBytes: MAX });
      expect(blob).toMatchObject({ scenario_id: "library-1", step: k, state_hash: a.stateHash(src.episode_id), bytes: blob.blob.length });
      const imported = await b.importSnapshot(blob.blob, { version: V, holder: "c1", maxBlobBytes: MAX });
      expect(imported).toMatchObject({ step: k, state_hash: blob.state_hash });
      const fork = await b.fork({ snapshot_id: imported.snapshot_id });
      expect(fork).toMatchObject({ step: k, state_hash: blob.state_hash, scenario_id: "library-1", seed: 9 });
      expect(await trace(b, fork.episode_id, actions.slice(k))).toEqual(await trace(a, src.episode_id, actions.slice(k)));
      expect(await b.dropSnapshot(imported.snapshot_id)).toBe(true);
      await a.closeEpisode(src.episode_id);
      await b.closeEpisode(fork.episode_id);
    }
    // a held snapshot exports too, and a restore onto an imported snapshot works like any restore
    const src = await a.reset("library-2", 4);
    const acts = a.registry.scenario("library-2")!.scenario.reference_actions!;
    await a.step(src.episode_id, acts[0]);
    const snap = await a.snapshot(src.episode_id);
    await a.step(src.episode_id, acts[1]); // the episode moves on; the snapshot does not
    const blob = await a.exportSnapshot({ snapshot_id: snap.snapshot_id }, { version: V, maxBlobBytes: MAX });
    expect(blob.step).toBe(1);
    const imported = await b.importSnapshot(blob.blob, { version: V, holder: "c1", maxBlobBytes: MAX });
    const other = await b.reset("library-2", 4);
    await b.restoreSnapshot(other.episode_id, imported.snapshot_id);
    expect(b.stateHash(other.episode_id)).toBe(snap.state_hash);
    const want = await trace(a, (await a.fork({ snapshot_id: snap.snapshot_id })).episode_id, acts.slice(1));
    expect(await trace(b, other.episode_id, acts.slice(1))).toEqual(want);
    await b.dropSnapshot(imported.snapshot_id);
  });

  test("refused blobs: each with its typed error, the runtime unchanged", async () => {
    const src = await a.reset("library-1", 3);
    await a.step(src.episode_id, a.registry.scenario("library-1")!.scenario.reference_actions![0]);
    const { blob } = await a.exportSnapshot({ episode_id: src.episode_id }, { version: V, maxBlobBytes: MAX });
    const imp = (x: Uint8Array, o: Partial<{ version: string; holder: string; maxBlobBytes: number }> = {}) => b.importSnapshot(x, { version: V, holder: "c2", maxBlobBytes: MAX, ...o });
    const before = b.stats();

    await expect(imp(Buffer.from("not a snapshot at all"))).rejects.toMatchObject({ code: "bad_request", message: expect.stringContaining("not an EnvScaler snapshot") });
    const otherFormat = Buffer.from(blob);
    otherFormat[6] = 2;
    await expect(imp(otherFormat)).rejects.toMatchObject({ code: "snapshot_incompatible", message: expect.stringContaining("format 2") });
    await expect(imp(blob, { version: "0.0.9" })).rejects.toMatchObject({ code: "snapshot_incompatible", message: expect.stringContaining("0.0.9") });
    await expect(imp(withHeader(blob, (h) => (h.bundle_hash = "f".repeat(64))))).rejects.toMatchObject({ code: "snapshot_incompatible", message: expect.stringContaining("another bundle") });
    await expect(imp(withHeader(blob, (h) => (h.env_id = "nope-v1")))).rejects.toMatchObject({ code: "snapshot_incompatible", message: expect.stringContaining("not served") });
    // the size the payload claims is judged before it is inflated (a deflate bomb costs nothing)
    await expect(imp(withHeader(blob, (h) => (h.raw_bytes = 1 << 30)))).rejects.toMatchObject({ code: "too_large", message: expect.stringContaining("--max-snapshot-mb") });
    await expect(imp(blob, { maxBlobBytes: 100 })).rejects.toMatchObject({ code: "too_large", message: expect.stringContaining("max_snapshot_blob_bytes") });
    const corrupt = Buffer.from(blob);
    corrupt[corrupt.length - 10] = corrupt[corrupt.length - 10]! ^ 0xff;
    await expect(imp(corrupt)).rejects.toMatchObject({ code: "bad_request", message: expect.stringContaining("digest") });
    await expect(imp(blob.subarray(0, blob.length - 100))).rejects.toMatchObject({ code: "bad_request" });
    await expect(imp(withHeader(blob, (h) => (h.raw_bytes -= 1)))).rejects.toMatchObject({ code: "bad_request", message: expect.stringContaining("not the declared") });
    // a deflated payload (what a large snapshot gets) inflates only up to the size its header declared
    const deflated = withPayload(blob, () => undefined, 0);
    expect(readSnapshotBlobHeader(deflated).header.encoding).toBe("deflate");
    expect(deflated.length).toBeLessThan(blob.length);
    await expect(imp(withHeader(deflated, (h) => (h.raw_bytes -= 1)))).rejects.toMatchObject({ code: "bad_request", message: expect.stringContaining("does not inflate") });
    // tampered contents, in a well-formed blob: limits, memory layout, shape
    await expect(imp(withPayload(blob, (p) => (p.snapshot.image.limits.callTimeoutMs = 10 ** 9)))).rejects.toMatchObject({ code: "snapshot_incompatible", message: expect.stringContaining("limits") });
    await expect(imp(withPayload(blob, (p) => ((p.snapshot.image as { stackBytes: number }).stackBytes += 65536)))).rejects.toMatchObject({ code: "snapshot_incompatible", message: expect.stringContaining("stack") });
    await expect(imp(withPayload(blob, (p) => p.snapshot.image.machine.pages.push([p.snapshot.image.machine.memoryBytes, new Uint8Array(4096)])))).rejects.toMatchObject({ code: "bad_request", message: expect.stringContaining("outside") });
    await expect(imp(withPayload(blob, (p) => ((p.snapshot as unknown as { methods: unknown }).methods = 42)))).rejects.toMatchObject({ code: "bad_request", message: expect.stringContaining("methods") });
    expect(b.stats()).toEqual(before);

    const fromDeflated = await imp(deflated, { holder: "c4" });
    expect((await b.fork({ snapshot_id: fromDeflated.snapshot_id })).state_hash).toBe(a.stateHash(src.episode_id));
    await b.dropSnapshot(fromDeflated.snapshot_id);
    // limits shared with snapshots: imports per connection, and the snapshot memory
    const first = await imp(blob);
    const second = await imp(blob);
    await expect(imp(blob)).rejects.toMatchObject({ code: "too_large", message: expect.stringContaining("--max-snapshots") });
    const other = await imp(blob, { holder: "c3" }); // another connection has its own count
    expect(b.stats().snapshots).toBe(before.snapshots + 3);
    expect(b.stats().snapshot_bytes).toBe(before.snapshot_bytes + first.bytes + second.bytes + other.bytes);
    // unused imports are dropped by the idle sweep; used ones are kept
    await new Promise((r) => setTimeout(r, 30));
    await b.fork({ snapshot_id: first.snapshot_id });
    expect(await b.dropIdleImports(20)).toBe(2);
    await expect(b.fork({ snapshot_id: second.snapshot_id })).rejects.toMatchObject({ code: "unknown_snapshot" });
    expect(b.snapshotInfo(first.snapshot_id)).not.toBeNull();
    await b.dropSnapshot(first.snapshot_id);
    expect(b.stats().snapshot_bytes).toBe(before.snapshot_bytes);
  });
});

describe("export_snapshot / import_snapshot over the wire", () => {
  test("results fit their schemas; an import resent with its id is answered once; a blob over the frame is too_large; an idle import is reaped", async () => {
    const rt = await EnvRuntime.start({ envs: [ENVS] });
    // a frame of 256 KiB: library-1's ~0.4 MB sandbox does not fit as a blob
    const small = new BridgeServer({ runtime: rt, endpoint: "tcp://127.0.0.1:*", logger: silent, limits: { maxFrameBytes: 256 << 10 } });
    const rt2 = await EnvRuntime.start({ envs: [ENVS] });
    const s = new BridgeServer({ runtime: rt2, endpoint: "tcp://127.0.0.1:*", logger: silent, limits: { idleTimeoutS: 0.4 } });
    await Promise.all([small.start(), s.start()]);
    const c = new BridgeClient(s.endpoint, { timeoutMs: 10_000 });
    const cs = new BridgeClient(small.endpoint, { timeoutMs: 10_000 });
    const raw = new Dealer({ routingId: "fixed-identity", receiveTimeout: 5000 });
    raw.connect(s.endpoint);
    try {
      const hello = RESULT_SCHEMAS.hello.parse(await c.request("hello"));
      expect(hello.ops).toEqual(expect.arrayContaining(["export_snapshot", "import_snapshot"]));
      expect(hello.limits.max_snapshot_blob_bytes).toBe((8 << 20) - 4096);
      const { session_id } = await c.request<{ session_id: string }>("reset", { scenario_id: "library-1", seed: 2 });
      const exported = RESULT_SCHEMAS.export_snapshot.parse(await c.request("export_snapshot", { session_id }));
      const ask = async () => {
        await raw.send(encodeFrame({ v: PROTOCOL_VERSION, id: 77, op: "import_snapshot", blob: exported.blob }));
        const [frame] = await raw.receive();
        return decodeFrame(frame!) as { ok: boolean; result: { snapshot_id: string } };
      };
      const first = await ask();
      expect(first.ok).toBe(true);
      RESULT_SCHEMAS.import_snapshot.parse(first.result);
      expect((await ask()).result.snapshot_id).toBe(first.result.snapshot_id); // a retry: one import, not two
      expect(rt2.stats().snapshots).toBe(1);
      // the smaller replica cannot hand this episode out in one frame
      const { session_id: s2 } = await cs.request<{ session_id: string }>("reset", { scenario_id: "library-1", seed: 2 });
      const err = await cs.request("export_snapshot", { session_id: s2 }).catch((e: BridgeError) => e);
      expect(err).toMatchObject({ code: "too_large", message: expect.stringContaining("max_snapshot_blob_bytes") });
      // nobody uses the import: the idle reaper drops it (the session it came with is reaped too)
      for (let waited = 0; rt2.stats().snapshots > 0 && waited < 10_000; waited += 100) await new Promise((res) => setTimeout(res, 100));
      expect(rt2.stats().snapshots).toBe(0);
    } finally {
      raw.close();
      c.close();
      cs.close();
      await Promise.all([small.stop(), s.stop()]);
      await Promise.all([rt.close(), rt2.close()]);
    }
  });
});
