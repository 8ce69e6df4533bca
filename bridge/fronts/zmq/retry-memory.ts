import { jsonSizeUpTo } from "../../core/episode/action-limits.js";

/** How many recent replies a replica keeps for retries, for how long, and in how many bytes (estimated as JSON). */
export const RETRY_MEMORY = 4096;
export const RETRY_MEMORY_MS = 5 * 60_000;
export const RETRY_MEMORY_BYTES = 64 << 20;

interface Entry<R> {
  op: string;
  /** The session the request was about, when it named one: its replies go when it closes. */
  session: string | null;
  at: number;
  reply: Promise<R>;
  /** Estimated size once the reply is in (0 while it runs: requests running are bounded by max_in_flight). */
  bytes: number;
}

/**
 * The replies of recent requests that change something, by (connection, request id), so a request
 * sent again with the same id (a client retrying after a timeout) gets the first one's reply and
 * never runs twice. Bounded in count, age and bytes (oldest dropped first), and a session's
 * replies go when it closes: a retry of a step on a closed session is answered `session_closed`
 * anyway. A retry that comes after its reply was dropped runs again (docs/protocol.md §3).
 */
export class RetryMemory<R> {
  private readonly entries = new Map<string, Entry<R>>();
  /** Keys by session, so a close finds its session's replies without a scan of every entry (up to 4,096 a close). */
  private readonly bySession = new Map<string, Set<string>>();
  private bytes = 0;

  constructor(
    private readonly maxEntries = RETRY_MEMORY,
    private readonly maxAgeMs = RETRY_MEMORY_MS,
    private readonly maxBytes = RETRY_MEMORY_BYTES,
  ) {}

  get(key: string): { op: string; reply: Promise<R> } | undefined {
    return this.entries.get(key);
  }

  /** Keeps `reply` under `key`; its size counts once it settles. */
  remember(key: string, op: string, session: string | null, reply: Promise<R>): void {
    const entry: Entry<R> = { op, session, at: Date.now(), reply, bytes: 0 };
    const old = this.entries.get(key);
    if (old) this.drop(key, old);
    this.entries.set(key, entry);
    if (session !== null) {
      let keys = this.bySession.get(session);
      if (!keys) this.bySession.set(session, (keys = new Set()));
      keys.add(key);
    }
    void reply.then((r) => {
      if (this.entries.get(key) !== entry) return; // dropped meanwhile
      entry.bytes = jsonSizeUpTo(r, this.maxBytes + 1);
      this.bytes += entry.bytes;
      this.trim();
    });
    this.trim();
  }

  /** Drops every reply about `session` except its close's (a resent close still gets `closed: true`). */
  forgetSession(session: string): void {
    const keys = this.bySession.get(session);
    if (!keys) return;
    for (const k of [...keys]) {
      const e = this.entries.get(k);
      if (e && e.op !== "close") this.drop(k, e);
    }
  }

  get size(): number {
    return this.entries.size;
  }

  /** Sessions with a reply kept (tests: the index goes with the entries). */
  get sessions(): number {
    return this.bySession.size;
  }

  get heldBytes(): number {
    return this.bytes;
  }

  private drop(key: string, e: Entry<R>): void {
    this.entries.delete(key);
    this.bytes -= e.bytes;
    if (e.session === null) return;
    const keys = this.bySession.get(e.session);
    keys?.delete(key);
    if (keys?.size === 0) this.bySession.delete(e.session);
  }

  /** Oldest first (insertion order): what is too old, beyond the count, or beyond the bytes goes. */
  private trim(): void {
    const now = Date.now();
    for (const [k, e] of this.entries) {
      if (this.entries.size <= this.maxEntries && now - e.at < this.maxAgeMs && this.bytes <= this.maxBytes) break;
      this.drop(k, e);
    }
  }
}
