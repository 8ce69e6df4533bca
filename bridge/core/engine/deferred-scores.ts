import type { StepResult } from "../episode/episode.js";
import type { EpisodeRecord } from "./records.js";
import { RuntimeError } from "./runtime-error.js";

/** An episode ended by EnvRuntime.finishLater whose score is on its way. */
export interface PendingScore {
  rec: EpisodeRecord;
  /** Settles with the score (or the reason there is none) when the engine has scored it. */
  result: Promise<StepResult>;
  /** A client asked for it: the engine was told to score it now. */
  urgent: boolean;
}

export interface DeferredScoresOptions {
  /** Scores on their way at once; past it, a reset scores the episode it ends in line. */
  maxPending: number;
  /** Scores kept after they arrive, for a client that asks later; the oldest go first. */
  kept: number;
}

/**
 * The scores of episodes a reset ended without waiting for them (EnvRuntime.finishLater): pending
 * until their engine has scored them, then kept for `EnvRuntime.result` up to a bound. Both bounds
 * keep a client that never asks from growing the replica: past the pending one a reset waits for
 * a score to arrive (backpressure at the scorer's pace, adding no work beside it), the kept one
 * forgets the oldest results.
 */
export class DeferredScores {
  private readonly pending = new Map<string, PendingScore>();
  private readonly done = new Map<string, StepResult | RuntimeError>();
  /** Told when a pending score arrives (see whenRoom). */
  private waiters: (() => void)[] = [];

  constructor(readonly options: DeferredScoresOptions) {}

  get full(): boolean {
    return this.pending.size >= this.options.maxPending;
  }

  /** Tracks `result` until it settles, then keeps what it gave. */
  add(rec: EpisodeRecord, result: Promise<StepResult>): PendingScore {
    const p: PendingScore = { rec, result, urgent: false };
    this.pending.set(rec.id, p);
    const keep = (r: StepResult | RuntimeError) => {
      this.pending.delete(rec.id);
      const waiting = this.waiters;
      this.waiters = [];
      for (const w of waiting) w();
      this.done.set(rec.id, r);
      if (this.done.size > this.options.kept) this.done.delete(this.done.keys().next().value!);
    };
    result.then(keep, (e: unknown) => keep(e instanceof RuntimeError ? e : new RuntimeError("internal_error", e instanceof Error ? e.message : String(e))));
    return p;
  }

  /** Settles once fewer than `maxPending` scores are on their way (at once when that is so now). */
  async whenRoom(): Promise<void> {
    while (this.full) await new Promise<void>((resolve) => this.waiters.push(resolve));
  }

  findPending(episodeId: string): PendingScore | undefined {
    return this.pending.get(episodeId);
  }

  /** A result that arrived: the score, or the error it ended with; undefined when none is kept. */
  findDone(episodeId: string): StepResult | RuntimeError | undefined {
    return this.done.get(episodeId);
  }
}
