import { isErrorCode } from "../../../protocol/error-codes.js";
import { failureOf, FAILURES } from "../../core/sessions/failure-table.js";

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

/** The HTTP status of the codes only this front has; the protocol's codes take theirs from failure-table.ts. */
const FRONT_STATUS: Record<string, number> = {
  unauthorized: 401,
  forbidden_origin: 403,
  forbidden_host: 403,
  not_found: 404,
  rollout_in_use: 409,
  no_episode: 409,
  episode_running: 409,
  payload_too_large: 413,
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
    return statusOf(this.code);
  }
}

/** Any failure as `{code, message}`: this front's own errors keep their code; the rest read as MCP's column of failure-table.ts says (anything unknown is internal). */
export function typedError(e: unknown): { code: string; message: string } {
  if (e instanceof McpHttpError) return { code: e.code, message: e.message };
  const f = failureOf(e);
  return { code: FAILURES[f.code].mcp.code, message: f.message };
}

/** The HTTP status for a typed error. */
export function statusOf(code: string): number {
  return isErrorCode(code) ? FAILURES[code].mcp.status : (FRONT_STATUS[code] ?? 500);
}

/** A JSON-RPC error body carrying the typed code in `data.code` (MCP clients show `message`). */
export function jsonRpcError(code: string, message: string, id: string | number | null = null): object {
  return { jsonrpc: "2.0", id, error: { code: code === "bad_request" ? -32600 : -32000, message: `${code}: ${message}`, data: { code } } };
}
