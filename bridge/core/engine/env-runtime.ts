import { randomUUID } from "node:crypto";
import { EnvRegistry } from "../../../envs/format/registry.js";
import type { EpisodeInputs, ResetInfo, StepResult } from "../episode/episode.js";
import { openingTools, toolsNamed } from "../episode/opening-tools.js";
import { MAX_CALLS_PER_ACTION } from "../sandbox/limits.js";
import { MAX_ACTION_DEPTH } from "../episode/action-limits.js";
import { EnginePool } from "./engine-pool.js";
import { EpisodeTable } from "./episode-table.js";
import type { RequestFields } from "./messages.js";
import type { EpisodeRecord } from "./records.js";
import { Restarter, type RestartCounters } from "./restarter.js";
import { EpisodeLostError, RuntimeError } from "./runtime-error.js";
import { SnapshotStore } from "./snapshot-store.js";
import { DeferredScores } from "./deferred-scores.js";
import type { ForkResult, ResetResult, RuntimeOptions } from "./runtime-options.js";

export { RuntimeError } from "./runtime-error.js";
export type { ForkResult, ResetResult, RuntimeOptions } from "./runtime-options.js";

/**
 * The library entry point: episodes of the bundled scenarios, run in sandboxes in this thread
 * (`workers: 0`) or on engine worker threads. Every guest call ends at its deadline by itself (the
 * sandbox's fuel checks reach into native builtins too). As a backstop, a watchdog stops a worker
 * whose guest call still overran its deadline by the grace; that call's episode ends with
 * `env_timeout`, and every other episode on the worker is restored on a fresh one from its last
 * checkpoint (see checkpointEvery) by re-executing its inputs since, which the sandbox's seeded
 * randomness and virtual clock make exact.
 *
 * A façade: the engines and where episodes run are the EnginePool's, the watchdog, recovery,
 * quarantine and restart budget the Restarter's, episode records, checkpoints and recording the
 * EpisodeTable's, snapshots and their limits the SnapshotStore's. What is here is the order of
 * each operation's steps and its recorded trajectory.
 */
export class EnvRuntime {
  readonly registry: EnvRegistry;
  private readonly pool: EnginePool;
  private readonly table: EpisodeTable;
  private readonly snapshots: SnapshotStore;
  private readonly restarter: Restarter;
  private readonly scores: DeferredScores;
  /** `replayed_steps`: actions re-run by restores (those since each restored episode's checkpoint). */
  readonly counters: RestartCounters;

  private constructor(private readonly options: RuntimeOptions) {
    this.registry = EnvRegistry.load(options.envs);
    const o = this.limits();
    const user = options.user ?? null;
    this.pool = new EnginePool({
      registry: this.registry, envs: options.envs, workers: options.workers === 0 ? 0 : Math.max(1, options.workers ?? 1), warmSessions: options.warmSessions ?? 0,
      onExit: (engine) => void this.restarter.recover(engine, null), callMonitor: options.callMonitor, scorerThread: options.scorerThread ?? false,
    });
    this.table = new EpisodeTable({ recorder: options.recorder ?? null, maxActionBytes: o.max_action_bytes, maxEpisodeInputBytes: o.max_episode_input_bytes, checkpointEvery: options.checkpointEvery ?? 64 });
    this.snapshots = new SnapshotStore({ registry: this.registry, perEpisode: o.max_snapshots_per_episode, totalBytes: o.max_snapshot_bytes, user }, this.pool, this.table);
    this.restarter = new Restarter(
      { hardStopGraceMs: options.hardStopGraceMs ?? 1000, maxRestartsPerMinute: options.maxRestartsPerMinute ?? 10, quarantineAfter: o.quarantine_after, user, onHardStop: options.onHardStop },
      this.pool, this.table, this.snapshots,
    );
    this.counters = this.restarter.counters;
    this.scores = new DeferredScores({ maxPending: options.maxPendingScores ?? 1024, kept: options.keptScores ?? 1024 });
  }

  static async start(options: RuntimeOptions): Promise<EnvRuntime> {
    const rt = new EnvRuntime(options);
    try {
      await rt.pool.ready;
    } catch (e) {
      await rt.close();
      throw e;
    }
    for (const engine of rt.pool.engines) rt.restarter.watch(engine);
    return rt;
  }

  /** Takes the episode out (its snapshots are dropped with it). */
  private forget(rec: EpisodeRecord): void {
    this.table.remove(rec);
    this.snapshots.dropOwnedBy(rec);
  }

  /** Starts an episode of a scenario. The seed defaults to a random one, reported in info. */
  async reset(scenarioId: string, seed?: number, episodeId: string = randomUUID()): Promise<ResetResult> {
    const found = this.registry.scenario(scenarioId);
    if (!found) throw new RuntimeError("unknown_scenario", `no scenario ${scenarioId}`);
    const quarantine = this.restarter.quarantine(scenarioId);
    if (quarantine) throw new RuntimeError("scenario_quarantined", quarantine);
    this.table.recordable();
    if (this.table.has(episodeId)) throw new RuntimeError("bad_request", `episode ${episodeId} already exists`);
    const s = seed ?? Math.floor(Math.random() * 2 ** 31);
    const rec = this.table.add(episodeId, this.pool.leastLoaded(), { env_id: found.bundle.id, scenario_id: scenarioId, seed: s, actions: [], user_replies: [] });
    try {
      const lean = await this.pool.request(rec, "reset", { scenario_id: scenarioId, seed: s, user: this.options.user ?? null });
      // the engine leaves out what the manifest says (see EngineHost): put it back in its place
      const { episode_id, env_id, scenario_id, mode, seed: episodeSeed, ...rest } = lean.info;
      const { manifest } = found.bundle;
      const info: ResetInfo = { episode_id, env_id, scenario_id, mode, seed: episodeSeed, introduction: manifest.introduction, rules: manifest.rules, tools: openingTools(found.bundle, found.scenario), ...rest };
      rec.stateHash = info.state_hash;
      rec.opening = { observation: lean.observation, introduction: info.introduction, rules: info.rules, tools: info.tools, env_hash: info.env_hash, scenario_hash: info.scenario_hash };
      this.table.record({
        t: "episode_start", episode_id: episodeId, env_id: info.env_id, scenario_id: info.scenario_id, seed: info.seed, env_hash: info.env_hash, scenario_hash: info.scenario_hash,
        state_hash: info.state_hash, observation: lean.observation, introduction: info.introduction, rules: info.rules, tools: info.tools, user_replies: rec.inputs.user_replies, time: new Date().toISOString(),
      });
      return { episode_id: episodeId, observation: lean.observation, info };
    } catch (e) {
      this.forget(rec);
      throw e;
    }
  }

  async step(episodeId: string, action: unknown): Promise<StepResult> {
    const rec = this.table.get(episodeId);
    this.table.recordable();
    this.table.admit(rec, action);
    const started = performance.now();
    const repliesBefore = rec.inputs.user_replies.length;
    let result: StepResult;
    try {
      result = await this.pool.request(rec, "step", { action });
    } catch (e) {
      // the episode was lost with its worker: the first step after says so as its terminal step
      if (!(e instanceof EpisodeLostError)) throw e;
      result = this.table.deathStep(rec);
    }
    rec.inputs.actions.push(action);
    rec.stateHash = result.info.state_hash;
    if (this.table.recording) {
      const { info: i } = result;
      this.table.record({
        t: "step", episode_id: episodeId, step: i.step, action, observation: result.observation, reward: result.reward, terminated: result.terminated, truncated: result.truncated,
        state_hash: i.state_hash, diff: i.diff, tool_calls: i.tool_calls, user_replies: rec.inputs.user_replies.slice(repliesBefore), end_reason: i.end_reason, reward_info: i.reward_info, error: i.error,
        ms: Math.round((performance.now() - started) * 1000) / 1000,
      });
      if (result.terminated || result.truncated) this.table.record({ t: "episode_end", episode_id: episodeId, how: "terminal" });
    }
    if (result.terminated || result.truncated) rec.ended = true;
    else this.table.maybeCheckpoint(rec);
    return result;
  }

  /** Ends the episode now and scores it (evaluation harnesses, tests without a simulated user). */
  async finish(episodeId: string): Promise<StepResult> {
    const rec = this.table.get(episodeId);
    this.table.recordable();
    const result = await this.pool.request(rec, "finish", {});
    if (!rec.ended) {
      this.recordFinish(episodeId, result);
      rec.ended = true;
    }
    return result;
  }

  /** The trajectory record of an episode ended by the client (`finish`, or a reset's finish_previous), with its score. */
  private recordFinish(episodeId: string, r: StepResult, strict = true): void {
    const { info: i } = r;
    this.table.record({
      t: "episode_end", episode_id: episodeId, how: "finish",
      result: {
        step: i.step, observation: r.observation, reward: r.reward, terminated: r.terminated, truncated: r.truncated,
        state_hash: i.state_hash, diff: i.diff, tool_calls: i.tool_calls, end_reason: i.end_reason, reward_info: i.reward_info, error: i.error,
      },
    }, strict);
  }

  /**
   * finishLater once there is room (fewer than `maxPendingScores` scores on their way): a client
   * that resets faster than its episodes are scored is slowed to the scorer's pace, rather than
   * queueing without end or scoring in line beside the scorer (two threads' work on the same
   * cores). The room is taken in the same turn as it is seen, so many resets released by one
   * arriving score cannot all see it: the rest wait again. Null when the episode is not running
   * (it ended, died or is unknown): `finish` says which.
   */
  async finishLaterWhenRoom(episodeId: string): Promise<{ step: number; state_hash: string } | null> {
    for (;;) {
      const rec = this.table.find(episodeId);
      if (rec === undefined || rec.ended || rec.dead) return null;
      if (!this.scores.full) return this.finishLater(episodeId);
      await this.scores.whenRoom();
    }
  }

  /**
   * Ends the episode now, as `finish` does, without waiting for its score: its engine scores it
   * once it has nothing else in hand (yielding to requests between checks), or at once when
   * `result` asks. Returns at once with what the end is known by (its step, its state hash); the
   * episode leaves the table now (its snapshots are dropped, as a close drops them) and its end is
   * recorded when the score arrives. A reset of a live episode thus replies without the scoring.
   */
  finishLater(episodeId: string): { step: number; state_hash: string } {
    const rec = this.table.get(episodeId);
    if (rec.ended) throw new RuntimeError("episode_done", `episode ${episodeId} has ended`);
    this.table.recordable();
    this.forget(rec);
    rec.ended = true;
    // both posted now, in this order; the engine holds the score until it is idle
    const ended = this.pool.request(rec, "finish_later", {});
    const scored = this.pool.request(rec, "score", { urgent: false });
    const result = Promise.all([ended, scored]).then(([, r]) => {
      // as a close's: written whatever happens (a failing writer refuses new work itself)
      this.recordFinish(episodeId, r, false);
      return r;
    });
    this.scores.add(rec, result);
    return { step: rec.inputs.actions.length, state_hash: rec.stateHash };
  }

  /**
   * The score of an episode ended by finishLater: waits for it (telling its engine to score it now
   * if it has not yet). Refused (`bad_request`) for an episode this runtime did not end that way,
   * or whose score is no longer kept (`keptScores`).
   */
  async result(episodeId: string): Promise<StepResult> {
    const pending = this.scores.findPending(episodeId);
    if (pending) {
      if (!pending.urgent) {
        pending.urgent = true;
        // its reply is the same score the pending request gets; a score already done answers unknown_episode
        void this.pool.request(pending.rec, "score", { urgent: true }).catch(() => undefined);
      }
      return pending.result;
    }
    const done = this.scores.findDone(episodeId);
    if (done instanceof RuntimeError) throw done;
    if (done) return done;
    throw new RuntimeError("bad_request", `no score of episode ${episodeId} is kept here: it was not ended by a reset with finish_previous "later" on this replica, or its score is among the oldest beyond the ${this.scores.options.kept} kept (kept_scores)`);
  }

  /** The episode's current state as JSON text. */
  async state(episodeId: string): Promise<string> {
    return this.pool.request(this.table.get(episodeId), "state", {});
  }

  /** The hash of the episode's state after its last acknowledged step. */
  stateHash(episodeId: string): string {
    return this.table.get(episodeId).stateHash;
  }

  /** The inputs that reproduce the episode exactly (scenario, seed, actions, simulated user replies). */
  inputs(episodeId: string): EpisodeInputs {
    return structuredClone(this.table.get(episodeId).inputs);
  }

  /**
   * Freezes the episode now: a copy of its sandbox and host state kept in its engine worker until
   * dropped (or the episode closes). Bounded per episode and in total; over a bound: `too_large`.
   */
  async snapshot(episodeId: string): Promise<{ snapshot_id: string; step: number; bytes: number; state_hash: string }> {
    return this.snapshots.take(this.table.get(episodeId));
  }

  /**
   * A new episode that continues from a live episode (its state now) or from a snapshot: same
   * state, RNG position, virtual clock, step count and conversation. Given the same actions it
   * gives the same observations, rewards and state hashes as its source would.
   */
  async fork(source: { episode_id: string } | { snapshot_id: string }, episodeId: string = randomUUID()): Promise<ForkResult> {
    if (this.table.has(episodeId)) throw new RuntimeError("bad_request", `episode ${episodeId} already exists`);
    let rec: EpisodeRecord;
    let fields: RequestFields<"fork">;
    let from: ForkResult["forked_from"];
    if ("snapshot_id" in source) {
      const snap = this.snapshots.usable(source.snapshot_id);
      rec = this.table.add(episodeId, snap.engine, structuredClone(snap.inputs), snap.opening);
      fields = { from_snapshot: snap.id };
      from = { snapshot_id: snap.id, step: snap.step };
    } else {
      const parent = this.table.get(source.episode_id);
      const live = await this.pool.liveEngine(parent);
      if (!live) throw new RuntimeError(parent.dead?.code ?? "closed", parent.dead?.message ?? "the runtime is closed");
      rec = this.table.add(episodeId, live, structuredClone(parent.inputs), parent.opening);
      fields = { from_episode: parent.id };
      from = { episode_id: parent.id, step: rec.inputs.actions.length };
    }
    const { inputs, opening } = rec;
    try {
      const value = await this.pool.request(rec, "fork", fields);
      rec.stateHash = value.state_hash;
      from.step = value.step;
      const bundle = this.registry.scenario(inputs.scenario_id)?.bundle;
      const tools = bundle ? toolsNamed(bundle, value.tool_names) : [];
      this.table.record({
        t: "episode_start", episode_id: episodeId, env_id: inputs.env_id, scenario_id: inputs.scenario_id, seed: inputs.seed, state_hash: value.state_hash,
        ...opening, forked_from: from, prefix_actions: inputs.actions, user_replies: inputs.user_replies, time: new Date().toISOString(),
      });
      return { episode_id: episodeId, step: value.step, state_hash: value.state_hash, env_id: inputs.env_id, scenario_id: inputs.scenario_id, seed: inputs.seed, tools, forked_from: from };
    } catch (e) {
      this.forget(rec);
      throw e;
    }
  }

  /** Puts the episode back to a snapshot's point (any snapshot of this runtime): the same as closing it and forking the snapshot under its id. */
  async restoreSnapshot(episodeId: string, snapshotId: string): Promise<ForkResult> {
    // checked before the episode is closed: a snapshot lost with its worker must not take the episode with it
    this.snapshots.usable(snapshotId);
    const rec = this.table.get(episodeId);
    // the episode's own snapshots outlive this (a restore is how one goes back to them)
    const kept = rec.snapshots;
    rec.snapshots = new Set();
    await this.closeEpisode(episodeId);
    const result = await this.fork({ snapshot_id: snapshotId }, episodeId);
    const next = this.table.get(episodeId);
    for (const s of kept) s.owner = next;
    next.snapshots = kept;
    return result;
  }

  /** What a held snapshot is of (null: dropped, or never taken), so a front can check it before restoring. */
  snapshotInfo(snapshotId: string): { scenario_id: string; episode_id: string; step: number; state_hash: string; bytes: number } | null {
    return this.snapshots.info(snapshotId);
  }

  /**
   * A snapshot as bytes another replica can import (see snapshot-blob.ts): a held snapshot, or the
   * episode as it is now (no snapshot is kept for that). `version` is the bridge's own version,
   * written into the blob so another version refuses it. Over `maxBlobBytes`: too_large.
   */
  async exportSnapshot(source: { episode_id: string } | { snapshot_id: string }, options: { version: string; maxBlobBytes: number }): ReturnType<SnapshotStore["exportBlob"]> {
    return this.snapshots.exportBlob(source, options);
  }

  /**
   * Holds a snapshot exported by another replica (of this bridge version and env bundle) as a new
   * snapshot of this runtime, to fork or restore from. Everything the blob says is checked before
   * it costs anything (snapshot-blob.ts; the image against this engine's, in EngineHost); the
   * limits are those of snapshots: `holder` (a client connection) may hold `maxSnapshotsPerEpisode`
   * imports at once, and they count against `maxSnapshotBytes`. An import lives until dropped, or
   * until `dropIdleImports` finds it unused (the server's idle reaper).
   */
  async importSnapshot(blob: Uint8Array, options: { version: string; holder: string; maxBlobBytes: number }): Promise<{ snapshot_id: string; scenario_id: string; step: number; bytes: number; state_hash: string }> {
    return this.snapshots.importBlob(blob, options);
  }

  /** Drops imported snapshots unused (no fork, restore or export) for `idleMs`; returns how many. */
  async dropIdleImports(idleMs: number): Promise<number> {
    return this.snapshots.dropIdleImports(idleMs);
  }

  async dropSnapshot(snapshotId: string): Promise<boolean> {
    return this.snapshots.drop(snapshotId);
  }

  async closeEpisode(episodeId: string): Promise<void> {
    const rec = this.table.find(episodeId);
    if (!rec) return;
    this.forget(rec);
    // a close goes ahead even when its record cannot be written (the writer is then unhealthy and refuses new work)
    if (!rec.ended) this.table.record({ t: "episode_end", episode_id: episodeId, how: "closed" }, false);
    const engine = await this.pool.liveEngine(rec);
    if (engine) await engine.post(rec, "close", {});
  }

  /** The episode limits in force (defaults filled in), as `hello` reports them. */
  limits(): { max_action_bytes: number; max_action_depth: number; max_calls_per_action: number; max_episode_input_bytes: number; max_snapshots_per_episode: number; max_snapshot_bytes: number; quarantine_after: number } {
    const o = this.options;
    return {
      max_action_depth: MAX_ACTION_DEPTH,
      max_calls_per_action: MAX_CALLS_PER_ACTION,
      max_action_bytes: o.maxActionBytes ?? 1 << 20,
      max_episode_input_bytes: o.maxEpisodeInputBytes ?? 64 << 20,
      max_snapshots_per_episode: o.maxSnapshotsPerEpisode ?? 32,
      max_snapshot_bytes: o.maxSnapshotBytes ?? 1 << 30,
      quarantine_after: o.quarantineAfter ?? 2,
    };
  }

  stats(): {
    episodes: number;
    workers: number[];
    hard_stops: number;
    restored: number;
    lost: number;
    replayed_steps: number;
    snapshots: number;
    snapshot_bytes: number;
    quarantined: string[];
  } {
    return { episodes: this.table.size, workers: this.pool.engines.map((e) => e.episodes.size), ...this.counters, snapshots: this.snapshots.count, snapshot_bytes: this.snapshots.bytes, quarantined: this.restarter.quarantinedScenarios };
  }

  async close(): Promise<void> {
    if (this.pool.closed) return;
    this.restarter.close();
    await this.pool.close();
  }
}

export { jsonSizeUpTo } from "../episode/action-limits.js";
