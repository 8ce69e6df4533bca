import { isMainThread, resourceLimits } from "node:worker_threads";

/**
 * The QuickJS stack budget this thread can afford. Deep parser and JSON nesting use far more host
 * (V8) stack per guest frame than QuickJS accounts for (measured: 16x too little, 32x enough); if the
 * host stack overflows first, the runtime is corrupted. So the guest gets 1/64 of the thread's stack:
 * 64 KB on a main thread (~1 MB stack), 1 MB in an engine worker started with ENGINE_STACK_MB.
 */
export function safeGuestStackBytes(): number {
  const hostMb = isMainThread ? 1 : (resourceLimits.stackSizeMb ?? 4);
  return Math.max(32 * 1024, Math.floor((hostMb * 1024 * 1024) / 64));
}

/**
 * The stack of threads that run guest code (engine and check workers). 64 MB (reserved, touched only
 * as used) gives the guest 1 MB: enough for a recursive-descent parser written in JS to reach the
 * nesting limits CPython has (200 parentheses, ~1000 unary operators) inside tau-bench's calculate.
 */
export const ENGINE_STACK_MB = 64;

/** Resource limits for one sandbox. Units are in the names. */
export interface SandboxLimits {
  /** Hard cap on the sandbox's WebAssembly memory; the only cap QuickJS cannot exceed. */
  memoryBytes: number;
  /** QuickJS stack budget; never above safeGuestStackBytes() for the running thread. */
  stackBytes: number;
  /** Deadline for one guest call (a tool call, a check, loading the env), enforced by interrupts. */
  callTimeoutMs: number;
  /** Largest JSON text the guest may hand back from one call. */
  maxOutputBytes: number;
}

export const DEFAULT_LIMITS: SandboxLimits = {
  memoryBytes: 256 * 1024 * 1024,
  stackBytes: safeGuestStackBytes(),
  callTimeoutMs: 2000,
  maxOutputBytes: 8 * 1024 * 1024,
};

/** Memory cap rounded to whole WebAssembly pages, never below what the QuickJS build needs to start. */
export function memoryPages(bytes: number): number {
  return Math.max(256, Math.ceil(bytes / 65536));
}

/** Tool calls one action may make; more are refused as an `invalid_action` observation. */
export const MAX_CALLS_PER_ACTION = 64;
