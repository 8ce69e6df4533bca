import { REQUEST_TIMEOUT_MS } from "./http-timeouts.js";

/** The limits of one `envscaler mcp` process; each is answered with the typed error named here. */
export interface McpLimits {
  /** Open MCP sessions (each owns one episode); one more gets `too_many_sessions` (HTTP 503). @default 1024 */
  maxSessions: number;
  /** Sessions without a request this long are closed and their episode freed; later requests get `session_closed` (HTTP 404). @unit seconds @default 600 */
  idleTimeoutS: number;
  /** Tool calls being run at once over all sessions; more are answered with an `overloaded` tool error. @default 4096 */
  maxInFlight: number;
  /** Tool calls queued on one session (they run one at a time, in arrival order); more get an `overloaded` tool error. @default 16 */
  maxQueuedPerSession: number;
  /** Largest request body; larger ones get `payload_too_large` (HTTP 413) before anything is parsed. @unit bytes @default 4 MiB */
  maxBodyBytes: number;
  /** How long a whole request (headers and body) may take to arrive; a slower one gets 408 and its connection is closed (see http-timeouts.ts). @unit ms @default 120000 */
  requestTimeoutMs: number;
}

export const DEFAULT_MCP_LIMITS: McpLimits = { maxSessions: 1024, idleTimeoutS: 600, maxInFlight: 4096, maxQueuedPerSession: 16, maxBodyBytes: 4 << 20, requestTimeoutMs: REQUEST_TIMEOUT_MS };
