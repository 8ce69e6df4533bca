import type { IncomingMessage, ServerResponse } from "node:http";
import { asClientAbort } from "../mcp/http-timeouts.js";

/** An error the API answers with `{error: {code, message}}`; `code` is a protocol error code where one fits. */
export class ApiError extends Error {
  override readonly name = "ApiError";
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

/** HTTP status for the runtime's error codes (anything unlisted is the env's or the request's fault, not ours). */
const STATUS: Record<string, number> = {
  bad_request: 400,
  invalid_argument: 400,
  unauthorized: 401,
  forbidden: 403,
  unknown_scenario: 404,
  unknown_episode: 404,
  unknown_env: 404,
  unknown_snapshot: 404,
  not_found: 404,
  episode_done: 409,
  too_many_episodes: 429,
  request_too_large: 413,
  internal_error: 500,
};

export function statusFor(code: string): number {
  return STATUS[code] ?? 422;
}

/** Request bodies are small JSON documents (an action, a list of episode ids): anything bigger is refused before it is read. */
export const MAX_BODY_BYTES = 1 << 20;

export async function readJsonBody(req: IncomingMessage): Promise<Record<string, unknown>> {
  const type = req.headers["content-type"] ?? "";
  // a JSON content type cannot be sent cross-site without a CORS preflight, which is never granted
  if (!/^application\/json\b/.test(type)) throw new ApiError(415, "bad_request", "send the body as application/json");
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of req as AsyncIterable<Buffer>) {
      size += chunk.length;
      if (size > MAX_BODY_BYTES) throw new ApiError(413, "request_too_large", `the request body is over ${MAX_BODY_BYTES} bytes`);
      chunks.push(chunk);
    }
  } catch (e) {
    throw e instanceof ApiError ? e : asClientAbort(e, req);
  }
  const text = Buffer.concat(chunks).toString("utf8");
  let body: unknown;
  try {
    body = text === "" ? {} : JSON.parse(text);
  } catch (e) {
    throw new ApiError(400, "bad_request", `the body is not JSON: ${(e as Error).message}`);
  }
  if (!body || typeof body !== "object" || Array.isArray(body)) throw new ApiError(400, "bad_request", "the body must be a JSON object");
  return body as Record<string, unknown>;
}

export function sendJson(res: ServerResponse, status: number, value: unknown): void {
  const body = JSON.stringify(value);
  res.writeHead(status, { "content-type": "application/json; charset=utf-8", "cache-control": "no-store", "content-length": Buffer.byteLength(body) });
  res.end(body);
}

export function sendError(res: ServerResponse, e: ApiError): void {
  sendJson(res, e.status, { error: { code: e.code, message: e.message } });
}

export function str(body: Record<string, unknown>, key: string, optional?: false): string;
export function str(body: Record<string, unknown>, key: string, optional: true): string | undefined;
export function str(body: Record<string, unknown>, key: string, optional = false): string | undefined {
  const v = body[key];
  if (v === undefined && optional) return undefined;
  if (typeof v !== "string" || v === "") throw new ApiError(400, "bad_request", `${key} must be a non-empty string`);
  return v;
}
