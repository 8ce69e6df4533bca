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
