import { readFileSync } from "node:fs";
import type { EnvBundle } from "../../envs/load-bundle.js";
import { DEFAULT_LIMITS, type SandboxLimits } from "../sandbox/limits.js";
import { GuestEvalError, Sandbox } from "../sandbox/sandbox.js";
import { SandboxFault } from "../sandbox/sandbox-fault.js";
import type { PatchOp } from "../state/json-patch.js";
import type { StateBase } from "../state/state-base.js";
import { StateTracker, type GuestChanges } from "../state/state-tracker.js";
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

  static async open(bundle: EnvBundle, base: StateBase, options: { seed: number; limits?: Partial<SandboxLimits> }): Promise<EnvSession> {
    const tracker = new StateTracker(base);
    const sandbox = await Sandbox.create({
      mode: "env",
      limits: limitsFor(bundle, options.limits),
      seed: seedWords(options.seed),
      clockMs: Date.parse(bundle.manifest.clock.start),
      tickMs: bundle.manifest.clock.tick_ms,
      hostRead: (op, coll, id) => base.read(op, coll, id),
    });
    try {
      const format = bundle.manifest.observation_format;
      if (format === "python") sandbox.evalScript(BIND_PYTHON_VALUES, "python-values.js");
      sandbox.evalScript(bundle.source, bundle.manifest.source_file);
      const init = sandbox.dispatch("init", bundle.manifest.class_name, JSON.stringify(base.layout()), JSON.stringify({ observation_format: format }));
      if (!init.ok) throw new EnvLoadError(`${init.error.name}: ${init.error.message}`);
      const { methods, changes } = init.value as { methods: string[]; changes: GuestChanges };
      tracker.apply(changes);
      return new EnvSession(sandbox, tracker, methods, tracker.snapshot());
    } catch (e) {
      sandbox.dispose();
      if (e instanceof GuestEvalError) throw new EnvLoadError(e.message);
      throw e;
    }
  }

  /** Runs one tool. Guest exceptions come back as `error`; a SandboxFault means the session is dead. */
  call(name: string, args: Record<string, unknown>): CallOutcome {
    const out = this.sandbox.dispatch("call", name, JSON.stringify(args));
    if (!out.ok) return { kind: "error", error: out.error, diff: [] };
    const v = out.value as { result?: string; text?: string; error?: { name: string; message: string }; changes: GuestChanges };
    const diff = this.tracker.apply(v.changes);
    if (v.error) return { kind: "error", error: v.error, diff };
    return v.text === undefined ? { kind: "result", json: v.result ?? "null", diff } : { kind: "result", json: v.result ?? "null", text: v.text, diff };
  }

  get alive(): boolean {
    return this.sandbox.alive;
  }

  get memoryBytes(): number {
    return this.sandbox.memoryBytes;
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

export { SandboxFault };
