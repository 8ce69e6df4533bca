import { readFileSync } from "node:fs";
import type { QuickJSContext, QuickJSHandle, QuickJSRuntime } from "quickjs-emscripten-core";
import { safeGuestStackBytes, type SandboxLimits } from "./limits.js";
import { newCappedModule, type CappedModule } from "./quickjs-loader.js";
import { SandboxFault } from "./sandbox-fault.js";

const PRELUDE = readFileSync(new URL("./prelude.js", import.meta.url), "utf8");

/** Reads state on the guest's behalf: ("get", collection, id) → record JSON, ("keys", c) → JSON id list, ("has", c, id) → "1"/"0". */
export type HostRead = (op: string, collection: string, id: string) => string | undefined;

export interface SandboxOptions {
  /** "env" runs one env instance and its tools; "check" runs check functions over read-only states. */
  mode: "env" | "check";
  limits: SandboxLimits;
  /** Seeds the guest's Math.random (four 32-bit words). */
  seed: [number, number, number, number];
  /** Virtual clock start, in ms since the Unix epoch. */
  clockMs: number;
  /** How far the virtual clock advances per tool call. */
  tickMs: number;
  hostRead: HostRead;
}

/** What a guest op returned: a value, or the exception the guest code threw. */
export type GuestResult = { ok: true; value: unknown } | { ok: false; error: { name: string; message: string } };

/**
 * Told when a guest call starts and ends, with the call's deadline. The engine worker publishes this
 * to its watchdog, which stops the whole worker if a native builtin ignores the interrupt handler.
 */
export interface CallMonitor {
  start(deadlineMs: number): void;
  end(): void;
}
let monitor: CallMonitor | null = null;
export function setCallMonitor(m: CallMonitor | null): void {
  monitor = m;
}

/**
 * A QuickJS instance made ahead of time, before anyone asked for it: capped memory, runtime limits,
 * the prelude compiled into its installer function. Nothing is configured (seed, clock, mode, state
 * access) and no guest code has run in it, so handing it to any env or check is the same as
 * creating it then; it only moves ~5 ms of instantiation and prelude compilation off reset and
 * scoring.
 */
interface Prepared {
  capped: CappedModule;
  runtime: QuickJSRuntime;
  context: QuickJSContext;
  installer: QuickJSHandle;
}

/** Prepared instances kept per (memory cap, stack) shape in this thread. */
const POOL_PER_SHAPE = 4;
const pool = new Map<string, Prepared[]>();
const refilling = new Set<string>();

async function prepare(memoryBytes: number, stackBytes: number): Promise<Prepared> {
  const capped = await newCappedModule(memoryBytes);
  const runtime = capped.module.newRuntime();
  // setMemoryLimit only refuses single huge allocations here, which still fails fast on e.g. 'x'.repeat(2**30)
  runtime.setMemoryLimit(capped.maxBytes);
  runtime.setMaxStackSize(stackBytes);
  const context = runtime.newContext();
  const compiled = context.evalCode(PRELUDE, "prelude.js");
  if (compiled.error) {
    const message = context.dump(compiled.error);
    compiled.error.dispose();
    context.dispose();
    runtime.dispose();
    throw new SandboxFault("env_crashed", `prelude: ${JSON.stringify(message)}`);
  }
  return { capped, runtime, context, installer: compiled.value };
}

/** Tops the shape's pool up in the background, after the current turn's work. */
function refill(key: string, memoryBytes: number, stackBytes: number): void {
  if (refilling.has(key)) return;
  refilling.add(key);
  setImmediate(() => {
    void (async () => {
      try {
        const list = pool.get(key) ?? [];
        pool.set(key, list);
        while (list.length < POOL_PER_SHAPE) list.push(await prepare(memoryBytes, stackBytes));
      } catch {
        /* the next create() prepares its own instance and reports the problem there */
      } finally {
        refilling.delete(key);
      }
    })();
  });
}

/** Thrown for env source that does not even evaluate (syntax errors, top-level throws). */
export class GuestEvalError extends Error {
  override readonly name = "GuestEvalError";
}

/**
 * One QuickJS instance with its own capped memory, a stack budget, a per-call deadline, no host
 * capabilities except `hostRead`, and the prelude installed. Every call crosses as JSON text.
 * After any SandboxFault the sandbox is poisoned: it refuses further calls and dispose() only drops it.
 */
export class Sandbox implements Disposable {
  private deadline = 0;
  private interrupted = false;
  private poisoned: SandboxFault | null = null;
  private disposed = false;
  private readonly scope: QuickJSHandle[] = [];
  private dispatcher!: QuickJSHandle;

  private constructor(
    private readonly capped: CappedModule,
    private readonly runtime: QuickJSRuntime,
    private readonly context: QuickJSContext,
    readonly limits: SandboxLimits,
  ) {}

  static async create(options: SandboxOptions): Promise<Sandbox> {
    const stackBytes = Math.min(options.limits.stackBytes, safeGuestStackBytes());
    const key = `${options.limits.memoryBytes}:${stackBytes}`;
    const { capped, runtime, context, installer } = pool.get(key)?.pop() ?? (await prepare(options.limits.memoryBytes, stackBytes));
    refill(key, options.limits.memoryBytes, stackBytes);
    const sandbox = new Sandbox(capped, runtime, context, options.limits);
    runtime.setInterruptHandler(() => {
      if (sandbox.deadline !== 0 && performance.now() > sandbox.deadline) {
        sandbox.interrupted = true;
        return true;
      }
      return false;
    });
    try {
      sandbox.install(options, installer);
    } catch (e) {
      sandbox.dispose();
      throw e;
    }
    return sandbox;
  }

  private install(options: SandboxOptions, installer: QuickJSHandle): void {
    const ctx = this.context;
    const hostRead = ctx.newFunction("hostRead", (opH, collH, idH) => {
      const text = options.hostRead(ctx.getString(opH), ctx.getString(collH), ctx.getString(idH));
      return text === undefined ? ctx.undefined : ctx.newString(text);
    });
    this.scope.push(hostRead);
    const config = this.guard(
      () => ctx.evalCode(`(${JSON.stringify({ mode: options.mode, seed: options.seed, clockMs: options.clockMs, tickMs: options.tickMs })})`),
      "prelude config",
    );
    this.dispatcher = this.guard(() => ctx.callFunction(installer, ctx.undefined, hostRead, config), "prelude install");
    installer.dispose();
    config.dispose();
    this.scope.push(this.dispatcher);
  }

  /** Evaluates trusted-shape, untrusted-content source (an env class) at global scope. */
  evalScript(source: string, filename: string): void {
    const handle = this.guard(() => this.context.evalCode(source, filename), filename);
    handle.dispose();
  }

  /** Calls a prelude op; the guest answers with JSON text that is size-checked and parsed here. */
  dispatch(op: string, ...args: string[]): GuestResult {
    const ctx = this.context;
    const handles = [ctx.newString(op), ...args.map((a) => ctx.newString(a))];
    try {
      const out = this.guard(() => ctx.callFunction(this.dispatcher, ctx.undefined, ...handles), op);
      const text = ctx.getString(out);
      out.dispose();
      // Guest code can catch an out-of-memory error and carry on, but linear memory never shrinks:
      // a sandbox that has grown to its cap is spent, whatever the guest reported.
      if (this.memoryBytes >= this.capped.maxBytes * 0.9) {
        throw this.poison(new SandboxFault("env_oom", `${op}: the sandbox reached its ${this.capped.maxBytes}-byte memory cap`));
      }
      if (text.length > this.limits.maxOutputBytes) {
        throw this.poison(new SandboxFault("env_output_invalid", `output of ${text.length} bytes is over the ${this.limits.maxOutputBytes}-byte limit`));
      }
      return JSON.parse(text) as GuestResult;
    } finally {
      if (this.poisoned === null) for (const h of handles) h.dispose();
    }
  }

  /** Bytes of linear memory the guest has grown to (it never shrinks). */
  get memoryBytes(): number {
    return this.capped.memory.buffer.byteLength;
  }

  get alive(): boolean {
    return !this.disposed && this.poisoned === null;
  }

  /**
   * Runs one guest entry under the deadline and turns every way it can go wrong into either a
   * GuestEvalError (guest code threw) or a SandboxFault (the sandbox can no longer be trusted).
   */
  private guard(run: () => { error?: QuickJSHandle; value?: QuickJSHandle } & object, what: string): QuickJSHandle {
    if (this.poisoned) throw this.poisoned;
    if (this.disposed) throw new SandboxFault("env_crashed", "sandbox already disposed");
    this.interrupted = false;
    this.deadline = performance.now() + this.limits.callTimeoutMs;
    let result: { error?: QuickJSHandle; value?: QuickJSHandle };
    monitor?.start(Date.now() + this.limits.callTimeoutMs);
    try {
      result = run();
    } catch (e) {
      // a host-side exception thrown through wasm frames (stack overflow, abort) leaves QuickJS inconsistent
      throw this.poison(new SandboxFault("env_crashed", `${what}: sandbox aborted (${e instanceof Error ? e.message : String(e)})`));
    } finally {
      this.deadline = 0;
      monitor?.end();
    }
    if (result.error === undefined) return result.value as QuickJSHandle;
    const errorHandle = result.error;
    if (this.interrupted) throw this.poison(new SandboxFault("env_timeout", `${what}: exceeded the ${this.limits.callTimeoutMs} ms deadline`));
    if (this.memoryBytes >= this.capped.maxBytes * 0.9) {
      throw this.poison(new SandboxFault("env_oom", `${what}: out of memory (limit ${this.capped.maxBytes} bytes)`));
    }
    // Reading a guest error runs guest code (getters); read name/message as plain strings, under a deadline.
    let message = "unknown error";
    try {
      this.deadline = performance.now() + this.limits.callTimeoutMs;
      const name = this.readStringProp(errorHandle, "name");
      const msg = this.readStringProp(errorHandle, "message");
      message = name ? `${name}: ${msg}` : msg;
    } catch {
      /* unreadable error value */
    } finally {
      this.deadline = 0;
      if (!this.interrupted) errorHandle.dispose();
    }
    if (this.interrupted) throw this.poison(new SandboxFault("env_timeout", `${what}: exceeded the deadline while reading an error`));
    if (what.startsWith("prelude") || /out of memory|stack overflow/i.test(message)) {
      // the prelude's dispatcher catches everything guest code throws, so an escape means QuickJS itself gave up
      throw this.poison(new SandboxFault(/memory/i.test(message) ? "env_oom" : "env_crashed", `${what}: ${message}`));
    }
    throw new GuestEvalError(message);
  }

  private readStringProp(handle: QuickJSHandle, key: string): string {
    const prop = this.context.getProp(handle, key);
    try {
      return this.context.typeof(prop) === "string" ? this.context.getString(prop) : "";
    } finally {
      prop.dispose();
    }
  }

  private poison(fault: SandboxFault): SandboxFault {
    this.poisoned ??= fault;
    return fault;
  }

  /** Frees the QuickJS runtime, or after a fault just lets go of it: a poisoned runtime may abort on free. */
  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    if (this.poisoned) return;
    try {
      for (const h of this.scope.reverse()) if (h.alive) h.dispose();
      this.context.dispose();
      this.runtime.dispose();
    } catch {
      /* a leak assertion in a guest-damaged runtime; the whole wasm instance is dropped anyway */
    }
  }

  [Symbol.dispose](): void {
    this.dispose();
  }
}
