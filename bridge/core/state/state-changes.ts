import { canonicalJson } from "../../../protocol/canonical-json.js";
import type { StateView } from "./state-base.js";

/** A record that differs from the base its view sits on. */
export interface Change {
  collection: string;
  id: string;
  /** The parsed record; null when it was deleted. */
  value: unknown;
  /** canonicalJson(value), or "null". */
  canonical: string;
}

/** What a view changed against its base. A top-level value is `undefined` where the key holds a collection. */
export interface ChangeSet {
  records: Change[];
  top: [string, unknown][];
}

/**
 * The one rule of what a state changed: a record counts when its canonical JSON differs from the
 * base's (rewriting a record to an equal value is no change); every top-level key counts, in its
 * current order. sameState and sameStateUpToNewIds both compare these.
 */
export function changeSet(v: StateView): ChangeSet {
  const records: Change[] = [];
  for (const [collection, recs] of v.records) {
    for (const [id, json] of recs) {
      const value: unknown = json === null ? null : JSON.parse(json);
      const canonical = json === null ? "null" : canonicalJson(value);
      const base = v.base.record(collection, id);
      if (base !== undefined && json !== null && canonicalJson(JSON.parse(base)) === canonical) continue;
      records.push({ collection, id, value, canonical });
    }
  }
  const top: [string, unknown][] = [...v.top].map(([key, val]) => [key, typeof val === "string" ? JSON.parse(val) : undefined]);
  return { records, top };
}

/**
 * A text equal for two change sets exactly when they leave equal states over the same base.
 * `rename` maps values first (the created ids of sameStateUpToNewIds).
 */
export function changeSetText(c: ChangeSet, rename?: (value: unknown) => unknown): string {
  const text = (v: unknown) => (v === undefined ? "*" : canonicalJson(rename ? rename(v) : v));
  const out = c.records.map((r) => `${r.collection}\u0000${rename ? (rename(r.id) as string) : r.id}\u0000${rename ? text(r.value) : r.canonical}`);
  for (const [key, val] of c.top) out.push(`${key}\u0001${text(val)}`);
  return out.sort().join("\n");
}
