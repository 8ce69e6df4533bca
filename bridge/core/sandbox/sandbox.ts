import { readFileSync } from "node:fs";
import { safeGuestStackBytes, type SandboxLimits } from "./limits.js";
import { dropInstance, Machine, MachineOutOfMemory, type MachineImage } from "./quickjs-machine.js";
import { SandboxFault } from "./sandbox-fault.js";
import type { LiveSandbox, SandboxHost } from "./sandbox-host.js";
import { DEFAULT_FUEL_ALLOWANCE } from "./wasm-fuel.js";

const PRELUDE = readFileSync(new URL("./prelude.js", import.meta.url), "utf8");

/**
 * Reads state on the guest's behalf: ("get", collection, id) → record JSON, ("keys", c) → JSON id list, ("has", c, id) → "1"/"0",
 * ("all", c) → JSON object of id → record (JSON-format envs: the texts spliced in, so the guest parses once), or nothing when over 1 MiB; ("changed", c) → the same for only the
 * records the state has other than its base's (check realms with the base preloaded).
 */
export type HostRead = (op: string, collection: string, id: string) => string | undefined;

/** What a sandbox runs: one env instance and its tools, or check functions over read-only states. */
export type SandboxMode = "env" | "check";

/** Per-episode settings, applied when a sandbox is made (fresh or from an image). */
export interface SandboxConfig {
  /** Seeds the guest's Math.random (four 32-bit words). */
  seed: [number, number, number, number];
  /** Virtual clock start, in ms since the Unix epoch. */
  clockMs: number;
  /** How far the virtual clock advances per tool call. */
  tickMs: number;
  hostRead: HostRead;
}

export interface SandboxOptions extends SandboxConfig {
  mode: SandboxMode;
  limits: SandboxLimits;
}

/** What a guest op returned: a value, or the exception the guest code threw. */
/** `trailer`: text the op put after its envelope (a tool call's result JSON, kept out of the envelope so it is not escaped twice). */
export type GuestResult = { ok: true; value: unknown; trailer?: string } | { ok: false; error: { name: string; message: string } };

/**
 * A captured sandbox: its machine image plus what the host needs to drive it. Immutable; restoring
 * it any number of times gives sandboxes that each continue from exactly this point.
 */
export interface SandboxImage {
  readonly machine: MachineImage;
  readonly mode: SandboxMode;
  readonly limits: SandboxLimits;
  readonly stackBytes: number;
}

/** An image and the ops run on it since it was restored (see Sandbox.recipe). */
interface Recipe {
  readonly image: SandboxImage;
  readonly ops: [op: string, args: string[]][];
}
/** The ops of a reset, in their order: what a recipe may hold. */
const RECIPE_OPS = ["configure", "init"];

/** Thrown from the fuel check into wasm code that ran past its call's deadline; it unwinds the guest call. */
class DeadlinePassed extends Error {
  override readonly name = "DeadlinePassed";
}

/** Thrown for env source that does not even evaluate (syntax errors, top-level throws). */
export class GuestEvalError extends Error {
  override readonly name = "GuestEvalError";
}

/**
 * One QuickJS machine in its own wasm instance with capped memory, a stack budget, a per-call
 * deadline, no host capabilities except `hostRead`, and the prelude installed. Every call crosses
 * as JSON text. After any SandboxFault the sandbox is poisoned: it refuses further calls and
 * dispose() only drops it. A healthy sandbox's instance is recycled on dispose: the next restore
 * into it overwrites everything this sandbox could have written.
 */
export class Sandbox implements Disposable, LiveSandbox {
  private deadline = 0;
  private interrupted = false;
  private poisoned: SandboxFault | null = null;
  private disposed = false;
  private hostRead: HostRead;
  private awake: Machine | null = null;
  /** Set while the sandbox sleeps: its image, restored when it is next called. */
  private dormant: SandboxImage | null = null;
  /**
   * While the sandbox has run nothing since it was restored from an image but the ops of a reset
   * (configure, then the env's init, which wrote no record), those ops are a cheaper copy of it
   * than a capture: it sleeps as this recipe, and waking restores the image and runs the same ops
   * again, which the seeded RNG and virtual clock make give the same memory byte for byte. So a
   * burst of resets past the live limit puts freshly reset sandboxes to sleep without copying
   * them. Null once it ran anything else.
   */
  private recipe: Recipe | null = null;
  /** Set while the sandbox sleeps as its recipe. */
  private dormantRecipe: Recipe | null = null;
  private replaying = false;

  private constructor(
    /** Owns this sandbox's instance while it is awake, and puts it to sleep when room is needed. */
    private readonly host: SandboxHost,
    readonly mode: SandboxMode,
    readonly limits: SandboxLimits,
    private readonly stackBytes: number,
    config: SandboxConfig,
  ) {
    this.hostRead = config.hostRead;
    host.adopt();
  }

  /** The memory cap of this sandbox's instance (instances are only exchanged between equal caps). */
  get cap(): number {
    return memoryCap(this.limits);
  }

  private get machine(): Machine {
    if (this.awake === null) {
      this.assertUsable(); // disposed (by its owner, or by its host's dispose) is not asleep
      this.wake();
    }
    return this.awake!;
  }

  private attach(m: Machine): void {
    this.awake = m;
    this.host.touch(this);
  }

  /** Captures this sandbox and gives its instance back (called by makeRoom, between guest calls). */
  sleep(): void {
    this.host.forget(this);
    if (this.awake === null) return;
    if (this.poisoned) {
      dropInstance(this.awake.instance); // a faulted instance is never reused
      this.awake = null;
      return;
    }
    if (this.recipe) {
      this.dormantRecipe = this.recipe;
      this.host.slept("recipe");
    } else {
      this.dormant = this.capture(true);
      this.host.slept("captured");
    }
    this.host.recycle(this.awake.release(), true);
    this.awake = null;
  }

  private wake(): void {
    const plan = this.dormantRecipe;
    const image = plan ? plan.image : this.dormant;
    if (!image) throw new SandboxFault("env_crashed", "sandbox has neither a machine nor an image");
    const inst = this.host.instanceForWake(this.cap);
    if (!inst) throw this.poison(new SandboxFault("env_crashed", "no wasm instance was free to wake this sandbox"));
    this.attach(Machine.restore(inst, image.machine, this.target));
    this.dormant = null;
    if (!plan) return;
    this.dormantRecipe = null;
    this.replaying = true;
    try {
      for (const [op, args] of plan.ops) {
        if (!this.dispatch(op, ...args).ok) throw this.poison(new SandboxFault("env_crashed", `waking the sandbox: ${op} did not run as it first did`));
      }
    } finally {
      this.replaying = false;
    }
    this.recipe = plan;
  }

  /** The guest's calls into the host land here: only `hostRead(op, collection, id)` exists. */
  private readonly target = {
    hostCall: (_self: number, argc: number, argv: number): number => {
      if (argc !== 3) return 0;
      const m = this.machine;
      const text = this.hostRead(m.argString(argv, 0), m.argString(argv, 1), m.argString(argv, 2));
      return text === undefined ? 0 : m.newString(text);
    },
    shouldInterrupt: (): boolean => this.pastDeadline(),
    // asked every DEFAULT_FUEL_ALLOWANCE loop iterations or calls of wasm code, native builtins
    // included: past the deadline the call is stopped right there (guard() makes it env_timeout)
    fuel: (): number => {
      if (this.pastDeadline()) throw new DeadlinePassed();
      return DEFAULT_FUEL_ALLOWANCE;
    },
  };

  /** True (and the call marked interrupted) once the running guest call is past its deadline. */
  private pastDeadline(): boolean {
    if (this.deadline === 0 || performance.now() <= this.deadline) return false;
    this.interrupted = true;
    return true;
  }

  /** A sandbox built from nothing: a fresh instance, a new runtime, the prelude installed and configured. */
  static async create(host: SandboxHost, options: SandboxOptions): Promise<Sandbox> {
    const stackBytes = Math.min(options.limits.stackBytes, safeGuestStackBytes());
    const sandbox = new Sandbox(host, options.mode, options.limits, stackBytes, options);
    try {
      await host.withInstance(memoryCap(options.limits), true, (inst) => sandbox.attach(Machine.create(inst, stackBytes, sandbox.target)));
    } catch (e) {
      sandbox.dispose();
      throw e;
    }
    try {
      sandbox.install();
      sandbox.configure(options);
    } catch (e) {
      sandbox.dispose();
      throw e;
    }
    return sandbox;
  }

  /** A sandbox continuing from an image (usually recycled instance + memory copy), then configured. */
  static async restore(host: SandboxHost, image: SandboxImage, config: SandboxConfig | null, hostRead: HostRead): Promise<Sandbox> {
    const sandbox = new Sandbox(host, image.mode, image.limits, image.stackBytes, { seed: [0, 0, 0, 0], clockMs: 0, tickMs: 0, hostRead });
    try {
      await host.withInstance(image.machine.maxBytes, false, (inst) => sandbox.attach(Machine.restore(inst, image.machine, sandbox.target)));
    } catch (e) {
      sandbox.dispose();
      throw e;
    }
    sandbox.recipe = { image, ops: [] };
    if (config) {
      try {
        sandbox.configure(config);
      } catch (e) {
        sandbox.dispose();
        throw e;
      }
    }
    return sandbox;
  }

  private install(): void {
    const m = this.machine;
    const installer = this.guard(() => m.eval(PRELUDE, "prelude.js"), "prelude");
    const hostRead = m.newHostFunction("hostRead");
    const config = m.newString(JSON.stringify({ mode: this.mode }));
    try {
      m.dispatcher = this.guard(() => m.callValues(installer, [hostRead, config]), "prelude install");
    } finally {
      m.free(config);
      m.free(hostRead);
      m.free(installer);
    }
  }

  private configure(config: SandboxConfig): void {
    this.hostRead = config.hostRead;
    const out = this.dispatch("configure", JSON.stringify({ seed: config.seed, clockMs: config.clockMs, tickMs: config.tickMs }));
    if (!out.ok) throw this.poison(new SandboxFault("env_crashed", `configure: ${out.error.message}`));
  }

  /** Captures this sandbox now (between calls). `sparse` for images kept and restored many times. */
  capture(sparse = true): SandboxImage {
    this.assertUsable();
    if (this.dormant) return this.dormant; // already an image (sparse), and immutable
    return { machine: this.machine.capture(sparse), mode: this.mode, limits: this.limits, stackBytes: this.stackBytes };
  }

  /** Evaluates trusted-shape, untrusted-content source (an env class) at global scope. */
  evalScript(source: string, filename: string): void {
    this.recipe = null;
    this.machine.free(this.guard(() => this.machine.eval(source, filename), filename));
  }

  /** Calls a prelude op; the guest answers with JSON text that is size-checked and parsed here. */
  dispatch(op: string, ...args: string[]): GuestResult {
    const m = this.machine; // wakes a sleeping sandbox (replaying its recipe) before this op runs
    const recipe = this.replaying ? null : this.recipe;
    // only a reset's ops keep the recipe (see `recipe`); anything else runs on from a real capture
    this.recipe = recipe && RECIPE_OPS[recipe.ops.length] === op ? recipe : null;
    const out = this.guard(() => m.call(m.dispatcher, [op, ...args]), op);
    let text: string;
    try {
      text = m.getString(out);
    } finally {
      m.free(out);
    }
    // Guest code can catch an out-of-memory error and carry on, but linear memory never shrinks:
    // a sandbox that has grown to its cap is spent, whatever the guest reported.
    if (this.nearCap()) throw this.poison(new SandboxFault("env_oom", `${op}: the sandbox reached its ${m.maxBytes}-byte memory cap`));
    if (text.length > this.limits.maxOutputBytes) {
      throw this.poison(new SandboxFault("env_output_invalid", `output of ${text.length} bytes is over the ${this.limits.maxOutputBytes}-byte limit (maxOutputBytes)`));
    }
    // The envelope is built by the prelude with functions captured before guest code ran, but the
    // values inside pass through whatever the guest did to its realm (a patched toJSON, say): trust
    // only what validates.
    // JSON text never holds a raw control character: the first U+001E ends the envelope (a NUL would
    // end the C string the text is read from)
    const cut = text.indexOf("\u001e");
    const trailer = cut < 0 ? undefined : text.slice(cut + 1);
    let parsed: unknown;
    try {
      parsed = JSON.parse(cut < 0 ? text : text.slice(0, cut));
    } catch {
      throw this.poison(new SandboxFault("env_output_invalid", `${op}: the sandbox answered with text that is not JSON`));
    }
    const r = parsed as { ok?: unknown; value?: unknown; error?: { name?: unknown; message?: unknown } };
    if (r !== null && typeof r === "object" && r.ok === true && "value" in r) {
      if (this.recipe) this.keepInRecipe(this.recipe, op, args, r.value);
      return trailer === undefined ? { ok: true, value: r.value } : { ok: true, value: r.value, trailer };
    }
    this.recipe = null;
    if (r !== null && typeof r === "object" && r.ok === false && r.error !== null && typeof r.error === "object" && typeof r.error.name === "string" && typeof r.error.message === "string") {
      return { ok: false, error: { name: r.error.name, message: r.error.message } };
    }
    throw this.poison(new SandboxFault("env_output_invalid", `${op}: the sandbox's answer does not have the prelude's shape (was a builtin patched?)`));
  }

  /**
   * Adds a reset op to the recipe, unless the env's init wrote records: those go to the host's
   * state, which the same init run again on waking would then read back changed.
   */
  private keepInRecipe(recipe: Recipe, op: string, args: string[], value: unknown): void {
    const records = (value as { changes?: { records?: unknown[] } } | null)?.changes?.records;
    if (op === "init" && !(Array.isArray(records) && records.length === 0)) this.recipe = null;
    else recipe.ops.push([op, args]);
  }

  private nearCap(): boolean {
    return this.machine.capHit || this.machine.memoryBytes >= this.machine.maxBytes * 0.9;
  }

  private assertUsable(): void {
    if (this.poisoned) throw this.poisoned;
    if (this.disposed) throw new SandboxFault("env_crashed", "sandbox already disposed");
  }

  /**
   * Runs one guest entry under the deadline and turns every way it can go wrong into either a
   * GuestEvalError (guest code threw) or a SandboxFault (the sandbox can no longer be trusted).
   * Faults are classified by what happened (the deadline passed, memory reached its cap, the host
   * stack or wasm trapped), never by the text of a guest-made error.
   */
  private guard(run: () => { ok: true; value: number } | { ok: false; error: number }, what: string): number {
    this.assertUsable();
    void this.machine; // wakes a sleeping sandbox
    this.host.touch(this); // most recently used
    this.interrupted = false;
    // our own prelude gets a budget of its own: an env's short per-call deadline is for its code,
    // and compiling the prelude on a loaded machine must not fail the env's reset
    const budget = what === "prelude" || what === "prelude install" ? Math.max(this.limits.callTimeoutMs, PRELUDE_BUDGET_MS) : this.limits.callTimeoutMs;
    this.deadline = performance.now() + budget;
    let result: { ok: true; value: number } | { ok: false; error: number };
    const deadline = this.deadline;
    const monitor = this.host.monitor;
    monitor?.start(Date.now() + budget);
    try {
      result = run();
      // a native builtin can overrun the deadline without the interrupt handler ever being asked:
      // a call that finished late is a timeout all the same
      if (performance.now() > deadline) this.interrupted = true;
    } catch (e) {
      // stopped by the fuel check: the call ran past its deadline inside wasm code (usually a native
      // builtin; a JS loop is usually stopped first by the interrupt handler, but either may be
      // first). The same text either way: which one fired is timing, and a message that varied
      // with it would change synth's re-ask prompts (and their cache keys) from run to run.
      if (this.interrupted) throw this.poison(new SandboxFault("env_timeout", `${what}: exceeded the ${budget} ms deadline (${budget === this.limits.callTimeoutMs ? "callTimeoutMs" : "the prelude's own budget"})`));
      if (e instanceof MachineOutOfMemory || this.nearCap()) throw this.poison(new SandboxFault("env_oom", `${what}: out of memory (limit ${this.machine.maxBytes} bytes)`));
      // a host-side exception thrown through wasm frames (stack overflow, abort) leaves QuickJS inconsistent
      throw this.poison(new SandboxFault("env_crashed", `${what}: sandbox aborted (${e instanceof Error ? e.message : String(e)})`));
    } finally {
      this.deadline = 0;
      monitor?.end();
    }
    if (result.ok && this.interrupted) {
      this.machine.free(result.value);
      throw this.poison(new SandboxFault("env_timeout", `${what}: exceeded the ${budget} ms deadline (${budget === this.limits.callTimeoutMs ? "callTimeoutMs" : "the prelude's own budget"})`));
    }
    if (result.ok) return result.value;
    const errorHandle = result.error;
    if (this.interrupted) throw this.poison(new SandboxFault("env_timeout", `${what}: exceeded the ${budget} ms deadline (${budget === this.limits.callTimeoutMs ? "callTimeoutMs" : "the prelude's own budget"})`));
    if (this.nearCap()) throw this.poison(new SandboxFault("env_oom", `${what}: out of memory (limit ${this.machine.maxBytes} bytes)`));
    // Reading a guest error runs guest code (getters); read name/message as plain strings, under a deadline.
    let message = "unknown error";
    try {
      this.deadline = performance.now() + this.limits.callTimeoutMs;
      const name = this.machine.stringProp(errorHandle, "name");
      const msg = this.machine.stringProp(errorHandle, "message");
      message = name ? `${name}: ${msg}` : msg;
    } catch {
      /* unreadable error value */
    } finally {
      this.deadline = 0;
      if (!this.interrupted) this.machine.free(errorHandle);
    }
    if (this.interrupted) throw this.poison(new SandboxFault("env_timeout", `${what}: exceeded the deadline while reading an error`));
    // the prelude's dispatcher catches everything guest code throws, so an error escaping a prelude
    // op means QuickJS itself could not go on (e.g. a stack overflow inside the handler)
    if (what === "prelude" || what === "prelude install" || what === "configure" || PRELUDE_OPS.has(what)) {
      throw this.poison(new SandboxFault("env_crashed", `${what}: the sandbox could not complete the call (${message})`));
    }
    throw new GuestEvalError(message);
  }

  private poison(fault: SandboxFault): SandboxFault {
    this.poisoned ??= fault;
    this.host.forget(this);
    return fault;
  }

  /** Recycles a healthy sandbox's instance; a poisoned one is just dropped (it may abort on free). */
  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    this.host.forget(this);
    this.host.release();
    this.dormant = null;
    this.dormantRecipe = null;
    const m = this.awake;
    this.awake = null;
    if (!m) return;
    if (this.poisoned) dropInstance(m.instance);
    else this.host.recycle(m.release());
  }

  [Symbol.dispose](): void {
    this.dispose();
  }
}

/** The prelude's dispatcher ops: an error escaping one of them is a sandbox fault, not a guest error. */
/** What compiling and installing the prelude (our code, once per image) may take at most. */
const PRELUDE_BUDGET_MS = 10_000;
const PRELUDE_OPS = new Set(["init", "call", "methods", "configure", "check"]);

function memoryCap(limits: SandboxLimits): number {
  return Math.max(256, Math.ceil(limits.memoryBytes / 65536)) * 65536;
}
