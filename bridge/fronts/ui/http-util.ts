import type { IncomingMessage, ServerResponse } from "node:http";
import { asClientAbort } from "../mcp/http-timeouts.js";
import { failureOf, FAILURES, isFailure } from "../../core/sessions/failure-table.js";

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

/**
 * A failure of the session service or the runtime as this API answers it (the UI's column of
 * failure-table.ts); an ApiError stays as it is, and anything else (a bug of ours) passes through
 * for the server to log and answer 500.
 */
export function asApiError(e: unknown): Error {
  if (e instanceof ApiError || !isFailure(e)) return e instanceof Error ? e : new Error(String(e));
  const f = failureOf(e);
  const ui = FAILURES[f.code].ui;
  return new ApiError(ui.status, ui.code, f.message);
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
