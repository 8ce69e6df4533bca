import { randomUUID } from "node:crypto";
import type { EnvRegistry } from "../../../envs/format/registry.js";
import { PROTOCOL_VERSION } from "../../../protocol/messages.js";
import type { UserSimulatorConfig } from "../episode/user-simulator.js";
import type { Engine } from "./engine.js";
import type { EnginePool } from "./engine-pool.js";
import type { EpisodeTable } from "./episode-table.js";
import type { EpisodeRecord, Opening, SnapshotRecord } from "./records.js";
import { RuntimeError } from "./runtime-error.js";
import { decodeSnapshotPayload, encodeSnapshotBlob, readSnapshotBlobHeader } from "./snapshot-blob.js";

export interface SnapshotStoreOptions {
  registry: EnvRegistry;
  /** Snapshots one episode (or one importing connection) may hold at once. */
  perEpisode: number;
  /** Memory all snapshots may hold together. @unit bytes */
  totalBytes: number;
  user: UserSimulatorConfig | null;
}

/**
 * The runtime's snapshots: which engine holds each and what restoring it would need, the limits
 * (per episode, per importer, in bytes: count and bytes are reserved before a copy is taken, so
 * concurrent requests cannot all pass a check none of them has counted yet), snapshots lost with
 * their worker, and snapshots imported from another replica (dropped when idle).
 */
export class SnapshotStore {
  private readonly byId = new Map<string, SnapshotRecord>();
  /** Bytes of the held snapshots (lost ones no longer count). */
  bytes = 0;
  /** Bytes reserved by snapshots being taken (see take()). */
  private reserved = 0;

  constructor(
    private readonly options: SnapshotStoreOptions,
    private readonly pool: EnginePool,
    private readonly table: EpisodeTable,
  ) {}

  /** Snapshots held (not lost). */
  get count(): number {
    return [...this.byId.values()].filter((s) => !s.lost).length;
  }

  /**
   * Freezes the episode now, in its engine, within the limits: over one, `too_large`. The size is
   * known once taken: what this episode's largest one took is reserved first (a sandbox's memory
   * only grows), then settled to the size taken; a copy that does not fit is dropped again.
   */
  async take(rec: EpisodeRecord): Promise<{ snapshot_id: string; step: number; bytes: number; state_hash: string }> {
    const { perEpisode, totalBytes: total } = this.options;
    // count and bytes are reserved in this turn, before the copy (atomically with respect to every other request)
    const held = [...rec.snapshots].filter((s) => !s.lost).length + (rec.snapshotsTaking ?? 0);
    if (held >= perEpisode) throw new RuntimeError("too_large", `the episode holds its limit of ${perEpisode} snapshots (serve --max-snapshots, maxSnapshotsPerEpisode); drop some`);
    const estimate = rec.lastSnapshotBytes ?? 0;
    const committed = this.bytes + this.reserved;
    if (committed + estimate > total || committed >= total) {
      throw new RuntimeError("too_large", `snapshots hold ${committed} bytes and this one needs about ${estimate}: over the limit of ${total} (serve --max-snapshot-mb, maxSnapshotBytes); drop some`);
    }
    this.reserved += estimate;
    rec.snapshotsTaking = (rec.snapshotsTaking ?? 0) + 1;
    const id = `snap-${randomUUID()}`;
    let value;
    try {
      value = await this.pool.request(rec, "snapshot", { snapshot: id });
    } finally {
      this.reserved -= estimate;
      rec.snapshotsTaking = (rec.snapshotsTaking ?? 1) - 1;
    }
    rec.lastSnapshotBytes = Math.max(rec.lastSnapshotBytes ?? 0, value.bytes);
    if (this.bytes + this.reserved + value.bytes > total) {
      const engine = await this.pool.liveEngine(rec);
      if (engine) await engine.post(rec, "drop_snapshot", { snapshot: id });
      throw new RuntimeError("too_large", `this snapshot takes ${value.bytes} bytes; with the ${this.bytes} held that is over the limit of ${total} (serve --max-snapshot-mb, maxSnapshotBytes); drop some`);
    }
    this.add({ id, engine: rec.engine, owner: rec, inputs: structuredClone(rec.inputs), opening: rec.opening, stateHash: value.state_hash, step: value.step, bytes: value.bytes });
    return { snapshot_id: id, step: value.step, bytes: value.bytes, state_hash: value.state_hash };
  }

  private add(snap: SnapshotRecord): void {
    this.byId.set(snap.id, snap);
    snap.owner.snapshots.add(snap);
    this.bytes += snap.bytes;
  }

  /** A snapshot that can be forked, restored or exported (an imported one counts as used now), or unknown_snapshot saying why not. */
  usable(snapshotId: string): SnapshotRecord {
    const snap = this.byId.get(snapshotId);
    if (!snap) throw new RuntimeError("unknown_snapshot", `no snapshot ${snapshotId} (dropped, or its episode closed)`);
    if (!this.held(snap)) throw new RuntimeError("unknown_snapshot", `snapshot ${snapshotId} was lost with its engine worker`);
    if (snap.imported) snap.imported.lastUsed = Date.now();
    return snap;
  }

  /** Whether the snapshot's image still exists: its engine worker was not stopped (nor is being stopped). */
  private held(snap: SnapshotRecord): boolean {
    return !snap.lost && snap.engine === snap.owner.engine && !snap.owner.dead && !snap.engine.stopping;
  }

  info(snapshotId: string): { scenario_id: string; episode_id: string; step: number; state_hash: string; bytes: number } | null {
    const snap = this.byId.get(snapshotId);
    return snap ? { scenario_id: snap.inputs.scenario_id, episode_id: snap.owner.id, step: snap.step, state_hash: snap.stateHash, bytes: snap.bytes } : null;
  }

  async drop(snapshotId: string): Promise<boolean> {
    const snap = this.byId.get(snapshotId);
    if (!snap) return false;
    this.byId.delete(snapshotId);
    snap.owner.snapshots.delete(snap);
    if (snap.lost) return true;
    this.bytes -= snap.bytes;
    if (this.held(snap)) await snap.engine.post(snap.owner, "drop_snapshot", { snapshot: snapshotId });
    return true;
  }

  /** Drops every snapshot the episode took (it is being closed). */
  dropOwnedBy(rec: EpisodeRecord): void {
    for (const snap of rec.snapshots) void this.drop(snap.id);
  }

  /** Marks the snapshots `engine` held as lost with it (they stop counting against the limits); returns how many. */
  lostWith(engine: Engine): number {
    let lost = 0;
    for (const snap of this.byId.values()) {
      if (snap.engine !== engine || snap.lost) continue;
      snap.lost = true;
      this.bytes -= snap.bytes;
      lost++;
    }
    return lost;
  }

  /** A held snapshot, or an episode as it is now, as a blob another replica can import (see EnvRuntime.exportSnapshot). */
  async exportBlob(source: { episode_id: string } | { snapshot_id: string }, options: { version: string; maxBlobBytes: number }): Promise<{ blob: Buffer<ArrayBuffer>; bytes: number; scenario_id: string; step: number; state_hash: string }> {
    let rec: EpisodeRecord;
    let opening: Opening | undefined;
    let snapshot: string | undefined;
    if ("snapshot_id" in source) {
      const snap = this.usable(source.snapshot_id);
      ({ owner: rec, opening, id: snapshot } = snap);
    } else {
      rec = this.table.get(source.episode_id);
      opening = rec.opening;
    }
    const portable = await this.pool.request(rec, "export_snapshot", snapshot === undefined ? {} : { snapshot });
    const found = this.options.registry.scenario(portable.scenarioId);
    if (!found) throw new RuntimeError("internal_error", `scenario ${portable.scenarioId} of a held episode is not served`);
    const blob = encodeSnapshotBlob(
      { snapshot: portable, opening: opening ?? null },
      { server_version: options.version, env_id: found.bundle.id, bundle_hash: found.bundle.contentHash, scenario_id: portable.scenarioId, step: portable.steps, state_hash: portable.stateHash },
    );
    if (blob.length > options.maxBlobBytes) throw new RuntimeError("too_large", `the snapshot is ${blob.length} bytes as a blob, over max_snapshot_blob_bytes (${options.maxBlobBytes}: the frame limit, serve --max-frame-bytes, less room for the envelope)`);
    return { blob, bytes: blob.length, scenario_id: portable.scenarioId, step: portable.steps, state_hash: portable.stateHash };
  }

  /** Holds a blob another replica exported as a new snapshot, once everything it says checks out (see EnvRuntime.importSnapshot). */
  async importBlob(blob: Uint8Array, options: { version: string; holder: string; maxBlobBytes: number }): Promise<{ snapshot_id: string; scenario_id: string; step: number; bytes: number; state_hash: string }> {
    if (blob.length > options.maxBlobBytes) throw new RuntimeError("too_large", `the blob is ${blob.length} bytes, over max_snapshot_blob_bytes (${options.maxBlobBytes})`);
    const { header, body } = readSnapshotBlobHeader(blob);
    const incompatible = (why: string) => new RuntimeError("snapshot_incompatible", `blob: ${why}`);
    if (header.protocol_version !== PROTOCOL_VERSION || header.server_version !== options.version) {
      throw incompatible(`written by bridge ${header.server_version} (protocol ${header.protocol_version}); this is bridge ${options.version} (protocol ${PROTOCOL_VERSION}): sandbox memory moves only between the same version`);
    }
    const found = this.options.registry.scenario(header.scenario_id);
    if (!found || found.bundle.id !== header.env_id) throw incompatible(`scenario ${header.scenario_id} of env ${header.env_id} is not served here`);
    if (found.bundle.contentHash !== header.bundle_hash) throw incompatible(`env ${header.env_id} here is another bundle (hash ${found.bundle.contentHash.slice(0, 12)}, the blob's ${header.bundle_hash.slice(0, 12)})`);
    const { perEpisode: perHolder, totalBytes: total } = this.options;
    const mine = [...this.byId.values()].filter((x) => x.imported?.holder === options.holder && !x.lost).length;
    if (mine >= perHolder) throw new RuntimeError("too_large", `this connection holds its limit of ${perHolder} imported snapshots (serve --max-snapshots, maxSnapshotsPerEpisode); drop some`);
    if (this.bytes + header.raw_bytes > total) throw new RuntimeError("too_large", `snapshots hold ${this.bytes} bytes; ${header.raw_bytes} more would pass the limit (serve --max-snapshot-mb, maxSnapshotBytes ${total}); drop some`);
    const payload = decodeSnapshotPayload(header, body);
    // no episode runs under this id: it orders the snapshot's requests on its engine and owns it
    const holder = this.table.add(`import-${randomUUID()}`, this.pool.leastLoaded(), payload.snapshot.inputs, undefined, false);
    holder.stateHash = header.state_hash;
    const id = `snap-${randomUUID()}`;
    const value = await this.pool.request(holder, "import_snapshot", { snapshot: id, from: payload.snapshot, user: this.options.user });
    this.add({
      id, engine: holder.engine, owner: holder, inputs: structuredClone(payload.snapshot.inputs), opening: (payload.opening as Opening | null) ?? undefined,
      stateHash: value.state_hash, step: value.step, bytes: value.bytes, imported: { holder: options.holder, lastUsed: Date.now() },
    });
    return { snapshot_id: id, scenario_id: header.scenario_id, step: value.step, bytes: value.bytes, state_hash: value.state_hash };
  }

  /** Drops imported snapshots unused (no fork, restore or export) for `idleMs`; returns how many. */
  async dropIdleImports(idleMs: number): Promise<number> {
    const cutoff = Date.now() - idleMs;
    const idle = [...this.byId.values()].filter((x) => x.imported && x.imported.lastUsed < cutoff);
    for (const x of idle) await this.drop(x.id);
    return idle.length;
  }
}
