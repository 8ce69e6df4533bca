import { createHash, timingSafeEqual } from "node:crypto";
import type { IncomingMessage } from "node:http";
import { isIP } from "node:net";
import { McpHttpError } from "./mcp-error.js";

/** 127.0.0.0/8, ::1 and localhost: the addresses only this machine can reach. */
export function isLoopback(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, "").toLowerCase();
  if (h === "localhost" || h === "::1") return true;
  if (h.startsWith("::ffff:")) return isLoopback(h.slice(7));
  return isIP(h) === 4 && h.startsWith("127.");
}

/** The hostname of a Host header or an origin URL, without port or brackets. */
function hostnameOf(value: string): string | null {
  try {
    return new URL(value.includes("://") ? value : `http://${value}`).hostname.replace(/^\[|\]$/g, "").toLowerCase();
  } catch {
    return null;
  }
}

function sameSecret(given: string, expected: string): boolean {
  // hashing first makes the comparison constant-time whatever the lengths
  const a = createHash("sha256").update(given).digest();
  const b = createHash("sha256").update(expected).digest();
  return timingSafeEqual(a, b);
}

export interface GuardOptions {
  /** The address the server is bound to. */
  host: string;
  /** Required as `Authorization: Bearer …` on the MCP endpoint; mandatory when `host` is not loopback. */
  token: string | null;
  /** Origins (scheme://host[:port]) browsers may call from besides loopback ones. */
  allowedOrigins: string[];
  /** Host header names accepted besides loopback names and the bound address (DNS rebinding protection). */
  allowedHosts: string[];
}

/**
 * The checks every request passes before anything else (MCP spec, transports, security warning):
 * a browser Origin must be allowed (a page elsewhere cannot drive the agent's tools), the Host
 * header must name this server when it serves loopback (DNS rebinding: a hostile name resolved to
 * 127.0.0.1 arrives with that name as Host), and the bearer token must match when one is set.
 */
export class RequestGuard {
  private readonly hosts: Set<string>;

  constructor(private readonly options: GuardOptions) {
    if (!isLoopback(options.host) && !options.token) {
      throw new Error(`refusing to serve MCP on ${options.host} without a bearer token: give --token (or ENVSCALER_MCP_TOKEN), or bind a loopback address`);
    }
    this.hosts = new Set(["localhost", "127.0.0.1", "::1", options.host.replace(/^\[|\]$/g, "").toLowerCase(), ...options.allowedHosts.map((h) => h.toLowerCase())]);
  }

  get loopbackOnly(): boolean {
    return isLoopback(this.options.host);
  }

  /** Origin and Host checks (every route). */
  checkOrigin(req: IncomingMessage): void {
    const origin = req.headers.origin;
    if (origin !== undefined) {
      const name = hostnameOf(origin);
      const allowed = this.options.allowedOrigins.includes(origin) || (name !== null && this.loopbackOnly && isLoopback(name));
      if (!allowed) throw new McpHttpError("forbidden_origin", `origin ${origin} is not allowed (--allow-origin adds one)`);
    }
    // a wildcard bind has no name of its own to check against; its token is the protection there
    const wildcard = ["0.0.0.0", "::", ""].includes(this.options.host);
    if (!wildcard) {
      const name = hostnameOf(req.headers.host ?? "");
      if (name === null || !this.hosts.has(name)) throw new McpHttpError("forbidden_host", `Host ${JSON.stringify(req.headers.host ?? "")} is not this server (--allow-host adds a name)`);
    }
  }

  /** The MCP endpoint's bearer token, when one is set. */
  checkToken(req: IncomingMessage): void {
    if (this.options.token) RequestGuard.checkBearer(req, this.options.token);
  }

  static checkBearer(req: IncomingMessage, token: string): void {
    const m = /^Bearer\s+(\S+)\s*$/i.exec(req.headers.authorization ?? "");
    if (!m || !sameSecret(m[1]!, token)) throw new McpHttpError("unauthorized", "a valid bearer token is required (Authorization: Bearer …)");
  }
}
