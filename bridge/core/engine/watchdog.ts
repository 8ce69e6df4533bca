// The one watchdog. A thread that runs guest code publishes, in a shared buffer (a DeadlineBoard),
// when its running guest call must be done by; a Watchdog in another thread polls the boards and
// reports a call that overran its deadline by the grace (a builtin that ignores the sandbox's
// interrupt). It needs no message from the watched thread, which may be stuck. Every place that
// runs guest code off its own thread uses it: EnvRuntime's engine workers (Restarter), the one-shot
// workers of `check` and the UI's replay (runWatchedWorker), and a replica's serving thread
// (replica-main.ts). What to do about an overrun is the caller's: stop the worker, or the process.
import type { CallMonitor } from "../sandbox/sandbox-host.js";

/** Slots of the board (Float64): the running call's deadline (epoch ms, 0: none running), and whose call it is. */
const DEADLINE = 0;
const OWNER = 1;

export class DeadlineBoard {
  private readonly slots: Float64Array;

  /** A new board, or a view of one another thread made (its `buffer`, passed in workerData). */
  constructor(readonly buffer: SharedArrayBuffer = new SharedArrayBuffer(16)) {
    this.slots = new Float64Array(buffer);
  }

  get deadline(): number {
    return this.slots[DEADLINE]!;
  }

  /** Whose call runs (an engine worker's episode slot; -1: not said). */
  get owner(): number {
    return this.slots[OWNER]!;
  }

  start(deadlineMs: number, owner: number): void {
    this.slots[OWNER] = owner;
    this.slots[DEADLINE] = deadlineMs;
  }

  end(): void {
    this.slots[DEADLINE] = 0;
  }
}

let callOwner: () => number = () => -1;

/** In a watched thread: who owns the guest call starting now (an engine worker names the episode's slot). */
export function setCallOwner(owner: () => number): void {
  callOwner = owner;
}

/** In a watched thread: a call monitor for the thread's SandboxHost that publishes each guest call's deadline, and its owner, on the board. */
export function reportCallDeadlines(board: DeadlineBoard): CallMonitor {
  return {
    start: (deadlineMs) => board.start(deadlineMs, callOwner()),
    end: () => board.end(),
  };
}

export interface Overrun {
  /** The owner the call was published with. */
  owner: number;
  /** How far past its deadline the call was when seen. @unit ms */
  overrunMs: number;
}

/**
 * Polls its boards every `intervalMs`; a board whose call is past its deadline by `graceMs` is
 * reported once and no longer watched (the caller ends the thread behind it). The timer does not
 * keep the process alive.
 */
export class Watchdog {
  private readonly boards = new Map<DeadlineBoard, (overrun: Overrun) => void>();
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly graceMs: number,
    intervalMs = 100,
  ) {
    this.timer = setInterval(() => this.check(), intervalMs);
    this.timer.unref();
  }

  /** Watches `board` until it overruns (then `onOverrun` is called, once) or until the returned function is called. */
  watch(board: DeadlineBoard, onOverrun: (overrun: Overrun) => void): () => void {
    this.boards.set(board, onOverrun);
    return () => this.boards.delete(board);
  }

  /** One pass over the boards (the timer's; tests call it to not wait for the timer). */
  check(now = Date.now()): void {
    for (const [board, onOverrun] of this.boards) {
      const deadline = board.deadline;
      if (deadline === 0 || now <= deadline + this.graceMs) continue;
      this.boards.delete(board);
      onOverrun({ owner: board.owner, overrunMs: now - deadline });
    }
  }

  close(): void {
    clearInterval(this.timer);
    this.boards.clear();
  }
}
