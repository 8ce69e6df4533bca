import { createHash } from "node:crypto";
import { canonicalJson } from "../../../protocol/canonical-json.js";

const MOD = 1n << 256n;

/**
 * An order-independent hash of a state: the sum, mod 2^256, of the SHA-256 of every (collection, id,
 * record) entry and every top-level value, each in canonical JSON. A step that changes k records
 * updates it in O(k) instead of rehashing the whole state; equal states always hash equal.
 */
export class StateHash {
  private sum = 0n;

  add(entry: string): void {
    this.sum = (this.sum + entryDigest(entry)) % MOD;
  }

  remove(entry: string): void {
    this.sum = (this.sum - entryDigest(entry) + MOD) % MOD;
  }

  clone(): StateHash {
    const h = new StateHash();
    h.sum = this.sum;
    return h;
  }

  /** The hash whose hex() is `hex` (a tracker rebuilt in another thread from a portable snapshot). */
  static fromHex(hex: string): StateHash {
    const h = new StateHash();
    h.sum = BigInt("0x" + hex) % MOD;
    return h;
  }

  hex(): string {
    return this.sum.toString(16).padStart(64, "0");
  }
}

function entryDigest(entry: string): bigint {
  return BigInt("0x" + createHash("sha256").update(entry).digest("hex"));
}

export function recordEntry(collection: string, id: string, json: string): string {
  return `r\u0000${collection}\u0000${id}\u0000${canonicalJson(JSON.parse(json))}`;
}

export function collectionEntry(collection: string): string {
  return `c\u0000${collection}`;
}

export function valueEntry(key: string, json: string): string {
  return `v\u0000${key}\u0000${canonicalJson(JSON.parse(json))}`;
}

/**
 * The entries of one top-level value. An object is hashed as a collection (one entry per record)
 * whether or not the env still tracks it as one, so the hash depends only on the state's content.
 */
export function topEntries(key: string, json: string): string[] {
  const value: unknown = JSON.parse(json);
  if (value !== null && typeof value === "object" && !Array.isArray(value)) {
    return [collectionEntry(key), ...Object.entries(value).map(([id, r]) => recordEntry(key, id, JSON.stringify(r)))];
  }
  return [valueEntry(key, json)];
}
