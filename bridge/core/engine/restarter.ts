import type { UserSimulatorConfig } from "../episode/user-simulator.js";
import type { Engine, Pending } from "./engine.js";
import type { EnginePool } from "./engine-pool.js";
import type { EpisodeTable } from "./episode-table.js";
import type { SnapshotStore } from "./snapshot-store.js";
import { Watchdog } from "./watchdog.js";

/** What the restarter needs of the other parts (small, so a test can stand them in). */
export type RestarterPool = Pick<EnginePool, "closed" | "replace">;
export type RestarterTable = Pick<EpisodeTable, "restoreFields">;
export type RestarterSnapshots = Pick<SnapshotStore, "lostWith">;

export interface RestarterOptions {
  /** How long past a guest call's own deadline before the watchdog stops its worker. @unit ms */
  hardStopGraceMs: number;
  /** Restarts of one worker (at one place in the pool) allowed within a minute before its episodes are failed instead. */
  maxRestartsPerMinute: number;
  /** Hard stops one scenario may cause before it is quarantined. */
  quarantineAfter: number;
  user: UserSimulatorConfig | null;
  onHardStop?: (event: { scenario_id: string | null; episode_id: string | null; restoring: number; snapshots_lost: number }) => void;
}

/** `replayed_steps`: actions re-run by restores (those since each restored episode's checkpoint). */
export interface RestartCounters {
  hard_stops: number;
  restored: number;
  lost: number;
  replayed_steps: number;
}

/**
 * Keeps the engine workers going, in the manner of jupyter_client's KernelRestarter: a watchdog
 * over their guest calls, a replacement for a worker that is stuck or died, its episodes restored
 * there from their checkpoints, a restart budget per place in the pool (past it the episodes are
 * failed, not restored), and quarantine for a scenario whose env keeps causing hard stops.
 */
export class Restarter {
  readonly counters: RestartCounters = { hard_stops: 0, restored: 0, lost: 0, replayed_steps: 0 };
  private readonly watchdog: Watchdog;
  /** When the worker at each place in the pool was restarted, within the last minute. */
  private readonly restarts = new Map<number, number[]>();
  /** Hard stops per scenario, and the scenarios refused from then on (with why). */
  private readonly hardStopsOf = new Map<string, number>();
  private readonly quarantined = new Map<string, string>();
  private readonly unwatch = new Map<Engine, () => void>();

  constructor(
    private readonly options: RestarterOptions,
    private readonly pool: RestarterPool,
    private readonly table: RestarterTable,
    private readonly snapshots: RestarterSnapshots,
  ) {
    this.watchdog = new Watchdog(options.hardStopGraceMs);
  }

  /** Watches the engine's guest calls (an engine in this thread has no board: nothing could stop it). */
  watch(engine: Engine): void {
    if (!engine.board) return;
    const unwatch = this.watchdog.watch(engine.board, ({ owner }) => {
      if (engine.stopping || this.pool.closed) return;
      this.counters.hard_stops++;
      void this.recover(engine, owner);
    });
    this.unwatch.set(engine, unwatch);
  }

  /** Why resets of the scenario are refused, or undefined. */
  quarantine(scenarioId: string): string | undefined {
    return this.quarantined.get(scenarioId);
  }

  get quarantinedScenarios(): string[] {
    return [...this.quarantined.keys()];
  }

  /** Counts a restart at `index` now; false when that spends the budget (the episodes are then failed). */
  private budget(index: number): boolean {
    const now = Date.now();
    const recent = [...(this.restarts.get(index) ?? []).filter((t) => now - t < 60_000), now];
    this.restarts.set(index, recent);
    return recent.length <= this.options.maxRestartsPerMinute;
  }

  /**
   * One bad scenario must not cost its neighbours their worker: after `quarantineAfter` hard stops
   * its resets are refused (`scenario_quarantined`, with the reason) instead of killing the worker
   * again and again until the restart budget is spent on everyone.
   */
  noteHardStop(scenarioId: string): void {
    const n = (this.hardStopsOf.get(scenarioId) ?? 0) + 1;
    this.hardStopsOf.set(scenarioId, n);
    const limit = this.options.quarantineAfter;
    if (n >= limit && !this.quarantined.has(scenarioId)) {
      this.quarantined.set(scenarioId, `scenario ${scenarioId} is quarantined: its env made ${n} guest calls that ignored their deadline and had to be stopped by the watchdog (quarantineAfter ${limit}); fix the env and restart the bridge`);
    }
  }

  /**
   * Replaces a dead or stuck worker and restores its episodes, except `culprit`'s (the slot whose
   * call overran; null: the worker died by itself). Every request the old worker held is answered:
   * those of restored episodes are re-posted to the new worker behind their episode's restore (in
   * their order, without waiting here, so a slow or hanging re-run cannot hold up the others; if
   * the new worker is stopped too, its own recovery takes them over), and those of episodes closed
   * meanwhile are answered here.
   */
  async recover(engine: Engine, culprit: number | null): Promise<void> {
    this.unwatch.get(engine)?.();
    this.unwatch.delete(engine);
    await engine.stop();
    const replacement = this.pool.replace(engine);
    this.watch(replacement);
    let giveUp = !this.budget(engine.index);
    try {
      await replacement.ready;
    } catch {
      giveUp = true;
    }
    const unanswered = engine.takeUnanswered();
    const stuck = [...engine.episodes, ...unanswered.map((p) => p.episode)].find((rec) => rec.slot === culprit);
    if (stuck) this.noteHardStop(stuck.inputs.scenario_id);
    const snapshotsLost = this.snapshots.lostWith(engine);
    if (culprit !== null) {
      const restoring = giveUp ? 0 : [...engine.episodes].filter((rec) => rec !== stuck).length;
      this.options.onHardStop?.({ scenario_id: stuck?.inputs.scenario_id ?? null, episode_id: stuck?.id ?? null, restoring, snapshots_lost: snapshotsLost });
    }
    for (const p of unanswered) {
      if (engine.episodes.has(p.episode)) continue;
      // a closed episode's sandbox and snapshots went with the worker, which is what close and drop ask for
      if (p.op === "close" || p.op === "drop_snapshot") p.resolve({ id: 0, ok: true, value: p.op === "close" ? null : true });
      else p.resolve({ id: 0, ok: false, error: { code: "unknown_episode", message: `episode ${p.episode.id} was closed while this request waited on a stopped engine worker` } });
    }
    for (const rec of engine.episodes) {
      const mine = unanswered.filter((p) => p.episode === rec);
      // a restore that was itself interrupted is answered by this one
      const restores = mine.filter((p) => p.op === "restore");
      const waiting = mine.filter((p) => p.op !== "restore");
      if (rec.slot === culprit || giveUp) {
        rec.dead = rec.slot === culprit
          ? { code: "env_timeout", message: "a guest call ignored its deadline (a native builtin that cannot be interrupted); the episode was stopped" }
          : { code: "engine_unavailable", message: "the engine worker keeps failing; its episodes were dropped" };
        this.counters.lost++;
        rec.restores = (rec.restores ?? 0) + 1; // an interrupted restore's outcome no longer matters
        rec.restoring = undefined;
        // EnginePool.request turns these into the loss's error (or, for a step, its terminal step)
        for (const p of mine) p.resolve({ id: 0, ok: false, error: rec.dead });
        continue;
      }
      rec.engine = replacement;
      replacement.episodes.add(rec);
      const generation = (rec.restores = (rec.restores ?? 0) + 1);
      rec.restoring = replacement.post(rec, "restore", this.table.restoreFields(rec, this.options.user)).then((reply) => {
        for (const p of restores) p.resolve(reply);
        if (generation !== rec.restores) return; // a later recovery owns the episode now
        rec.restoring = undefined;
        if (!reply.ok) rec.dead = { code: "env_crashed", message: `lost with its engine worker and not restorable: ${reply.error.message}` };
        else {
          this.counters.restored++;
          this.counters.replayed_steps += reply.value.steps;
        }
      });
      // replies come back in posting order, so a failed restore has marked the episode dead by the
      // time the worker's refusals of the requests behind it arrive (EnginePool.request reports the loss)
      for (const p of waiting) repost(replacement, p);
    }
  }

  close(): void {
    this.watchdog.close();
  }
}

function repost(engine: Engine, p: Pending): void {
  void engine.post(p.episode, p.op, p.fields).then((reply) => p.resolve(reply));
}
