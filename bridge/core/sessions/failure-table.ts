import { isErrorCode, isInternalErrorCode, ProtocolError, wireCode, type ErrorCode } from "../../../protocol/error-codes.js";
import { RuntimeError } from "../engine/env-runtime.js";

/** A front's own code for a failure, and the HTTP status it answers with (ignored where there is none). */
export interface FrontCode {
  code: string;
  status: number;
}

/** How one failure reads on each front: the ZeroMQ wire's code, MCP's (HTTP status, tool error and JSON-RPC `data.code`), the UI's. */
export interface FailureRow {
  wire: ErrorCode;
  mcp: FrontCode;
  ui: FrontCode;
}

/** The same code on every front: the HTTP status over MCP, then over the UI. */
const same = (code: ErrorCode, mcp: number, ui: number): FailureRow => ({ wire: code, mcp: { code, status: mcp }, ui: { code, status: ui } });

/**
 * THE table from failure to what each front answers (docs/protocol.md §5, docs/mcp.md, docs/ui.md).
 * Keyed by the protocol's closed code list, so a code added there fails to compile until each front's
 * answer is decided here. MCP answers 500 for what it has no status of its own for; the UI 422
 * (the env's or the request's fault, not ours). The UI names its sessions by their episode id, so a
 * session that is gone reads there as `unknown_episode`.
 */
export const FAILURES: Readonly<Record<ErrorCode, FailureRow>> = {
  bad_request: same("bad_request", 400, 400),
  unsupported_version: same("unsupported_version", 500, 422),
  unknown_op: same("unknown_op", 500, 422),
  unknown_env: same("unknown_env", 500, 404),
  unknown_scenario: same("unknown_scenario", 400, 404),
  scenario_quarantined: same("scenario_quarantined", 500, 422),
  unknown_session: { wire: "unknown_session", mcp: { code: "unknown_session", status: 404 }, ui: { code: "unknown_episode", status: 404 } },
  session_closed: { wire: "session_closed", mcp: { code: "session_closed", status: 404 }, ui: { code: "unknown_episode", status: 404 } },
  session_lost: same("session_lost", 500, 422),
  episode_done: same("episode_done", 409, 409),
  unknown_snapshot: same("unknown_snapshot", 404, 404),
  snapshot_incompatible: same("snapshot_incompatible", 500, 422),
  too_many_sessions: same("too_many_sessions", 503, 422),
  too_large: same("too_large", 413, 422),
  overloaded: same("overloaded", 503, 422),
  env_load_failed: same("env_load_failed", 500, 422),
  env_timeout: same("env_timeout", 500, 422),
  env_oom: same("env_oom", 500, 422),
  env_crashed: same("env_crashed", 500, 422),
  env_output_invalid: same("env_output_invalid", 500, 422),
  user_simulator_failed: same("user_simulator_failed", 500, 422),
  recording_unavailable: same("recording_unavailable", 500, 422),
  engine_unavailable: same("engine_unavailable", 500, 422),
  shutting_down: same("shutting_down", 503, 503),
  internal_error: same("internal_error", 500, 500),
};

/** A failure named by its protocol code. */
export interface Failure {
  code: ErrorCode;
  message: string;
}

/** Any thrown value as a failure: typed errors keep (or map) their code; anything else is `internal_error`, a bug of ours. */
export function failureOf(e: unknown): Failure {
  if (e instanceof ProtocolError) return { code: e.code, message: e.message };
  if (e instanceof RuntimeError) return { code: runtimeCode(e.code), message: e.message };
  return { code: "internal_error", message: e instanceof Error ? e.message : String(e) };
}

/**
 * A runtime error's code as a protocol code: the runtime's own codes (`closed`, `reset_needed`,
 * `unknown_episode`) through the one table of protocol/error-codes.ts (WIRE_CODE_OF: the client's
 * session outliving its episode is its session closed, not a bug of ours); a code outside the
 * closed union (which only a bug of ours could carry across the engine seam) is `internal_error`.
 */
export function runtimeCode(code: string): ErrorCode {
  return isInternalErrorCode(code) ? wireCode(code) : isErrorCode(code) ? code : "internal_error";
}

/** True for the errors the table maps (the session service's and the runtime's). */
export function isFailure(e: unknown): e is ProtocolError | RuntimeError {
  return e instanceof ProtocolError || e instanceof RuntimeError;
}
