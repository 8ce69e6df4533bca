import { ProtocolError } from "../../../protocol/error-codes.js";

const ignore = (): undefined => undefined;

/**
 * One session's requests, one at a time in arrival order: the one per-session ordering of every
 * front (the engine orders each episode's own messages besides). Tracks what the idle reaper
 * needs (queued work, last use). At most `maxQueued` may wait; one more is `overloaded`.
 *
 * On the ZeroMQ step path: one `then` and one settle chain per request, as a hand-written tail
 * would cost; the settle callback is bound once per session, not made per request.
 */
export class SessionQueue {
  /** Settles after the last request queued so far (never rejects). */
  private tail: Promise<unknown> = Promise.resolve();
  /** Requests queued or running. */
  queued = 0;
  lastUsed = Date.now();

  constructor(private readonly maxQueued = Number.POSITIVE_INFINITY) {}

  /** Queued or running work: the idle reaper leaves a busy session alone. */
  get busy(): boolean {
    return this.queued > 0;
  }

  /** Runs `fn` after every earlier request of this session. */
  run<T>(fn: () => T | Promise<T>): Promise<T> {
    if (this.queued >= this.maxQueued) return Promise.reject(new ProtocolError("overloaded", `${this.queued} requests are queued on this session (the limit); wait for their results`));
    this.queued++;
    this.lastUsed = Date.now();
    const run = this.tail.then(fn);
    this.tail = run.then(this.settled, this.settled);
    return run;
  }

  /** Resolves once every request queued so far has run (whatever their outcome). */
  drained(): Promise<void> {
    return this.tail.then(ignore);
  }

  private readonly settled = (): void => {
    this.queued--;
    this.lastUsed = Date.now();
  };
}
