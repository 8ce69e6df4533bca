import type { StateBase } from "../state/state-base.js";

/**
 * Bytes of post-init images one thread keeps (an image is ~0.4 MB for the bundled envs, so about
 * 150 scenarios). Past it the least recently opened go; a scenario whose image went is opened the
 * slow way (restore the env's image, run init) and captured again on its next open.
 */
export const POST_INIT_IMAGE_BYTES = 64 << 20;
/**
 * States of up to this many characters of record JSON are loaded into the guest before their
 * post-init image is captured (the prelude's `warm`), so episodes started from the image do not
 * each parse and track the records on their first steps (library-1, 14 KB: the guest time of its
 * reference solution's eight steps in a fresh episode, 64 episodes in lockstep, in process, went
 * from ~7.1 to ~2.5 ms). Larger states (tau-bench's megabytes) stay lazy: an episode reads few of
 * their records, and a larger image costs every reset a larger copy.
 */
export const WARM_STATE_CHARS = 64 << 10;
/** Bytes of check images with a scenario's state preloaded one thread keeps (checker.ts's checkBaseImages). */
export const CHECK_BASE_IMAGE_BYTES = 32 << 20;
/** Scenarios one thread remembers anything about (an open counted, an init found to vary). */
const MAX_KEYS = 8192;

/** What is known of one (env, limits, initial state): opened once, its image on its way, its init varies, or its image. */
type Entry<T> = { kind: "seen" } | { kind: "capturing" } | { kind: "varies" } | { kind: "image"; image: T; bytes: number };

/** What `open` should do for a key: start from the image, or run init (and capture it if asked). */
export type PostInitPlan<T> = { image: T } | { image: null; capture: boolean };

/**
 * Per thread, a sandbox captured right after its env's init, per env, limits and initial state,
 * for inits that depend on nothing of the episode (they drew no Math.random and read no clock:
 * the prelude's `pristine`). A reset then restores that image and configures the seed and clock,
 * instead of restoring the env's image and running init again: for library-1, ~35 µs instead of
 * ~290 µs. Captured on the second open of a state, so a scenario played once (a benchmark's
 * thousands) never pays for a capture; bounded by POST_INIT_IMAGE_BYTES, least recently used out.
 * Images are immutable data restored into any host's instances (as the env images are).
 */
export class PostInitImages<T> {
  /** Insertion order is recency order: a hit moves its key to the end. */
  private readonly entries = new Map<string, Entry<T>>();
  private bytes = 0;
  private captured = 0;

  constructor(public budgetBytes: number) {}

  /** What to do for this key now (and counts this open). */
  plan(key: string): PostInitPlan<T> {
    const e = this.entries.get(key);
    if (e === undefined) {
      this.put(key, { kind: "seen" });
      return { image: null, capture: false };
    }
    this.entries.delete(key);
    this.entries.set(key, e);
    if (e.kind === "image") return { image: e.image };
    if (e.kind !== "seen" || this.budgetBytes <= 0) return { image: null, capture: false };
    // one open captures; the others of a burst (resets in flight while it awaits) run init as usual
    this.put(key, { kind: "capturing" });
    return { image: null, capture: true };
  }

  /** The open told to capture failed before it could keep its image: the next open captures instead. */
  release(key: string): void {
    if (this.entries.get(key)?.kind === "capturing") this.put(key, { kind: "seen" });
  }

  /** Keeps the image captured after a pristine init (dropped at once when it alone is over the budget). */
  keep(key: string, image: T, bytes: number): void {
    if (bytes > this.budgetBytes) return;
    this.captured++;
    this.put(key, { kind: "image", image, bytes });
  }

  /** Marks the key's init as depending on the episode (seed or clock): it is run for every episode. */
  varies(key: string): void {
    this.put(key, { kind: "varies" });
  }

  /** Forgets everything (tests: the next open of every state runs init again). */
  clear(): void {
    this.entries.clear();
    this.bytes = 0;
  }

  /** Images captured so far and bytes held now (tests, stats). */
  stats(): { captured: number; kept: number; bytes: number } {
    let kept = 0;
    for (const e of this.entries.values()) if (e.kind === "image") kept++;
    return { captured: this.captured, kept, bytes: this.bytes };
  }

  private put(key: string, e: Entry<T>): void {
    this.drop(key);
    this.entries.set(key, e);
    if (e.kind === "image") this.bytes += e.bytes;
    // oldest first; the key just put is the newest (and an image in it fits the budget alone)
    for (const k of this.entries.keys()) {
      if (k === key || (this.bytes <= this.budgetBytes && this.entries.size <= MAX_KEYS)) break;
      this.drop(k);
    }
  }

  private drop(key: string): void {
    const e = this.entries.get(key);
    if (e === undefined) return;
    if (e.kind === "image") this.bytes -= e.bytes;
    this.entries.delete(key);
  }
}

const ids = new WeakMap<StateBase, number>();
let nextId = 0;

/** A number per state base for this thread's keys (bases are shared per bundle and scenario, see bundle-state.ts). */
export function stateBaseId(base: StateBase): number {
  let id = ids.get(base);
  if (id === undefined) ids.set(base, (id = ++nextId));
  return id;
}
