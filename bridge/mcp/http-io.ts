import type { IncomingMessage, ServerResponse } from "node:http";
import { McpHttpError } from "./mcp-error.js";

/** Reads a request body up to `max` bytes; a larger one is refused before it is parsed. */
export async function readBody(req: IncomingMessage, max: number): Promise<Buffer> {
  const declared = Number(req.headers["content-length"] ?? NaN);
  const tooLarge = () => new McpHttpError("payload_too_large", `the request body is over ${max} bytes (--max-body-bytes)`);
  if (declared > max) throw tooLarge();
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > max) throw tooLarge();
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}

/** Parses a JSON body; bad JSON is `bad_request`. An empty body is `undefined`. */
export function parseJson(body: Buffer): unknown {
  if (body.length === 0) return undefined;
  try {
    return JSON.parse(body.toString("utf8")) as unknown;
  } catch (e) {
    throw new McpHttpError("bad_request", `the body is not JSON: ${(e as Error).message}`);
  }
}

export function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  if (res.headersSent) {
    res.end();
    return;
  }
  const text = JSON.stringify(body);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text), ...headers });
  res.end(text);
}
