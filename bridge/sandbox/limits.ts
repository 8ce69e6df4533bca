/** Resource limits for one sandbox. Units are in the names. */
export interface SandboxLimits {
  /** Hard cap on the sandbox's WebAssembly memory; the only cap QuickJS cannot exceed. */
  memoryBytes: number;
  /** QuickJS stack budget. Must stay far below the host thread's stack (see engine worker). */
  stackBytes: number;
  /** Deadline for one guest call (a tool call, a check, loading the env), enforced by interrupts. */
  callTimeoutMs: number;
  /** Largest JSON text the guest may hand back from one call. */
  maxOutputBytes: number;
}

export const DEFAULT_LIMITS: SandboxLimits = {
  memoryBytes: 256 * 1024 * 1024,
  stackBytes: 256 * 1024,
  callTimeoutMs: 2000,
  maxOutputBytes: 8 * 1024 * 1024,
};

/** Memory cap rounded to whole WebAssembly pages, never below what the QuickJS build needs to start. */
export function memoryPages(bytes: number): number {
  return Math.max(256, Math.ceil(bytes / 65536));
}
