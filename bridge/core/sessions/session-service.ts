import type { EnvRuntime } from "../engine/env-runtime.js";
import { ClosedMemory } from "./closed-memory.js";
import { ClosedResults, type ClosedResult } from "./closed-results.js";
import { IdleReaper } from "./idle-reaper.js";
import { SessionQueue } from "./session-queue.js";
import { UndoPoints } from "./undo-points.js";
import { sessionGone } from "./unknowns.js";

/** One session of a front: its current episode, its request queue and who opened it; `extra` is the front's own part. */
export interface Session<X = unknown> {
  readonly id: string;
  /** The runtime episode currently played in this session; null before its first episode and after a failed re-reset. */
  episodeId: string | null;
  /** Requests on one session run one at a time, in arrival order; its last use is the reaper's. */
  readonly queue: SessionQueue;
  /** Who opened it (the wire's connection identity, the UI's page): sessions per owner are bounded. */
  readonly owner: string;
  /** A second name the session answers to (an MCP rollout tag), or null. */
  rollout: string | null;
  readonly opened: number;
  /** Set once the session is removed: a request that waited its turn finds it closed. */
  closed: boolean;
  /** The snapshots taken before each step, where the front offers undo (`undo: true`); else null. */
  readonly undo: UndoPoints | null;
  extra: X;
}

/** How a front words a session it does not hold (unknowns.ts raises the error) and refuses one over a limit. */
export interface SessionWords {
  /** What the front calls a session (the UI names its sessions by their episode). @default "session" */
  noun?: string;
  /** Appended to "no session ID" (e.g. " on replica 0"). */
  where: string;
  /** How a remembered close reads after the id ("was closed by …", "is closed: …"). */
  closed: (why: string) => string;
  /** Set when a session id can name a session lost with an earlier process: how it was lost. */
  lost?: (id: string) => string | undefined;
  /** The typed error of a refused open: over the total (`max_sessions`) or over one owner's share. */
  refuse: (scope: "total" | "owner", open: number, max: number) => Error;
}

export interface SessionServiceOptions {
  runtime: Pick<EnvRuntime, "closeEpisode" | "snapshot" | "dropSnapshot">;
  /** Sessions open at once, counting those being opened. */
  maxSessions: number;
  /** Sessions one owner may hold. @default maxSessions */
  maxPerOwner?: number;
  /** Requests that may wait on one session; one more is `overloaded`. @default unbounded */
  maxQueued?: number;
  /** How many closed ids (and rollout tags) are remembered with why they closed. 0: none. */
  closedMemory: number;
  /** Keep each closed session's result (closed-results.ts) for a trainer that asks later. */
  keepResults?: boolean;
  /** Each session holds undo points (undo-points.ts). */
  undo?: boolean;
  words: SessionWords;
}

/**
 * The sessions of one front, whatever the transport: session id (and rollout tag) → session and
 * its current episode, opening under the limits, per-session ordering, closing (the episode is
 * closed once, after the requests queued before the close), memory of why a session closed,
 * the idle reaper. The fronts decode, call this, and encode; each keeps only its own extra part.
 * Does not own the runtime.
 */
export class SessionService<X = unknown, Score = unknown> {
  private readonly sessions = new Map<string, Session<X>>();
  private readonly rollouts = new Map<string, string>();
  private readonly perOwner = new Map<string, number>();
  private readonly why: ClosedMemory;
  readonly results: ClosedResults<Score> | null;
  private reaper: IdleReaper | undefined;
  /** Opens under way: admitted, not yet added (counted against the limit). */
  opening = 0;

  constructor(private readonly options: SessionServiceOptions) {
    this.why = new ClosedMemory(options.closedMemory);
    this.results = options.keepResults ? new ClosedResults() : null;
  }

  get size(): number {
    return this.sessions.size;
  }

  get maxSessions(): number {
    return this.options.maxSessions;
  }

  /** Throws the front's refusal when one more session for `owner` would pass a limit. */
  admit(owner: string): void {
    const open = this.sessions.size + this.opening;
    if (open >= this.options.maxSessions) throw this.options.words.refuse("total", open, this.options.maxSessions);
    const held = this.perOwner.get(owner) ?? 0;
    const max = this.options.maxPerOwner ?? this.options.maxSessions;
    if (held >= max) throw this.options.words.refuse("owner", held, max);
  }

  /** Runs `fn` (an open that takes time: a reset, a handshake) holding a session slot, so concurrent opens cannot all pass the limit. */
  async reserving<T>(owner: string, fn: () => Promise<T>): Promise<T> {
    this.admit(owner);
    this.opening++;
    try {
      return await fn();
    } finally {
      this.opening--;
    }
  }

  /** Admits and adds a session at once. */
  open(id: string, owner: string, extra: X, episodeId: string | null = null): Session<X> {
    this.admit(owner);
    return this.add(this.make(id, owner, extra, episodeId));
  }

  /** A session not yet added (its queue already orders its requests: an open that starts its episode before the front answers). */
  make(id: string, owner: string, extra: X, episodeId: string | null = null): Session<X> {
    return {
      id, episodeId, queue: new SessionQueue(this.options.maxQueued), owner, rollout: null, opened: Date.now(), closed: false,
      undo: this.options.undo ? new UndoPoints(this.options.runtime) : null, extra,
    };
  }

  /** Adds a session already admitted (inside `reserving`), or made with `make`. */
  add(s: Session<X>): Session<X>;
  add(id: string, owner: string, extra: X, episodeId?: string | null): Session<X>;
  add(sOrId: Session<X> | string, owner = "", extra?: X, episodeId: string | null = null): Session<X> {
    const s = typeof sOrId === "string" ? this.make(sOrId, owner, extra as X, episodeId) : sOrId;
    this.sessions.set(s.id, s);
    if (s.rollout !== null) this.rollouts.set(s.rollout, s.id);
    this.perOwner.set(s.owner, (this.perOwner.get(s.owner) ?? 0) + 1);
    return s;
  }

  /** True when `name` is a live session's id or a rollout tag taken (by a live session or one being opened). */
  holds(name: string): boolean {
    return this.sessions.has(name) || this.rollouts.has(name);
  }

  /** Gives a session (live, or being opened) a rollout tag: taken from now on, and the session answers to it once added. */
  tag(s: Session<X>, rollout: string): void {
    s.rollout = rollout;
    this.rollouts.set(rollout, s.id);
  }

  /** Frees the tag of a session whose open failed. */
  untag(s: Session<X>): void {
    if (s.rollout !== null && this.rollouts.get(s.rollout) === s.id) this.rollouts.delete(s.rollout);
  }

  /** The live session by id or rollout tag, or undefined. */
  find(idOrRollout: string): Session<X> | undefined {
    return this.sessions.get(idOrRollout) ?? this.sessions.get(this.rollouts.get(idOrRollout) ?? "");
  }

  /** The live session by id or rollout tag, or the error saying why there is none (closed and why, lost, or unknown). */
  get(idOrRollout: string): Session<X> {
    const s = this.find(idOrRollout);
    if (s) return s;
    throw this.gone(idOrRollout);
  }

  /** Like `get`, and counts as a use (the reaper's clock). */
  use(idOrRollout: string): Session<X> {
    const s = this.get(idOrRollout);
    s.queue.lastUsed = Date.now();
    return s;
  }

  /** Why `idOrRollout` names no live session, as the front's typed error (unknowns.ts). */
  gone(idOrRollout: string): Error {
    const w = this.options.words;
    const why = this.why.get(idOrRollout);
    return sessionGone(idOrRollout, why === undefined ? undefined : w.closed(why), w.where, w.lost?.(idOrRollout), w.noun);
  }

  /** The live session whose current episode is `episodeId` (a snapshot's owner: the runtime drops a snapshot with its episode), or undefined. */
  holderOf(episodeId: string): Session<X> | undefined {
    return this.all().find((s) => s.episodeId === episodeId);
  }

  all(): Session<X>[] {
    return [...this.sessions.values()];
  }

  /** Runs `fn` on the session after its earlier requests; a session closed while the request waited answers as closed. */
  run<T>(idOrRollout: string, fn: (s: Session<X>) => T | Promise<T>): Promise<T> {
    let s: Session<X>;
    try {
      s = this.use(idOrRollout);
    } catch (e) {
      return Promise.reject(e instanceof Error ? e : new Error(String(e)));
    }
    return this.runOn(s, fn);
  }

  /** `run` on a session already in hand. */
  runOn<T>(s: Session<X>, fn: (s: Session<X>) => T | Promise<T>): Promise<T> {
    return s.queue.run(() => {
      if (s.closed) throw this.gone(s.id);
      s.queue.lastUsed = Date.now();
      return fn(s);
    });
  }

  /**
   * Ends the session's current episode without waiting for the runtime (a reset in the session
   * starts the next one: the close and the reset reach the engine in order). The episode is
   * forgotten first, so a failing close leaves nothing the next episode depends on.
   */
  endEpisode(s: Session<X>, onError: (e: unknown, episodeId: string) => void): string | null {
    const old = s.episodeId;
    if (old === null) return null;
    s.episodeId = null;
    this.options.runtime.closeEpisode(old).catch((e: unknown) => onError(e, old));
    return old;
  }

  /** Forgets a live session now (later requests find it closed, and why). Returns it if it was open. */
  remove(id: string, why: string): Session<X> | undefined {
    const s = this.sessions.get(id);
    if (!s) return undefined;
    s.closed = true;
    this.sessions.delete(id);
    const held = (this.perOwner.get(s.owner) ?? 1) - 1;
    if (held > 0) this.perOwner.set(s.owner, held);
    else this.perOwner.delete(s.owner);
    this.why.remember(id, why);
    if (s.rollout !== null) {
      if (this.rollouts.get(s.rollout) === id) this.rollouts.delete(s.rollout);
      this.why.remember(s.rollout, why);
    }
    return s;
  }

  /**
   * Closes a removed session's episode: after the requests queued before the close (`drain`;
   * not from inside the session's own queue, where they have run already), exactly once.
   */
  async release(s: Session<X>, drain = true): Promise<void> {
    if (drain) await s.queue.drained();
    const ep = s.episodeId;
    if (ep === null) return;
    s.episodeId = null;
    await this.options.runtime.closeEpisode(ep);
  }

  /** `remove` then `release`. */
  async close(id: string, why: string, drain = true): Promise<void> {
    const s = this.remove(id, why);
    if (s) await this.release(s, drain);
  }

  /** Keeps what a trainer may ask of a closed session (with `keepResults`). */
  keep(r: ClosedResult<Score>): void {
    this.results?.add(r);
  }

  closedResult(idOrRollout: string): ClosedResult<Score> | null {
    return this.results?.get(idOrRollout) ?? null;
  }

  /** Sessions idle (not busy, not `kept`) since before `cutoff`. */
  idleSince(cutoff: number, kept?: (s: Session<X>) => boolean): Session<X>[] {
    return this.all().filter((s) => !s.queue.busy && s.queue.lastUsed < cutoff && !kept?.(s));
  }

  /**
   * Starts the idle reaper: each pass hands `close` the sessions idle for `idleMs` (one at a time:
   * the front closes them its own way), then calls `after`. `kept`: sessions the reaper leaves alone.
   */
  startReaper(idleMs: number, close: (s: Session<X>) => Promise<void>, opts: { kept?: (s: Session<X>) => boolean; after?: () => Promise<void>; minMs?: number; maxMs?: number } = {}): void {
    this.reaper?.stop();
    this.reaper = new IdleReaper(idleMs, async (cutoff) => {
      for (const s of this.idleSince(cutoff, opts.kept)) if (!s.closed) await close(s);
      await opts.after?.();
    }, opts.minMs, opts.maxMs);
  }

  stopReaper(): void {
    this.reaper?.stop();
  }
}
