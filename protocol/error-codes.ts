/** The closed list of protocol error codes (docs/protocol.md §5). Clients map each to an exception. */
export const ERROR_CODES = [
  "bad_request",
  "unsupported_version",
  "unknown_op",
  "unknown_env",
  "unknown_scenario",
  "scenario_quarantined",
  "unknown_session",
  "session_closed",
  "session_lost",
  "episode_done",
  "unknown_snapshot",
  "snapshot_incompatible",
  "too_many_sessions",
  "too_large",
  "overloaded",
  "env_load_failed",
  "env_timeout",
  "env_oom",
  "env_crashed",
  "env_output_invalid",
  "user_simulator_failed",
  "recording_unavailable",
  "engine_unavailable",
  "shutting_down",
  "internal_error",
] as const;

export type ErrorCode = (typeof ERROR_CODES)[number];

export function isErrorCode(code: string): code is ErrorCode {
  return (ERROR_CODES as readonly string[]).includes(code);
}

/**
 * Codes the core (EnvRuntime, its engines, an Episode) raises that are not wire codes as they
 * stand: each front turns them into one with wireCode, so a front never passes a core code through
 * unchecked. Everything else the core raises is already an ErrorCode.
 */
export const INTERNAL_ERROR_CODES = [
  /** The runtime or the episode was closed under the request. */
  "closed",
  /** An episode was stepped before its reset. */
  "reset_needed",
  /** No such episode in the runtime (closed, or never started): the session that named it outlived it. */
  "unknown_episode",
] as const;
export type InternalErrorCode = (typeof INTERNAL_ERROR_CODES)[number];

/** Every code a core failure carries: one closed union from the engine seam to the fronts. */
export type CoreErrorCode = ErrorCode | InternalErrorCode;

/** The one table from an internal code to the wire code a client sees for it. */
export const WIRE_CODE_OF: Readonly<Record<InternalErrorCode, ErrorCode>> = {
  closed: "shutting_down",
  reset_needed: "episode_done",
  unknown_episode: "session_closed",
};

export function isInternalErrorCode(code: string): code is InternalErrorCode {
  return (INTERNAL_ERROR_CODES as readonly string[]).includes(code);
}

/** The wire code for a core failure's code. */
export function wireCode(code: CoreErrorCode): ErrorCode {
  return isInternalErrorCode(code) ? WIRE_CODE_OF[code] : code;
}

/** A request the bridge refuses; becomes an `ok: false` reply with this code. */
export class ProtocolError extends Error {
  override readonly name = "ProtocolError";
  constructor(
    readonly code: ErrorCode,
    message: string,
  ) {
    super(message);
  }
}
