import { canonicalJson } from "../../../protocol/canonical-json.js";
import type { StateView } from "./state-base.js";
import { changeSet, changeSetText, type Change } from "./state-changes.js";
import { sameState } from "./state-tracker.js";

/** Candidate pairings tried before giving up on records that are identical apart from their ids. */
const MAX_PAIRINGS = 5000;

/** Records that exist in the view but not in its base: what the episode created. */
function created(v: StateView, records: Change[]): Change[] {
  return records.filter((c) => c.value !== null && v.base.record(c.collection, c.id) === undefined);
}

function escapeRegExp(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/** Replaces each id in `map` wherever it stands as a whole token: as a key, a value, or inside text. */
function renamer(map: Map<string, string>): (value: unknown) => unknown {
  if (map.size === 0) return (v) => v;
  const ids = [...map.keys()].sort((a, b) => b.length - a.length);
  const re = new RegExp(`(?<![A-Za-z0-9_])(?:${ids.map(escapeRegExp).join("|")})(?![A-Za-z0-9_])`, "g");
  const text = (s: string) => s.replace(re, (m) => map.get(m) ?? m);
  const walk = (v: unknown): unknown => {
    if (typeof v === "string") return text(v);
    if (Array.isArray(v)) return v.map(walk);
    if (v && typeof v === "object") return Object.fromEntries(Object.entries(v).map(([k, x]) => [text(k), walk(x)]));
    return v;
  };
  return walk;
}

/**
 * True when `a` equals `b` once the records `a` created are renamed to the ones `b` created: two
 * solutions that do the same work in another order get sequential ids in another order (loan L0025
 * for one book, L0026 for the other), and that is not a different outcome. Ids are renamed wherever
 * they appear as whole tokens (record keys, references from other records, text such as "dispute
 * DSP001"). Created records are paired by their content with every created id masked; records
 * identical under that mask are tried in every pairing up to MAX_PAIRINGS. Both views must sit on
 * the same base.
 */
export function sameStateUpToNewIds(a: StateView, b: StateView): boolean {
  if (sameState(a, b)) return true;
  const ca = changeSet(a);
  const cb = changeSet(b);
  const newA = created(a, ca.records);
  const newB = created(b, cb.records);
  if (newA.length === 0 || newA.length !== newB.length) return false;
  const target = changeSetText(cb);

  // mask every created id (of either side) by its collection, then group the created records by content
  const mask = renamer(new Map([...newA, ...newB].map((c) => [c.id, `\u0000new:${c.collection}`])));
  const groups = new Map<string, { a: string[]; b: string[] }>();
  const group = (c: Change) => {
    const key = `${c.collection}\u0000${canonicalJson(mask(c.value))}`;
    let g = groups.get(key);
    if (!g) groups.set(key, (g = { a: [], b: [] }));
    return g;
  };
  for (const c of newA) group(c).a.push(c.id);
  for (const c of newB) group(c).b.push(c.id);
  const list = [...groups.values()];
  if (list.some((g) => g.a.length !== g.b.length)) return false;

  // try pairings: forced where a group has one member, every permutation (bounded) where it has more
  let tried = 0;
  const pairing = new Map<string, string>();
  const search = (gi: number): boolean => {
    if (gi === list.length) {
      tried++;
      return changeSetText(ca, renamer(pairing)) === target;
    }
    const g = list[gi]!;
    const used = new Set<string>();
    const assign = (i: number): boolean => {
      if (i === g.a.length) return search(gi + 1);
      for (const to of g.b) {
        if (used.has(to) || tried >= MAX_PAIRINGS) continue;
        used.add(to);
        pairing.set(g.a[i]!, to);
        if (assign(i + 1)) return true;
        used.delete(to);
      }
      pairing.delete(g.a[i]!);
      return false;
    };
    return assign(0);
  };
  return search(0);
}
