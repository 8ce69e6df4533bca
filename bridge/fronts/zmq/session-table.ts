import { randomBytes } from "node:crypto";
import { ProtocolError } from "../../../protocol/error-codes.js";
import { ClosedMemory } from "../../core/sessions/closed-memory.js";
import { SessionQueue } from "../../core/sessions/session-queue.js";
import { sessionGone } from "../../core/sessions/unknowns.js";

export interface Session {
  id: string;
  /** The runtime episode currently played in this session; null after a failed re-reset. */
  episodeId: string | null;
  /** Requests on one session run one at a time, in arrival order; its last use is the reaper's. */
  queue: SessionQueue;
  /** The connection (ZeroMQ routing identity) that opened it: sessions per client are bounded. */
  owner: string;
}

const TOMBSTONES = 100_000;

/**
 * The sessions of one replica: unguessable ids, a limit, idle reaping, and memory of closed ids so
 * a late request learns *why* its session is gone (closed, reaped, or lost with an earlier replica
 * process) instead of a bare "unknown".
 */
export class SessionTable {
  private readonly sessions = new Map<string, Session>();
  private readonly tombstones = new ClosedMemory(TOMBSTONES);
  private readonly perOwner = new Map<string, number>();
  private readonly prefix: string;

  constructor(
    private readonly replica: number,
    private readonly instance: string,
    private readonly previousInstances: readonly string[],
    private readonly maxSessions: number,
    private readonly maxPerClient: number = maxSessions,
  ) {
    this.prefix = `s-${replica}-${instance}-`;
  }

  get size(): number {
    return this.sessions.size;
  }

  open(owner = ""): Session {
    if (this.sessions.size >= this.maxSessions) throw new ProtocolError("too_many_sessions", `this replica holds its limit of ${this.maxSessions} sessions (max_sessions); close some`);
    const held = this.perOwner.get(owner) ?? 0;
    if (held >= this.maxPerClient) throw new ProtocolError("too_many_sessions", `this client holds its limit of ${this.maxPerClient} sessions on this replica (max_sessions_per_client); close some`);
    const s: Session = { id: this.prefix + randomBytes(16).toString("hex"), episodeId: null, queue: new SessionQueue(), owner };
    this.sessions.set(s.id, s);
    this.perOwner.set(owner, held + 1);
    return s;
  }

  get(id: string): Session {
    const s = this.sessions.get(id);
    if (s) {
      s.queue.lastUsed = Date.now();
      return s;
    }
    const why = this.tombstones.get(id);
    const m = /^s-(\d+)-([0-9a-f]+)-/.exec(id);
    const lost = m && Number(m[1]) === this.replica && this.previousInstances.includes(m[2]!) ? `replica ${this.replica} restarted (its process died) and sessions do not survive that` : undefined;
    throw sessionGone(id, why === undefined ? undefined : `was ${why}`, ` on replica ${this.replica}`, lost);
  }

  /** Forgets a session, remembering why. Returns it if it was open. */
  remove(id: string, why: string): Session | undefined {
    const s = this.sessions.get(id);
    if (!s) return undefined;
    this.sessions.delete(id);
    const held = (this.perOwner.get(s.owner) ?? 1) - 1;
    if (held > 0) this.perOwner.set(s.owner, held);
    else this.perOwner.delete(s.owner);
    this.tombstones.remember(id, why);
    return s;
  }

  has(id: string): boolean {
    return this.sessions.has(id);
  }

  /** Sessions idle (and not busy) since before `cutoff`. */
  idleSince(cutoff: number): Session[] {
    return [...this.sessions.values()].filter((s) => !s.queue.busy && s.queue.lastUsed < cutoff);
  }

  all(): Session[] {
    return [...this.sessions.values()];
  }
}
