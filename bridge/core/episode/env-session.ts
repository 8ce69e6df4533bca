import { readFileSync } from "node:fs";
import type { EnvBundle } from "../../../envs/format/load-bundle.js";
import { DEFAULT_LIMITS, type SandboxLimits } from "../sandbox/limits.js";
import { OncePerKey } from "../sandbox/once-per-key.js";
import { GuestEvalError, Sandbox, type SandboxConfig, type SandboxImage } from "../sandbox/sandbox.js";
import type { SandboxHost } from "../sandbox/sandbox-host.js";
import { SandboxFault } from "../sandbox/sandbox-fault.js";
import type { PatchOp } from "../state/json-patch.js";
import type { StateBase } from "../state/state-base.js";
import { StateTracker, type GuestChanges } from "../state/state-tracker.js";
import { POST_INIT_IMAGE_BYTES, PostInitImages, stateBaseId, WARM_STATE_CHARS } from "./post-init-images.js";
import { ToolValidator } from "./tool-validator.js";
import type { StateView } from "../state/state-base.js";

/** The outcome of one tool call inside the env. */
export type CallOutcome =
  /** `text`: the observation text when the env's observation_format is "python" (see python-values.js). */
  | { kind: "result"; json: string; text?: string; diff: PatchOp[] }
  | { kind: "error"; error: { name: string; message: string }; diff: PatchOp[] };

/** Raised when the env cannot even be set up: bad source, a throwing constructor, missing class. */
export class EnvLoadError extends Error {
  override readonly name = "EnvLoadError";
}

export function limitsFor(bundle: EnvBundle, overrides: Partial<SandboxLimits> = {}): SandboxLimits {
  const l = bundle.manifest.limits;
  return {
    ...DEFAULT_LIMITS,
    ...(l.memory_mb ? { memoryBytes: l.memory_mb * 1024 * 1024 } : {}),
    ...(l.call_timeout_ms ? { callTimeoutMs: l.call_timeout_ms } : {}),
    ...overrides,
  };
}

/** The Py layer (python-values.js), evaluated before the env source of python-format envs. */
const PYTHON_VALUES = readFileSync(new URL("../sandbox/python-values.js", import.meta.url), "utf8");
const BIND_PYTHON_VALUES = `Object.defineProperty(globalThis, "Py", { value: (\n${PYTHON_VALUES}\n), writable: false, enumerable: false, configurable: false });`;

/** Four 32-bit words for the guest PRNG, derived from the episode seed. */
export function seedWords(seed: number): [number, number, number, number] {
  let x = BigInt.asUintN(64, BigInt(Math.trunc(seed)) ^ 0x9e3779b97f4a7c15n);
  const next = () => {
    // splitmix64
    x = BigInt.asUintN(64, x + 0x9e3779b97f4a7c15n);
    let z = x;
    z = BigInt.asUintN(64, (z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n);
    z = BigInt.asUintN(64, (z ^ (z >> 27n)) * 0x94d049bb133111ebn);
    return Number(BigInt.asUintN(32, z ^ (z >> 31n))) | 0;
  };
  return [next(), next(), next(), next()];
}

/** A frozen EnvSession (see EnvSession.snapshot). */
export interface EnvSnapshot {
  readonly image: SandboxImage;
  readonly tracker: StateTracker;
  readonly methods: string[];
  readonly initial: StateView;
}

/**
 * Per thread, each env's class evaluated once in a sandbox and captured: every episode restores
 * this image (a memory copy) instead of creating a runtime, compiling the prelude and evaluating
 * the env's source again. Keyed by the bundle's content hash and the limits. The promise is cached,
 * so a burst of resets arriving before the first image exists builds it once (without this, 2,000
 * resets in flight built 2,000 images: 1.4 GB and minutes); a failed build is not cached.
 */
// An image is immutable data (a copy of memory, no instance): kept per thread, whichever host built
// it (its builder sandbox is disposed into that host's pool), and restored into any host's instances.
const envImages = new OncePerKey<SandboxImage>();

function envImage(sandboxes: SandboxHost, bundle: EnvBundle, limits: SandboxLimits): Promise<SandboxImage> {
  return envImages.get(`${bundle.contentHash}:${JSON.stringify(limits)}`, () => buildEnvImage(sandboxes, bundle, limits));
}

/** Per thread, each scenario's session right after a pristine init (see PostInitImages). */
export const postInitImages = new PostInitImages<EnvSnapshot>(POST_INIT_IMAGE_BYTES);

/** This thread's image of the env at its own limits: what an imported snapshot's image must match (see EngineHost's import). */
export function localEnvImage(sandboxes: SandboxHost, bundle: EnvBundle): Promise<SandboxImage> {
  return envImage(sandboxes, bundle, limitsFor(bundle));
}

/**
 * Builds this thread's image of the env and readies wasm instances in `sandboxes` for `sessions` of
 * its episodes (envs with the same memory cap share them), so the first burst of resets pays neither.
 */
export async function warmEnv(sandboxes: SandboxHost, bundle: EnvBundle, sessions: number): Promise<void> {
  await sandboxes.prefill((await envImage(sandboxes, bundle, limitsFor(bundle))).machine.maxBytes, sessions);
  ToolValidator.for(bundle.manifest.tools).compileAll();
}

let imagesBuilt = 0;
/** How many env images this thread has built (for tests: a burst of resets must build one). */
export function envImagesBuilt(): number {
  return imagesBuilt;
}

async function buildEnvImage(sandboxes: SandboxHost, bundle: EnvBundle, limits: SandboxLimits): Promise<SandboxImage> {
  imagesBuilt++;
  const builder = await Sandbox.create(sandboxes, { mode: "env", limits, seed: [0, 0, 0, 0], clockMs: 0, tickMs: 0, hostRead: () => undefined });
  try {
    // the Python-values layer is part of the image, bound before any env code can run
    if (bundle.manifest.observation_format === "python") builder.evalScript(BIND_PYTHON_VALUES, "python-values.js");
    builder.evalScript(bundle.source, bundle.manifest.source_file);
    return builder.capture(true);
  } catch (e) {
    if (e instanceof GuestEvalError) throw new EnvLoadError(e.message);
    throw e;
  } finally {
    builder.dispose();
  }
}

/**
 * `snap` with every collection of its state loaded into the guest (the prelude's `warm`; see
 * WARM_STATE_CHARS), in a sandbox of its own so the episode that captured `snap` is not touched.
 * Null when the guest could not (its memory cap, a deadline): the image is then taken as it was.
 */
async function warmed(snap: EnvSnapshot, sandboxes: SandboxHost): Promise<EnvSnapshot | null> {
  const s = await EnvSession.fromSnapshot(snap, sandboxes);
  try {
    return s.warm() ? s.snapshot(true) : null;
  } catch (e) {
    if (e instanceof SandboxFault) return null;
    throw e;
  } finally {
    s.dispose();
  }
}

/**
 * One live env instance: its sandbox, its class instance, and the host's tracked copy of its state.
 * Owns the sandbox; dispose() releases it. After a SandboxFault the session is dead.
 */
export class EnvSession implements Disposable {
  private constructor(
    private readonly sandbox: Sandbox,
    readonly tracker: StateTracker,
    /** Names of the methods the env instance has (tools must be among them). */
    readonly methods: string[],
    /** The state right after construction: what checks see as `initial`. */
    readonly initial: StateView,
  ) {}

  /** `sandboxes`: the host (of the engine running this episode) whose instance the session's sandbox takes. */
  static async open(bundle: EnvBundle, base: StateBase, options: { seed: number; limits?: Partial<SandboxLimits>; sandboxes: SandboxHost }): Promise<EnvSession> {
    const limits = limitsFor(bundle, options.limits);
    const key = `${bundle.contentHash}:${JSON.stringify(limits)}:${stateBaseId(base)}`;
    const plan = postInitImages.plan(key);
    const config = (tracker: StateTracker): SandboxConfig => ({
      seed: seedWords(options.seed), clockMs: Date.parse(bundle.manifest.clock.start), tickMs: bundle.manifest.clock.tick_ms, hostRead: (op, coll, id) => tracker.view.read(op, coll, id),
    });
    if (plan.image) {
      // the init already ran in this image and depended on nothing of the episode: configure it for this one
      const tracker = plan.image.tracker.fork();
      const sandbox = await Sandbox.restore(options.sandboxes, plan.image.image, config(tracker), (op, coll, id) => tracker.view.read(op, coll, id));
      return new EnvSession(sandbox, tracker, plan.image.methods, plan.image.initial);
    }
    const tracker = new StateTracker(base);
    const image = await envImage(options.sandboxes, bundle, limits);
    const sandbox = await Sandbox.restore(options.sandboxes, image, config(tracker), (op, coll, id) => tracker.view.read(op, coll, id));
    try {
      const init = sandbox.dispatch("init", bundle.manifest.class_name, JSON.stringify(base.layout()), JSON.stringify({ observation_format: bundle.manifest.observation_format }));
      if (!init.ok) throw new EnvLoadError(`${init.error.name}: ${init.error.message}`);
      const { methods, changes, pristine } = readInit(init.value);
      tracker.apply(changes);
      const session = new EnvSession(sandbox, tracker, methods, tracker.snapshot());
      if (plan.capture) {
        if (pristine) {
          const plain = session.snapshot(true);
          const snap = base.recordChars <= WARM_STATE_CHARS ? ((await warmed(plain, options.sandboxes)) ?? plain) : plain;
          postInitImages.keep(key, snap, snap.image.machine.bytes);
        } else postInitImages.varies(key);
      }
      return session;
    } catch (e) {
      sandbox.dispose();
      if (plan.capture) postInitImages.release(key);
      if (e instanceof GuestEvalError) throw new EnvLoadError(e.message);
      throw e;
    }
  }

  /** Loads every collection of the state into the guest now; false when the guest refused. */
  warm(): boolean {
    return this.sandbox.dispatch("warm").ok;
  }

  /**
   * This session frozen now: the sandbox's memory (class instance, RNG position, clock) and the
   * host's tracked state (only the records that changed). Restorable any number of times.
   */
  snapshot(sparse: boolean): EnvSnapshot {
    return { image: this.sandbox.capture(sparse), tracker: this.tracker.fork(), methods: this.methods, initial: this.initial };
  }

  static async fromSnapshot(snap: EnvSnapshot, sandboxes: SandboxHost): Promise<EnvSession> {
    const tracker = snap.tracker.fork();
    const sandbox = await Sandbox.restore(sandboxes, snap.image, null, (op, coll, id) => tracker.view.read(op, coll, id));
    return new EnvSession(sandbox, tracker, snap.methods, snap.initial);
  }

  /** Runs one tool. Guest exceptions come back as `error`; a SandboxFault means the session is dead. */
  call(name: string, args: Record<string, unknown>): CallOutcome {
    const out = this.sandbox.dispatch("call", name, JSON.stringify(args));
    if (!out.ok) return { kind: "error", error: out.error, diff: [] };
    const v = readCall(out.value, out.trailer);
    const diff = this.tracker.apply(v.changes);
    if (v.error) return { kind: "error", error: v.error, diff };
    return v.text === undefined ? { kind: "result", json: v.result, diff } : { kind: "result", json: v.result, text: v.text, diff };
  }

  /** How many Math.random draws the guest made since it was configured (0: nothing so far depended on the seed). */
  randomDraws(): number {
    const out = this.sandbox.dispatch("draws");
    if (!out.ok || typeof out.value !== "number") throw new SandboxFault("env_crashed", "draws: the guest's answer is not a number");
    return out.value;
  }

  stateHash(): string {
    return this.tracker.stateHash();
  }

  stateJson(): string {
    return this.tracker.view.toJson();
  }

  dispose(): void {
    this.sandbox.dispose();
  }

  [Symbol.dispose](): void {
    this.dispose();
  }
}

// ---- what the guest reports, checked before the host uses it (a guest can patch its own realm) ----

function invalid(what: string): SandboxFault {
  return new SandboxFault("env_output_invalid", `the env's ${what} does not have the expected shape (was a builtin patched?)`);
}

const isStr = (v: unknown): v is string => typeof v === "string";

function readChanges(v: unknown): GuestChanges {
  const c = v as GuestChanges | null;
  if (c === null || typeof c !== "object" || !Array.isArray(c.records) || !Array.isArray(c.values)) throw invalid("change report");
  for (const r of c.records) if (!Array.isArray(r) || r.length !== 3 || !isStr(r[0]) || !isStr(r[1]) || !(r[2] === null || isStr(r[2]))) throw invalid("change report");
  for (const r of c.values) if (!Array.isArray(r) || r.length !== 2 || !isStr(r[0]) || !(r[1] === null || isStr(r[1]))) throw invalid("change report");
  return c;
}

function readInit(v: unknown): { methods: string[]; changes: GuestChanges; pristine: boolean } {
  const o = v as { methods?: unknown; changes?: unknown; pristine?: unknown } | null;
  if (o === null || typeof o !== "object" || !Array.isArray(o.methods) || !o.methods.every(isStr)) throw invalid("init report");
  // anything but a plain true (a guest that patched its realm) is taken as "depends on the episode"
  return { methods: o.methods, changes: readChanges(o.changes), pristine: o.pristine === true };
}

function readCall(v: unknown, trailer: string | undefined): { result: string; text?: string; error?: { name: string; message: string }; changes: GuestChanges } {
  const o = v as { result?: unknown; text?: unknown; error?: { name?: unknown; message?: unknown }; changes?: unknown } | null;
  if (o === null || typeof o !== "object") throw invalid("call report");
  const changes = readChanges(o.changes);
  if (o.error !== undefined) {
    if (o.error === null || typeof o.error !== "object" || !isStr(o.error.name) || !isStr(o.error.message)) throw invalid("call report");
    return { result: "null", error: { name: o.error.name, message: o.error.message }, changes };
  }
  // the result JSON comes after the envelope (see the prelude's `trailer`)
  if (trailer === undefined || (o.text !== undefined && !isStr(o.text))) throw invalid("tool result");
  try {
    JSON.parse(trailer);
  } catch {
    throw invalid("tool result");
  }
  return o.text === undefined ? { result: trailer, changes } : { result: trailer, text: o.text, changes };
}

export { SandboxFault };
