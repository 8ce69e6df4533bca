import type { EnvRuntime } from "../engine/env-runtime.js";
import { failureOf } from "./failure-table.js";

/** A point an episode can go back to: the snapshot taken after `step` steps. */
export interface UndoPoint {
  step: number;
  snapshot_id: string;
}

/**
 * The undo points of one session's episode, oldest first: a snapshot taken before each step (and
 * before a finish), held so the session can go back to any of them or branch from it. Owns its
 * snapshots: what it forgets it drops from the runtime. The runtime bounds snapshots per episode
 * and in total; a point over a bound is not taken, and the step says it cannot be undone.
 */
export class UndoPoints {
  private points: UndoPoint[] = [];

  constructor(private readonly rt: Pick<EnvRuntime, "snapshot" | "dropSnapshot">) {}

  get steps(): number[] {
    return this.points.map((p) => p.step);
  }

  /** Snapshots the episode at `step` before a step or finish; a refused snapshot (`too_large`: over a limit) is reported, not thrown. */
  async take(episodeId: string, step: number): Promise<{ taken: string | null; error?: { code: string; message: string } }> {
    try {
      const s = await this.rt.snapshot(episodeId);
      this.points.push({ step, snapshot_id: s.snapshot_id });
      return { taken: s.snapshot_id };
    } catch (e) {
      const f = failureOf(e);
      if (f.code === "too_large") return { taken: null, error: { code: f.code, message: `this step cannot be undone: ${f.message}` } };
      throw e;
    }
  }

  /** The step did not happen (the runtime refused it): its point goes too. */
  async untake(taken: string | null): Promise<void> {
    if (!taken) return;
    this.points = this.points.filter((p) => p.snapshot_id !== taken);
    await this.rt.dropSnapshot(taken).catch(() => undefined);
  }

  /** Where the point of `step` is (the last one when `step` is undefined), or -1. */
  indexOf(step?: number): number {
    return step === undefined ? this.points.length - 1 : this.points.findIndex((p) => p.step === step);
  }

  at(index: number): UndoPoint | undefined {
    return this.points[index];
  }

  /** The point of `step`, if held. */
  find(step: number): UndoPoint | undefined {
    return this.points.find((p) => p.step === step);
  }

  /** Forgets the point at `index` without dropping its snapshot (the runtime lost it already). */
  lost(index: number): void {
    this.points.splice(index, 1);
  }

  /** Forgets the point at `index` and every later one, dropping their snapshots: going forward again is playing again. */
  async dropFrom(index: number): Promise<void> {
    for (const p of this.points.splice(index)) await this.rt.dropSnapshot(p.snapshot_id).catch(() => undefined);
  }

  describe(): string {
    return this.points.map((p) => p.step).join(", ") || "none";
  }
}
