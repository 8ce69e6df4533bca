/**
 * A seed as a front received it: a number, or text of digits (an HTTP header, a form field). Every
 * front takes the same range as the wire (docs/protocol.md §3: 0 ≤ seed < 2^32) and nothing else:
 * no `true` as 1, no `[5]` as 5, no hex; MCP's header once took -1 and 2^40 that the wire refuses.
 */
export function readSeed(v: unknown): { seed: number } | { problem: string } {
  const n = typeof v === "number" ? v : typeof v === "string" && /^\d{1,10}$/.test(v) ? Number(v) : Number.NaN;
  if (Number.isInteger(n) && n >= 0 && n < 2 ** 32) return { seed: n };
  const shown = typeof v === "string" ? JSON.stringify(v.slice(0, 40)) : typeof v === "number" || typeof v === "boolean" ? String(v) : Array.isArray(v) ? "a list" : v === null ? "null" : `a value of type ${typeof v}`;
  return { problem: `seed must be an integer in 0 <= seed < 2^32, as in the bridge protocol; got ${shown}` };
}
