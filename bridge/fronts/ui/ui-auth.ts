import { randomBytes, timingSafeEqual } from "node:crypto";
import type { IncomingMessage } from "node:http";

export const TOKEN_COOKIE = "envscaler_ui_token";

/** Addresses only this machine can reach; anything else needs the token. */
export function isLoopback(host: string): boolean {
  return host === "localhost" || host === "::1" || /^127\.\d+\.\d+\.\d+$/.test(host);
}

export function newToken(): string {
  return randomBytes(24).toString("base64url");
}

function sameToken(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

function cookie(req: IncomingMessage, name: string): string | undefined {
  for (const part of (req.headers.cookie ?? "").split(";")) {
    const [k, ...v] = part.trim().split("=");
    if (k === name) return decodeURIComponent(v.join("="));
  }
  return undefined;
}

/** The token a request carries: `Authorization: Bearer`, the cookie the page got, or `?token=` (the link the CLI prints). */
export function requestToken(req: IncomingMessage, url: URL): string | undefined {
  const auth = req.headers.authorization;
  if (auth?.startsWith("Bearer ")) return auth.slice(7);
  return cookie(req, TOKEN_COOKIE) ?? url.searchParams.get("token") ?? undefined;
}

export function tokenOk(expected: string | null, req: IncomingMessage, url: URL): boolean {
  if (expected === null) return true;
  const got = requestToken(req, url);
  return got !== undefined && sameToken(got, expected);
}

/**
 * A loopback server still answers any page the browser has open: a page from elsewhere whose
 * name resolves to 127.0.0.1 (DNS rebinding) sends another Host header, and a cross-site form
 * post carries another Origin. Both are refused.
 */
export function hostAllowed(req: IncomingMessage, loopbackOnly: boolean): boolean {
  if (!loopbackOnly) return true;
  const host = (req.headers.host ?? "").replace(/:\d+$/, "").replace(/^\[|\]$/g, "");
  return isLoopback(host);
}

export function originAllowed(req: IncomingMessage): boolean {
  const origin = req.headers.origin;
  if (origin === undefined || origin === "null") return origin === undefined;
  try {
    return new URL(origin).host === req.headers.host;
  } catch {
    return false;
  }
}
