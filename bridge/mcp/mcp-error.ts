import { ProtocolError } from "../../protocol/error-codes.js";
import { RuntimeError } from "../engine/env-runtime.js";

/**
 * The typed error codes of `envscaler mcp` (docs/mcp.md): the bridge protocol's codes where the
 * meaning is the same (too_many_sessions, unknown_scenario, env_timeout, …) plus the few that only
 * an HTTP/MCP front has.
 */
export type McpErrorCode =
  | "bad_request"
  | "unauthorized"
  | "forbidden_origin"
  | "forbidden_host"
  | "payload_too_large"
  | "not_found"
  | "unknown_scenario"
  | "unknown_session"
  | "session_closed"
  | "rollout_in_use"
  | "too_many_sessions"
  | "overloaded"
  | "no_episode"
  | "episode_running"
  | "episode_done"
  | "unknown_snapshot"
  | "too_large"
  | "shutting_down"
  | "internal_error"
  | (string & {});

const STATUS: Record<string, number> = {
  bad_request: 400,
  unknown_scenario: 400,
  unauthorized: 401,
  forbidden_origin: 403,
  forbidden_host: 403,
  not_found: 404,
  unknown_session: 404,
  session_closed: 404,
  unknown_snapshot: 404,
  rollout_in_use: 409,
  no_episode: 409,
  episode_running: 409,
  episode_done: 409,
  payload_too_large: 413,
  too_large: 413,
  too_many_sessions: 503,
  overloaded: 503,
  shutting_down: 503,
};

/** A request refused with a typed code; the HTTP status follows from the code. */
export class McpHttpError extends Error {
  override readonly name = "McpHttpError";
  constructor(
    readonly code: McpErrorCode,
    message: string,
  ) {
    super(message);
  }

  get status(): number {
    return STATUS[this.code] ?? 500;
  }
}

/** Any failure as `{code, message}`: our own errors keep their code; anything unknown is internal. */
export function typedError(e: unknown): { code: string; message: string } {
  if (e instanceof McpHttpError || e instanceof ProtocolError || e instanceof RuntimeError) {
    // the runtime says `closed` when it is shutting down, `unknown_episode` when a session outlived its episode
    const code = e.code === "closed" ? "shutting_down" : e.code === "unknown_episode" ? "session_closed" : e.code;
    return { code, message: e.message };
  }
  return { code: "internal_error", message: e instanceof Error ? e.message : String(e) };
}

/** The HTTP status for a typed error. */
export function statusOf(code: string): number {
  return STATUS[code] ?? 500;
}

/** A JSON-RPC error body carrying the typed code in `data.code` (MCP clients show `message`). */
export function jsonRpcError(code: string, message: string, id: string | number | null = null): object {
  return { jsonrpc: "2.0", id, error: { code: code === "bad_request" ? -32600 : -32000, message: `${code}: ${message}`, data: { code } } };
}
