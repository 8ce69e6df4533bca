import type { IncomingMessage, ServerResponse } from "node:http";
import { asClientAbort } from "./http-timeouts.js";
import { McpHttpError } from "./mcp-error.js";

/** Reads a request body up to `max` bytes; a larger one is refused before it is parsed. */
export async function readBody(req: IncomingMessage, max: number): Promise<Buffer> {
  const declared = Number(req.headers["content-length"] ?? NaN);
  const tooLarge = async () => {
    await discardRest(req, max);
    return new McpHttpError("payload_too_large", `the request body is over ${max} bytes (--max-body-bytes)`);
  };
  if (declared > max) throw await tooLarge();
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of req as AsyncIterable<Buffer>) {
      size += chunk.length;
      if (size > max) throw await tooLarge();
      chunks.push(chunk);
    }
  } catch (e) {
    throw asClientAbort(e, req);
  }
  return Buffer.concat(chunks);
}

/**
 * Reads and drops the rest of a refused body before the 413 goes out, so a client that sends the
 * whole body before reading (Python's urllib, requests) gets the answer instead of a broken pipe.
 * A body declared or found over 4x the limit is not read on: the connection is cut there, so a
 * refused body costs reading, never memory, and not without end.
 */
function discardRest(req: IncomingMessage, max: number): Promise<void> {
  const cap = 4 * max;
  if (Number(req.headers["content-length"] ?? NaN) > cap) return Promise.resolve();
  return new Promise<void>((resolve) => {
    let dropped = 0;
    req.on("data", (chunk: Buffer) => {
      dropped += chunk.length;
      if (dropped > cap) {
        req.socket.destroy();
        resolve();
      }
    });
    req.once("end", () => resolve());
    req.once("close", () => resolve());
    req.resume();
  });
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
