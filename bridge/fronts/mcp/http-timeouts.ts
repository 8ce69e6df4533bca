import type { IncomingMessage, ServerOptions } from "node:http";

/**
 * How long the HTTP fronts (`envscaler mcp`, `envscaler ui`) wait for a whole request (headers and
 * body) to arrive, set explicitly rather than left at Node's 300 s: a body drip-fed a byte at a
 * time holds a connection and its buffer only this long. Node checks every
 * `connectionsCheckingInterval`, so a slow request is cut between the timeout and the timeout plus
 * that interval (a quarter of the timeout, at most 30 s); it gets 408 and the connection closes.
 */
export const REQUEST_TIMEOUT_MS = 120_000;

export function timeoutOptions(requestTimeoutMs: number, headersTimeoutMs: number): ServerOptions {
  return {
    requestTimeout: requestTimeoutMs,
    // Node refuses a headers timeout longer than the request timeout
    headersTimeout: Math.min(headersTimeoutMs, requestTimeoutMs),
    connectionsCheckingInterval: Math.max(250, Math.min(30_000, Math.floor(requestTimeoutMs / 4))),
  };
}

/** The client went away while its request was being read (an aborted upload): not a failure of ours, so not logged as one. */
export class ClientAborted extends Error {
  override readonly name = "ClientAborted";
  constructor() {
    super("the client aborted the request before its body was read");
  }
}

/** A read error that is the client's going away (socket reset, request aborted), as a ClientAborted; anything else as it was. */
export function asClientAbort(e: unknown, req: IncomingMessage): unknown {
  const code = (e as NodeJS.ErrnoException | null)?.code;
  if (req.destroyed || code === "ECONNRESET" || code === "ECONNABORTED" || (e as Error | null)?.message === "aborted") return new ClientAborted();
  return e;
}
