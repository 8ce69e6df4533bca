/**
 * Canonical JSON: object keys sorted at every level, no spaces. Two values that are equal as JSON
 * have the same text whatever order their keys were inserted in; `state_hash` (docs/protocol.md)
 * is a SHA-256 over it, so it is part of the contract, not of one implementation.
 *
 * Keys are sorted by code point, as Python sorts str keys (tau-bench's hash is Python's
 * `json.dumps(sort_keys=True)`); JavaScript's default sort compares UTF-16 code units, which puts
 * U+E000..U+FFFF after astral characters. `scalar` writes every non-container value and every key:
 * JSON.stringify by default, Python's rules for the tau-bench hash (envs/taubench/taubench-hash.ts).
 */
export function canonicalJson(value: unknown, scalar: (v: unknown) => string = jsonScalar): string {
  const walk = (v: unknown): string => {
    if (v === null || typeof v !== "object") return scalar(v);
    if (Array.isArray(v)) return `[${v.map(walk).join(",")}]`;
    const obj = v as Record<string, unknown>;
    return `{${sortedKeys(obj).map((k) => `${scalar(k)}:${walk(obj[k])}`).join(",")}}`;
  };
  return walk(value);
}

function jsonScalar(v: unknown): string {
  return JSON.stringify(v) ?? "null";
}

const SURROGATE = /[\ud800-\udfff]/;

function sortedKeys(obj: Record<string, unknown>): string[] {
  const keys = Object.keys(obj).sort();
  // the default sort is the fast path; it differs from code-point order only around surrogates
  return keys.some((k) => SURROGATE.test(k)) ? keys.sort(compareCodePoints) : keys;
}

/** Orders strings by code point (Python's str order). */
export function compareCodePoints(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x === y) continue;
    const sx = x >= 0xd800 && x < 0xe000;
    const sy = y >= 0xd800 && y < 0xe000;
    // a surrogate starts an astral character, above every BMP character
    if (sx !== sy) return sx ? 1 : -1;
    return x - y;
  }
  return a.length - b.length;
}
