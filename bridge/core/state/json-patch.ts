/** One change, in RFC 6902 form; `old` (not in the RFC) carries the value replaced or removed. */
export interface PatchOp {
  op: "add" | "remove" | "replace";
  path: string;
  value?: unknown;
  old?: unknown;
}

export function pointer(...segments: string[]): string {
  return segments.map((s) => "/" + s.replace(/~/g, "~0").replace(/\//g, "~1")).join("");
}

function isObject(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === "object" && !Array.isArray(v);
}

/**
 * Appends the ops that turn `before` into `after` under `path`. Objects are diffed per key; arrays
 * per index when their length is unchanged, as appends or removals at the end when only the end
 * changed (a growing log is a one-op diff), otherwise replaced whole (keeps diffs readable).
 * `undefined` means "absent".
 */
export function diffJson(before: unknown, after: unknown, path: string, out: PatchOp[]): PatchOp[] {
  if (before === undefined && after === undefined) return out;
  if (before === undefined) {
    out.push({ op: "add", path, value: after });
    return out;
  }
  if (after === undefined) {
    out.push({ op: "remove", path, old: before });
    return out;
  }
  if (isObject(before) && isObject(after)) {
    for (const k of Object.keys(before)) diffJson(before[k], Object.hasOwn(after, k) ? after[k] : undefined, path + pointer(k), out);
    for (const k of Object.keys(after)) if (!Object.hasOwn(before, k)) out.push({ op: "add", path: path + pointer(k), value: after[k] });
    return out;
  }
  if (Array.isArray(before) && Array.isArray(after) && before.length === after.length) {
    for (let i = 0; i < before.length; i++) diffJson(before[i], after[i], `${path}/${i}`, out);
    return out;
  }
  if (Array.isArray(before) && Array.isArray(after)) {
    const n = Math.min(before.length, after.length);
    const same = (i: number) => JSON.stringify(before[i]) === JSON.stringify(after[i]);
    let prefix = true;
    for (let i = 0; i < n && prefix; i++) prefix = same(i);
    if (prefix) {
      for (let i = before.length - 1; i >= after.length; i--) out.push({ op: "remove", path: `${path}/${i}`, old: before[i] });
      for (let i = before.length; i < after.length; i++) out.push({ op: "add", path: `${path}/${i}`, value: after[i] });
      return out;
    }
  }
  if (JSON.stringify(before) !== JSON.stringify(after)) out.push({ op: "replace", path, value: after, old: before });
  return out;
}
