import { createHash } from "node:crypto";
import { canonicalJson } from "../../protocol/canonical-json.js";

/**
 * The JSON text tau-bench's state hash is taken over (see the data folder's README): Python's
 * `json.dumps(sort_keys=True, separators=(",", ":"))`: keys sorted by code point at every level,
 * every character outside printable ASCII escaped as \uXXXX (ensure_ascii), integral floats as
 * integers, other floats in Python's repr.
 */
export function pythonCanonicalJson(value: unknown): string {
  return canonicalJson(value, pythonScalar);
}

function pythonScalar(v: unknown): string {
  if (typeof v === "number") return pythonFloat(v);
  if (typeof v === "string") return JSON.stringify(v).replace(/[\u007f-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);
  if (typeof v === "boolean") return v ? "true" : "false";
  return "null";
}

/** Python's repr of a float: the same shortest digits as JavaScript, but the exponent form for exponents below -4 or from 16 on, with at least two exponent digits. */
function pythonFloat(x: number): string {
  if (Number.isInteger(x)) return BigInt(x).toString();
  const [mantissa, exp] = x.toExponential().split("e") as [string, string];
  const e = Number(exp);
  if (e < -4 || e >= 16) return `${mantissa}e${e < 0 ? "-" : "+"}${String(Math.abs(e)).padStart(2, "0")}`;
  return String(x);
}

export function taubenchStateHash(state: unknown): string {
  return createHash("sha256").update(pythonCanonicalJson(state)).digest("hex");
}
