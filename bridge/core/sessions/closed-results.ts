/** What is kept of a session once it closed: enough for a trainer that asks after the client left. */
export interface ClosedResult<Score = unknown> {
  session_id: string;
  rollout: string | null;
  scenario_id: string | null;
  seed: number | null;
  episode_id: string | null;
  steps: number;
  /** The score when the episode had ended (a terminal step, or the trainer's finish) before the close; null when it had not. */
  score: Score | null;
  closed: string;
  closed_at: number;
}

/** How many closed sessions' results are kept, and for how long (docs/mcp.md, "Results after a session closes"). */
export const RESULT_MEMORY = { maxCount: 10_000, ttlS: 3600 };

/**
 * The results of closed sessions by session id and rollout tag, the oldest dropped first once
 * there are `maxCount`, each dropped `ttlS` seconds after its close. Bounded both ways, so a
 * trainer that never asks costs a fixed amount of memory.
 */
export class ClosedResults<Score = unknown> {
  private readonly byId = new Map<string, ClosedResult<Score>>();
  private readonly byRollout = new Map<string, string>();

  constructor(private readonly limits = RESULT_MEMORY) {}

  add(r: ClosedResult<Score>): void {
    this.byId.set(r.session_id, r);
    if (r.rollout !== null) this.byRollout.set(r.rollout, r.session_id);
    while (this.byId.size > this.limits.maxCount) this.drop(this.byId.keys().next().value!);
  }

  /** By session id or rollout tag; null when unknown, dropped or expired. */
  get(idOrRollout: string, now = Date.now()): ClosedResult<Score> | null {
    this.expire(now);
    return this.byId.get(idOrRollout) ?? this.byId.get(this.byRollout.get(idOrRollout) ?? "") ?? null;
  }

  get size(): number {
    return this.byId.size;
  }

  private expire(now: number): void {
    const cutoff = now - this.limits.ttlS * 1000;
    // insertion order is close order: the expired ones are at the front
    for (const [id, r] of this.byId) {
      if (r.closed_at >= cutoff) break;
      this.drop(id);
    }
  }

  private drop(id: string): void {
    const r = this.byId.get(id);
    this.byId.delete(id);
    if (r?.rollout !== null && r?.rollout !== undefined && this.byRollout.get(r.rollout) === id) this.byRollout.delete(r.rollout);
  }
}
