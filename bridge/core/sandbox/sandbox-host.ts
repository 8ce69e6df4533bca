import { dropInstance, newBlankInstance, touchedBytes, type BlankInstance } from "./quickjs-machine.js";

/**
 * Told when a guest call starts and ends, with the call's deadline. An engine worker publishes this
 * to its watchdog, which stops the whole thread if a native builtin ignores the interrupt handler.
 */
export interface CallMonitor {
  start(deadlineMs: number): void;
  end(): void;
}

/** What the host's live set holds: a sandbox that has a wasm instance attached (see Sandbox). */
export interface LiveSandbox {
  /** The memory cap of its instance (instances are only exchanged between equal caps). */
  readonly cap: number;
  /** Captures the sandbox and gives its instance back to the host (between guest calls). */
  sleep(): void;
  /** Drops the sandbox (its instance is recycled if healthy); idempotent. */
  dispose(): void;
}

export interface SandboxHostOptions {
  /** Told of every guest call's deadline (the thread's watchdog); none: no one watches. */
  monitor?: CallMonitor | null;
  /** Sandboxes that may hold a wasm instance at once (see `maxLive`). @default ENVSCALER_LIVE_SANDBOXES or 256 */
  maxLive?: number;
  /** Names the host in the leak check's report (default: where it was made). */
  label?: string;
}

/** Thrown when work is asked of a disposed host: its engine closed, nothing may make sandboxes in it any more. */
export class SandboxHostDisposed extends Error {
  override readonly name = "SandboxHostDisposed";
}

/** Fresh instances kept ready per memory cap (made in the background after the current turn). */
const FRESH_PER_CAP = 4;
/** Released instances kept per memory cap for reuse; beyond this they are dropped. */
const RECYCLED_PER_CAP = 1024;
/** An instance whose memory grew past this is not recycled (wasm memory never shrinks). */
const RECYCLE_MAX_BYTES = 64 << 20;
/**
 * Memory all recycled instances of one cap may hold in one host: what closed episodes leave behind
 * is kept for reuse only up to this, the rest is given back (issue 32: instances that had grown
 * were kept by the thousand). Counted as the memory their machines wrote (touchedBytes), not the
 * memory's size: the size counted 16 MiB for an instance holding ~0.7 MB, so a fork group of 64
 * made 48 new instances each round (instantiation and the GC it set off were ~95% of the fork).
 * Instances put aside by a sandbox going to sleep are not counted here (their sandbox takes them
 * back when it wakes; maxLive bounds them).
 */
export const RECYCLED_MAX_TOTAL_BYTES = 256 << 20;

interface InstancePool {
  fresh: BlankInstance[];
  recycled: BlankInstance[];
  refilling: boolean;
}

/** What one host holds and has done (stats, tests). */
export interface SandboxHostStats {
  fresh: number;
  recycled: number;
  recycled_bytes: number;
  /** Sandboxes holding a wasm instance now. */
  live: number;
  /** Sandboxes made in this host and not disposed yet (awake or asleep): what its episodes and image builds hold. */
  sandboxes: number;
  instantiated: number;
  sleeps: { captured: number; recipe: number };
}

/**
 * The leak check's ledger (tests/sandbox-leak-check.ts): counts and labels only, never a host or an
 * instance (those belong to their engine), so nothing here keeps memory alive or can be handed out.
 */
const ledger = { nextId: 1, open: new Map<number, string>(), dirtyDisposals: [] as string[] };

/**
 * Every wasm/QuickJS resource of one engine: the pools of fresh and recycled instances (per
 * memory cap), the live set (sandboxes holding an instance, least recently used first), putting
 * sandboxes to sleep past `maxLive` and waking them, and the call monitor. One per engine (a
 * worker thread's, an in-thread engine's, a check or replay run's): the engine makes it and
 * disposes it when it closes, and nothing of it is module-global, so two engines in one thread
 * share nothing and a closed engine leaves nothing behind.
 *
 * Invariants (asserted cheaply where they could break, and all at once by checkInvariants()): an
 * instance is pooled or attached, never both (BlankInstance.pooled); every live sandbox is one
 * this host made and has not disposed; no more than maxLive are live after a hand-out; a disposed
 * host holds nothing and refuses new work with SandboxHostDisposed.
 */
export class SandboxHost implements Disposable {
  readonly monitor: CallMonitor | null;
  private readonly pools = new Map<number, InstancePool>();
  /** Live sandboxes, least recently used first (a Map keeps insertion order; touching re-inserts). */
  private readonly live = new Map<LiveSandbox, true>();
  /** Sandboxes made here and not disposed: the live ones and the sleeping ones. */
  private held = 0;
  private maxLive: number;
  private instantiated = 0;
  private readonly sleeps = { captured: 0, recipe: 0 };
  private handingOut: Promise<unknown> = Promise.resolve();
  private disposed = false;
  private readonly id = ledger.nextId++;
  readonly label: string;

  constructor(options: SandboxHostOptions = {}) {
    this.monitor = options.monitor ?? null;
    this.maxLive = Math.max(2, Math.floor(options.maxLive ?? (Number(process.env.ENVSCALER_LIVE_SANDBOXES) || 256)));
    this.label = options.label ?? madeAt();
    ledger.open.set(this.id, this.label);
  }

  /** Hosts made and not disposed in this thread, and hosts disposed while sandboxes were still live in them (for the leak check). */
  static leaks(): { undisposed: string[]; disposedWithLive: string[] } {
    return { undisposed: [...ledger.open.values()], disposedWithLive: [...ledger.dirtyDisposals] };
  }

  /**
   * Forgets what leaks() reported: all of it (the leak check, after failing a file), or only the
   * disposals of the host labelled `label` (a test that leaves sandboxes to dispose() on purpose).
   */
  static forgetLeaks(label?: string): void {
    if (label !== undefined) {
      const keep = ledger.dirtyDisposals.filter((d) => !d.startsWith(`${label} (`));
      ledger.dirtyDisposals.splice(0, ledger.dirtyDisposals.length, ...keep);
      return;
    }
    ledger.open.clear();
    ledger.dirtyDisposals.length = 0;
  }

  get isDisposed(): boolean {
    return this.disposed;
  }

  /** Sets how many sandboxes of this host may hold a wasm instance at once (at least 2). */
  setMaxLive(n: number): void {
    this.maxLive = Math.max(2, Math.floor(n));
  }

  private refuseIfDisposed(what: string): void {
    if (this.disposed) throw new SandboxHostDisposed(`${what}: the sandbox host "${this.label}" is disposed (its engine closed)`);
  }

  private poolFor(maxBytes: number): InstancePool {
    let p = this.pools.get(maxBytes);
    if (!p) this.pools.set(maxBytes, (p = { fresh: [], recycled: [], refilling: false }));
    return p;
  }

  private instantiate(maxBytes: number): Promise<BlankInstance> {
    this.instantiated++;
    return newBlankInstance(maxBytes);
  }

  /** Puts an instance into a pool; the one place `pooled` is set. */
  private pool(list: BlankInstance[], inst: BlankInstance): void {
    if (inst.pooled) throw new Error("sandbox host invariant: an instance was pooled twice");
    if (inst.dropped) throw new Error("sandbox host invariant: a dropped instance was pooled");
    inst.pooled = true;
    list.push(inst);
  }

  /** Takes an instance out of a pool; the one place `pooled` is cleared. */
  private unpool(inst: BlankInstance | undefined): BlankInstance | undefined {
    if (inst) {
      if (!inst.pooled) throw new Error("sandbox host invariant: a pool held an instance that is attached");
      inst.pooled = false;
    }
    return inst;
  }

  private refill(maxBytes: number): void {
    const pool = this.poolFor(maxBytes);
    if (pool.refilling || pool.fresh.length >= FRESH_PER_CAP) return;
    pool.refilling = true;
    setImmediate(() => {
      void (async () => {
        try {
          while (!this.disposed && pool.fresh.length < FRESH_PER_CAP) {
            const inst = await this.instantiate(maxBytes);
            if (this.disposed) return dropInstance(inst); // made while the host closed: dropped with it
            this.pool(pool.fresh, inst);
          }
        } catch {
          /* the next take() makes its own instance and reports the problem there */
        } finally {
          pool.refilling = false;
        }
      })();
    });
  }

  /**
   * Makes fresh instances of `maxBytes` until `n` wait in its pool (the pool then keeps them:
   * refill only tops up to FRESH_PER_CAP). A burst of resets then restores into them instead of
   * instantiating on the request path (about 1.3-3 ms each, most of a cold reset).
   */
  async prefill(maxBytes: number, n: number): Promise<number> {
    this.refuseIfDisposed("prefill");
    const pool = this.poolFor(maxBytes);
    while (pool.fresh.length + pool.recycled.length < n) {
      const inst = await this.instantiate(maxBytes);
      if (this.disposed) dropInstance(inst);
      this.refuseIfDisposed("prefill");
      this.pool(pool.fresh, inst);
    }
    return pool.fresh.length + pool.recycled.length;
  }

  /**
   * Hands out one instance at a time and runs `use` (which attaches it) before the next is handed
   * out: a burst of resets all waiting on instances at once would otherwise each pass makeRoom
   * before any had attached, and the host would end up holding an instance per reset (measured:
   * 2,000 resets in flight made 2,000 instances, 1.6 GB and 6 resets/s). `fresh`: never a
   * recycled one (a machine is only created in a never-used instance).
   */
  withInstance<T>(cap: number, fresh: boolean, use: (inst: BlankInstance) => T): Promise<T> {
    this.refuseIfDisposed("a new sandbox");
    const turn = this.handingOut.then(async () => {
      this.refuseIfDisposed("a new sandbox");
      this.makeRoom(cap); // puts the least recently used to sleep, which gives its instance to the pool
      const pool = this.poolFor(cap);
      const inst = this.unpool(fresh ? undefined : pool.recycled.pop()) ?? this.unpool(pool.fresh.pop()) ?? (await this.instantiate(cap));
      this.refill(cap);
      try {
        this.refuseIfDisposed("a new sandbox");
        this.makeRoom(cap); // a synchronous wake may have taken the room meanwhile
        return use(inst);
      } catch (e) {
        dropInstance(inst); // never attached: no one holds it
        throw e;
      }
    });
    this.handingOut = turn.catch(() => undefined);
    return turn;
  }

  /** An instance for a sleeping sandbox to wake into, synchronously (a wake happens inside a guest op): undefined when none is free. */
  instanceForWake(cap: number): BlankInstance | undefined {
    this.refuseIfDisposed("waking a sandbox");
    this.makeRoom(cap);
    const pool = this.poolFor(cap);
    const inst = this.unpool(pool.recycled.pop()) ?? this.unpool(pool.fresh.pop());
    this.refill(cap);
    return inst;
  }

  /** A sandbox was made here (awake or not): counted until it is disposed. */
  adopt(): void {
    this.refuseIfDisposed("a new sandbox");
    this.held++;
  }

  /** A sandbox of this host was disposed. */
  release(): void {
    this.held--;
  }

  /** `s` now holds an instance, or was just used: it becomes the most recently used live sandbox. */
  touch(s: LiveSandbox): void {
    this.live.delete(s);
    this.live.set(s, true);
  }

  /** `s` holds no instance any more (asleep, poisoned or disposed). */
  forget(s: LiveSandbox): void {
    this.live.delete(s);
  }

  /** Counts how a sandbox went to sleep. */
  slept(how: "captured" | "recipe"): void {
    this.sleeps[how]++;
  }

  /**
   * Takes back the instance of a healthy sandbox that went to sleep (`always`: kept whatever its
   * size, its sandbox takes it back on waking) or was disposed (kept within the recycle bounds).
   * A disposed host keeps nothing.
   */
  recycle(inst: BlankInstance, always = false): void {
    if (this.disposed) return dropInstance(inst);
    const pool = this.poolFor(inst.maxBytes);
    const size = inst.memory.buffer.byteLength;
    if (always || (pool.recycled.length < RECYCLED_PER_CAP && size <= RECYCLE_MAX_BYTES && recycledBytes(pool) + touchedBytes(inst) <= RECYCLED_MAX_TOTAL_BYTES)) this.pool(pool.recycled, inst);
    else dropInstance(inst);
  }

  /** Sends least recently used sandboxes to sleep until fewer than maxLive hold an instance (preferring ones of `cap`). */
  private makeRoom(cap: number): void {
    while (this.live.size >= this.maxLive) {
      let victim: LiveSandbox | undefined;
      for (const s of this.live.keys())
        if (s.cap === cap) {
          victim = s;
          break;
        }
      victim ??= this.live.keys().next().value!;
      victim.sleep();
      // a sandbox that stays in the live set after sleep() would make this loop spin forever
      if (this.live.has(victim)) throw new Error("sandbox host invariant: a sandbox put to sleep is still live");
    }
  }

  stats(): SandboxHostStats {
    let fresh = 0;
    let recycled = 0;
    let bytes = 0;
    for (const p of this.pools.values()) {
      fresh += p.fresh.length;
      recycled += p.recycled.length;
      bytes += recycledBytes(p);
    }
    return { fresh, recycled, recycled_bytes: bytes, live: this.live.size, sandboxes: this.held, instantiated: this.instantiated, sleeps: { ...this.sleeps } };
  }

  /** Checks every invariant at once (O(instances)); throws naming the first broken one. For tests and dispose. */
  checkInvariants(): void {
    const fail = (why: string) => {
      throw new Error(`sandbox host invariant: ${why}`);
    };
    const seen = new Set<BlankInstance>();
    for (const [cap, p] of this.pools) {
      for (const inst of [...p.fresh, ...p.recycled]) {
        if (!inst.pooled) fail("a pooled instance is marked attached");
        if (inst.maxBytes !== cap) fail(`an instance of ${inst.maxBytes} bytes is in the pool of ${cap}`);
        if (seen.has(inst)) fail("an instance is pooled twice");
        if (inst.dropped) fail("a dropped instance is pooled");
        seen.add(inst);
      }
      if (p.fresh.some((inst) => inst.dirty !== null)) fail("a used instance is in the fresh pool");
    }
    if (this.live.size > this.held) fail(`${this.live.size} live sandboxes but only ${this.held} not disposed`);
    if (this.held < 0) fail("more sandboxes disposed than made");
    if (this.disposed && (this.live.size > 0 || this.pools.size > 0)) fail("a disposed host still holds instances");
  }

  /**
   * Drops every pooled instance and every live sandbox's (disposing those sandboxes: their
   * owners then find them disposed), and refuses new work from now on. Its engine calls this when
   * it closes, after closing its episodes: a host disposed while sandboxes are still live was
   * left them by an owner that did not dispose its own, which the leak check reports.
   */
  dispose(): void {
    if (this.disposed) return;
    const left = this.held;
    if (left > 0) ledger.dirtyDisposals.push(`${this.label} (${left} sandbox${left === 1 ? "" : "es"} not disposed, ${this.live.size} of them live)`);
    this.disposed = true;
    for (const s of [...this.live.keys()]) s.dispose();
    this.live.clear();
    for (const p of this.pools.values())
      for (const inst of [...p.fresh, ...p.recycled]) {
        inst.pooled = false;
        dropInstance(inst);
      }
    this.pools.clear();
    ledger.open.delete(this.id);
    this.checkInvariants();
  }

  [Symbol.dispose](): void {
    this.dispose();
  }
}

function recycledBytes(pool: InstancePool): number {
  let n = 0;
  for (const inst of pool.recycled) n += touchedBytes(inst);
  return n;
}

/** The first stack frame outside this file: where a host was made (named in the leak report). */
function madeAt(): string {
  const frames = (new Error().stack ?? "").split("\n").slice(1);
  const outside = frames.find((f) => !f.includes("sandbox-host"));
  return outside ? outside.trim().replace(/^at /, "") : "unknown";
}
