import { describe, expect, test } from "vitest";
import { EnvSession, type CallOutcome } from "../../bridge/core/episode/env-session.js";
import { StateBase } from "../../bridge/core/state/state-base.js";
import { sameStateUpToNewIds } from "../../bridge/core/state/same-state-up-to-new-ids.js";
import { bundleStateBase } from "../../bridge/core/state/bundle-state.js";
import { WARM_STATE_CHARS } from "../../bridge/core/episode/post-init-images.js";
import { sameState, StateTracker } from "../../bridge/core/state/state-tracker.js";
import { EnvBundle } from "../../envs/format/load-bundle.js";
import { EnvManifest } from "../../envs/format/bundle-schema.js";
import { fileSandboxHost } from "../helpers.js";

/** This file's episodes' and sessions' sandboxes (disposed after its tests). */
const sandboxes = fileSandboxHost();

const SOURCE = `class Big {
  get({ id }) { return this.rows[id] ?? null; }
  bump({ id }) { const r = this.rows[id]; r.n += 1; r.hist.push(r.n); return r.n; }
  keep({ id }) { this.kept = this.rows[id]; return true; }
  poke() { this.kept.n = -1; return true; }
  insert({ id }) { const row = { n: 0, hist: [] }; this.rows[id] = row; row.hist.push("created"); return true; }
  drop({ id }) { delete this.rows[id]; return true; }
  count() { return Object.keys(this.rows).length; }
  sum() { return Object.values(this.rows).reduce((a, r) => a + r.n, 0); }
  replace_all() { this.rows = { only: { n: 1, hist: [] } }; return true; }
  push_hist({ id, v }) { const h = this.rows[id].hist; h.push(v); return h.length; }
  keep_hist({ id }) { this.keptHist = this.rows[id].hist; return true; }
  poke_hist({ v }) { this.keptHist.push(v); return true; }
  alias({ from, to, v }) { this.rows[to].child = this.rows[from].hist; if (v !== undefined) this.rows[to].child.push(v); return true; }
  push_child({ id, v }) { this.rows[id].child.push(v); return true; }
  clone({ from, to, v }) { this.rows[to] = { ...this.rows[from] }; this.rows[to].hist.push(v); return true; }
  assign_kept({ id }) { const o = { deep: { list: [] } }; this.rows[id].obj = o; o.deep.list.push("same call"); this.keptObj = o; return true; }
  poke_kept() { this.keptObj.deep.list.push("later call"); return true; }
  alias_new({ from, to, v }) { this.rows[to] = { n: 0, hist: [] }; this.rows[to].child = this.rows[from].hist; this.rows[to].child.push(v); return true; }
  dump() { return JSON.parse(JSON.stringify(this.rows)); }
}`;

function bigBundle(rows: number, pad = 200, source = SOURCE): EnvBundle {
  const state = { rows: Object.fromEntries(Array.from({ length: rows }, (_, i) => [`r${i}`, { n: i, hist: [], pad: "x".repeat(pad) }])), meta: { v: 1 } };
  const tools = ["get", "bump", "keep", "poke", "insert", "drop", "count", "sum", "replace_all", "push_hist", "keep_hist", "poke_hist", "alias", "push_child", "clone", "assign_kept", "poke_kept", "alias_new", "dump"].map((name) => ({
    type: "function" as const,
    function: { name, description: name, parameters: { type: "object" as const, properties: {}, additionalProperties: true } },
  }));
  const manifest = EnvManifest.parse({ format: "envscaler.env/v1", id: "big-v1", name: "big", introduction: "big", class_name: "Big", tools, default_state: state });
  return new EnvBundle("/virtual/big", manifest, source, state, new Map(), "hash");
}

function counting(base: StateBase): { base: StateBase; reads: () => number; bulk: () => number } {
  let reads = 0;
  let bulk = 0;
  const original = base.read.bind(base);
  base.read = (op, c, id) => {
    const text = original(op, c, id);
    if (op === "get") reads++;
    if (op === "all" && text !== undefined) bulk++;
    return text;
  };
  return { base, reads: () => reads, bulk: () => bulk };
}

test("an enumerated collection comes in at once when small, and stays lazy when its records add up to over 1 MiB", async () => {
  const small = bigBundle(50);
  const a = counting(bundleStateBase(small));
  const s = await EnvSession.open(small, a.base, { seed: 1, sandboxes });
  expect(s.call("count", {})).toMatchObject({ json: "50" });
  expect([a.bulk(), a.reads()]).toEqual([1, 0]);
  expect(s.call("sum", {})).toMatchObject({ json: String((50 * 49) / 2) });
  expect(a.reads()).toBe(0); // already in
  s.dispose();
  const large = bigBundle(200, 10_000); // ~2 MB of records: listing keys must not pull them in
  const b = counting(bundleStateBase(large));
  const t = await EnvSession.open(large, b.base, { seed: 1, sandboxes });
  expect(t.call("count", {})).toMatchObject({ json: "200" });
  expect([b.bulk(), b.reads()]).toEqual([0, 0]);
  expect(t.call("bump", { id: "r3" }).diff).toContainEqual({ op: "replace", path: "/rows/r3/n", value: 4, old: 3 });
  expect(b.reads()).toBe(1);
  t.dispose();
});

test("a small state is in its post-init image: episodes from the image read no record from the host; a larger one stays lazy", async () => {
  const small = bigBundle(50);
  const a = counting(bundleStateBase(small));
  // the first open runs init; the second runs it again, warms every collection and captures the image
  for (let i = 0; i < 2; i++) (await EnvSession.open(small, a.base, { seed: 1, sandboxes })).dispose();
  const [bulkBefore, readsBefore] = [a.bulk(), a.reads()];
  expect(bulkBefore).toBe(2); // the warm's one read of each collection (rows, meta)
  const s = await EnvSession.open(small, a.base, { seed: 2, sandboxes });
  expect(s.call("count", {})).toMatchObject({ json: "50" });
  expect(s.call("sum", {})).toMatchObject({ json: String((50 * 49) / 2) });
  expect(s.call("get", { id: "r7" })).toMatchObject({ json: expect.stringContaining('"n":7') });
  expect(s.call("bump", { id: "r3" }).diff).toContainEqual({ op: "replace", path: "/rows/r3/n", value: 4, old: 3 });
  expect(s.call("insert", { id: "new" }).diff).toContainEqual({ op: "add", path: "/rows/new", value: { n: 0, hist: ["created"] } });
  expect([a.bulk(), a.reads()]).toEqual([bulkBefore, readsBefore]); // nothing crossed from the host
  s.dispose();
  // over WARM_STATE_CHARS: the image is taken without the records, which come in as the env reads them
  const large = bigBundle(Math.ceil(WARM_STATE_CHARS / 200) + 10);
  const b = counting(bundleStateBase(large));
  for (let i = 0; i < 2; i++) (await EnvSession.open(large, b.base, { seed: 1, sandboxes })).dispose();
  expect([b.bulk(), b.reads()]).toEqual([0, 0]);
  const t = await EnvSession.open(large, b.base, { seed: 2, sandboxes });
  t.call("get", { id: "r7" });
  t.call("count", {});
  expect([b.bulk(), b.reads()]).toEqual([1, 1]);
  t.dispose();
});

test("a large state is not loaded or copied per episode: only touched records cross into the sandbox", async () => {
  const bundle = bigBundle(20_000); // ~5 MB of JSON
  const { base, reads } = counting(bundleStateBase(bundle));
  const s = await EnvSession.open(bundle, base, { seed: 1, sandboxes });
  expect(reads()).toBe(0);
  const out = s.call("bump", { id: "r123" });
  expect(out).toMatchObject({ kind: "result", json: "124", diff: [{ op: "replace", path: "/rows/r123/n", value: 124, old: 123 }, { op: "add", path: "/rows/r123/hist/0", value: 124 }] });
  s.call("get", { id: "r5" });
  expect(reads()).toBe(2);
  // listing keys does not load records either
  expect(s.call("count", {})).toMatchObject({ json: "20000" });
  expect(reads()).toBe(2);
  // a scan reads each record once, however often it runs; writes after it are still tracked
  const sum = (20_000 * 19_999) / 2 + 1;
  expect(s.call("sum", {})).toMatchObject({ json: String(sum) });
  expect(reads()).toBe(20_000);
  expect(s.call("sum", {})).toMatchObject({ json: String(sum) });
  expect(s.call("bump", { id: "r7" }).diff).toContainEqual({ op: "replace", path: "/rows/r7/n", value: 8, old: 7 });
  expect(reads()).toBe(20_000);
  s.dispose();
});

test("the incremental state hash equals the hash of the whole state rebuilt from scratch", async () => {
  const bundle = bigBundle(50);
  const s = await EnvSession.open(bundle, bundleStateBase(bundle), { seed: 1, sandboxes });
  s.call("bump", { id: "r1" });
  s.call("insert", { id: "new" });
  s.call("drop", { id: "r2" });
  const fromScratch = StateBase.fromState(JSON.parse(s.stateJson())).hash().hex();
  expect(s.stateHash()).toBe(fromScratch);
  const state = JSON.parse(s.stateJson());
  expect(state.rows.new).toEqual({ n: 0, hist: ["created"] }); // mutation after insert is tracked
  expect(state.rows.r2).toBeUndefined();
  s.dispose();
});

test("a record mutated later through an alias is still tracked", async () => {
  const bundle = bigBundle(5);
  const s = await EnvSession.open(bundle, bundleStateBase(bundle), { seed: 1, sandboxes });
  s.call("keep", { id: "r3" });
  const poke = s.call("poke", {});
  expect(poke.diff).toContainEqual({ op: "replace", path: "/rows/r3/n", value: -1, old: 3 });
  expect(JSON.parse(s.stateJson()).rows.r3.n).toBe(-1);
  s.dispose();
});

test("the host's state is the guest's after every call: nested writes through references read, kept, aliased across records, copied, or assigned", async () => {
  const bundle = bigBundle(4, 1);
  const s = await EnvSession.open(bundle, bundleStateBase(bundle), { seed: 1, sandboxes });
  const calls: [string, Record<string, unknown>][] = [
    ["push_hist", { id: "r0", v: 1 }], // a nested array reached by a read, written
    ["keep_hist", { id: "r1" }], // a nested array kept in an instance field...
    ["poke_hist", { v: 2 }], // ...written in a later call
    ["alias", { from: "r2", to: "r3", v: 3 }], // one array in two records, written in the same call: both change
    ["push_child", { id: "r3", v: 4 }], // a later call: r3 holds its own copy now, r2 is untouched
    ["push_hist", { id: "r2", v: 5 }],
    ["clone", { from: "r0", to: "r9", v: 6 }], // a shallow copy shares r0's hist: both change
    ["push_hist", { id: "r9", v: 7 }], // a later call: r9 has its own copy
    ["assign_kept", { id: "r1" }], // an object the env made and kept, written in the same call...
    ["poke_kept", {}], // ...and in a later one: the state holds a copy by then (see reportRecord)
    ["bump", { id: "r3" }],
    ["alias_new", { from: "r1", to: "r7", v: 8 }], // a new record holding another's array, written through the new one
  ];
  const hostRows = () => JSON.parse(s.stateJson()).rows;
  for (const [name, args] of calls) {
    const out = s.call(name, args);
    expect(out.kind, name).toBe("result");
    const dump = s.call("dump", {});
    expect(dump.kind === "result" && JSON.parse(dump.json), `the guest's rows after ${name}`).toEqual(hostRows());
    expect(s.stateHash()).toBe(StateBase.fromState(JSON.parse(s.stateJson())).hash().hex());
  }
  const rows = hostRows();
  expect(rows.r0.hist).toEqual([1, 6]);
  expect(rows.r1.hist).toEqual([2, 8]);
  expect(rows.r7.child).toEqual([2, 8]);
  expect(rows.r2.hist).toEqual([3, 5]);
  expect(rows.r3.child).toEqual([3, 4]);
  expect(rows.r9.hist).toEqual([1, 6, 7]);
  expect(rows.r1.obj).toEqual({ deep: { list: ["same call"] } });
  s.dispose();
});

test("an env that replaces the array iterator (or Object.keys) cannot hide its writes from the change report", async () => {
  // the prelude walks keys with indexed loops over functions it captured before env code ran
  const patched = `Array.prototype[Symbol.iterator] = function* () {}; Object.keys = () => [];\n${SOURCE}`;
  const bundle = bigBundle(3, 1, patched);
  const s = await EnvSession.open(bundle, bundleStateBase(bundle), { seed: 1, sandboxes });
  const out = s.call("push_hist", { id: "r1", v: 9 });
  expect(out.diff).toEqual([{ op: "add", path: "/rows/r1/hist/0", value: 9 }]);
  expect(JSON.parse(s.stateJson()).rows.r1.hist).toEqual([9]);
  s.dispose();
});

test("replacing a whole collection is tracked, and equal end states compare equal", async () => {
  const bundle = bigBundle(5);
  const a = await EnvSession.open(bundle, bundleStateBase(bundle), { seed: 1, sandboxes });
  const b = await EnvSession.open(bundle, bundleStateBase(bundle), { seed: 2, sandboxes });
  a.call("replace_all", {});
  expect(JSON.parse(a.stateJson()).rows).toEqual({ only: { n: 1, hist: [] } });
  expect(a.stateHash()).toBe(StateBase.fromState(JSON.parse(a.stateJson())).hash().hex());
  a.dispose();
  const c = await EnvSession.open(bundle, bundleStateBase(bundle), { seed: 3, sandboxes });
  b.call("bump", { id: "r0" });
  c.call("bump", { id: "r0" });
  expect(sameState(b.tracker.view, c.tracker.view)).toBe(true);
  c.call("bump", { id: "r0" });
  expect(sameState(b.tracker.view, c.tracker.view)).toBe(false);
  b.dispose();
  c.dispose();
});

// Once enumerated, a collection answers keys, `in` and descriptors natively (the prelude's populate):
// everything an env can observe or change must be what it was through the lazy traps.
const SCAN_SOURCE = `class Scan {
  probe({ key }) {
    const d = Object.getOwnPropertyDescriptor(this.rows, key);
    return { in: key in this.rows, own: Object.prototype.hasOwnProperty.call(this.rows, key), desc: d === undefined ? null : Object.keys(d).sort(), enumerable: d ? d.enumerable : null };
  }
  keys() { return Object.keys(this.rows); }
  entries() { return Object.entries(this.rows).map(([k, r]) => k + "=" + r.n); }
  forin() { const out = []; for (const k in this.rows) out.push(k); return out; }
  text() { return JSON.stringify(this.rows); }
  bump_all() { for (const r of Object.values(this.rows)) r.n += 1; return true; }
  via_descriptor({ key }) { const d = Object.getOwnPropertyDescriptor(this.rows, key); (d.value ?? d.get()).n = 99; return true; }
  spread() { return Object.keys({ ...this.rows }).length; }
  insert({ key }) { this.rows[key] = { n: 0 }; this.rows[key].n = 7; return true; }
  drop({ key }) { return delete this.rows[key]; }
  define({ key }) { Object.defineProperty(this.rows, key, { value: { n: 5 }, writable: true, enumerable: true, configurable: true }); return true; }
}`;

// "10" and "2" are array-index keys, listed first: keys added later must still come after them
function scanBundle(rows: Record<string, { n: number }> = { b: { n: 1 }, "10": { n: 2 }, a: { n: 3 }, "2": { n: 4 } }): EnvBundle {
  const state = { rows };
  const names = ["probe", "keys", "entries", "forin", "text", "bump_all", "via_descriptor", "spread", "insert", "drop", "define"];
  const tools = names.map((name) => ({ type: "function" as const, function: { name, description: name, parameters: { type: "object" as const, properties: {}, additionalProperties: true } } }));
  const manifest = EnvManifest.parse({ format: "envscaler.env/v1", id: "scan-v1", name: "scan", introduction: "scan", class_name: "Scan", tools, default_state: state });
  return new EnvBundle("/virtual/scan", manifest, SCAN_SOURCE, state, new Map(), "scan-hash"); // images are cached by hash: same source, same image
}

describe("an enumerated collection behaves as a lazy one", () => {
  const json = (out: CallOutcome) => {
    if (out.kind !== "result") throw new Error(`the tool failed: ${JSON.stringify(out)}`);
    return JSON.parse(out.json);
  };

  test("keys in the state's own order, membership and descriptors, before and after enumeration", async () => {
    const bundle = scanBundle();
    const s = await EnvSession.open(bundle, bundleStateBase(bundle), { seed: 1, sandboxes });
    // before any enumeration a key asked about alone is an accessor (nothing is read in for it); an
    // absent key has no descriptor
    expect(json(s.call("probe", { key: "a" }))).toEqual({ in: true, own: true, desc: ["configurable", "enumerable", "get", "set"], enumerable: true });
    expect(json(s.call("probe", { key: "zz" }))).toEqual({ in: false, own: false, desc: null, enumerable: null });
    expect(json(s.call("probe", { key: "toString" }))).toEqual({ in: true, own: false, desc: null, enumerable: null });
    expect(json(s.call("keys", {}))).toEqual(["2", "10", "b", "a"]);
    expect(json(s.call("forin", {}))).toEqual(["2", "10", "b", "a"]);
    expect(json(s.call("entries", {}))).toEqual(["2=4", "10=2", "b=1", "a=3"]);
    // enumerated (a collection this small comes in at once): a descriptor holds what a read returns
    expect(json(s.call("probe", { key: "a" }))).toEqual({ in: true, own: true, desc: ["configurable", "enumerable", "value", "writable"], enumerable: true });
    s.call("insert", { key: "c" });
    s.call("insert", { key: "7" });
    expect(s.call("drop", { key: "10" })).toMatchObject({ json: "true" });
    expect(json(s.call("probe", { key: "10" }))).toEqual({ in: false, own: false, desc: null, enumerable: null });
    s.call("insert", { key: "10" });
    // new keys, array-index ones too, come last, in the order they were added (as the lazy traps listed them)
    expect(json(s.call("keys", {}))).toEqual(["2", "b", "a", "c", "7", "10"]);
    expect(json(s.call("spread", {}))).toBe(6);
    expect(JSON.parse(json(s.call("text", {})))).toEqual({ b: { n: 1 }, a: { n: 3 }, "2": { n: 4 }, c: { n: 7 }, "7": { n: 7 }, "10": { n: 7 } });
    s.dispose();
  });

  test("a collection without array-index keys keeps its order when one is added after enumeration", async () => {
    const bundle = scanBundle({ b: { n: 1 }, a: { n: 2 } });
    const s = await EnvSession.open(bundle, bundleStateBase(bundle), { seed: 1, sandboxes });
    expect(json(s.call("keys", {}))).toEqual(["b", "a"]);
    s.call("insert", { key: "5" });
    s.call("insert", { key: "c" });
    expect(json(s.call("keys", {}))).toEqual(["b", "a", "5", "c"]);
    s.call("drop", { key: "a" });
    expect(json(s.call("forin", {}))).toEqual(["b", "5", "c"]);
    expect(JSON.parse(s.stateJson()).rows).toEqual({ b: { n: 1 }, 5: { n: 7 }, c: { n: 7 } });
    s.dispose();
  });

  test("writes through values, entries and descriptors of an enumerated collection are tracked", async () => {
    const bundle = scanBundle();
    const s = await EnvSession.open(bundle, bundleStateBase(bundle), { seed: 1, sandboxes });
    s.call("keys", {}); // enumerated, nothing read
    // a write through an unread record's accessor descriptor
    expect(s.call("via_descriptor", { key: "b" }).diff).toEqual([{ op: "replace", path: "/rows/b/n", value: 99, old: 1 }]);
    // and through a read record's data descriptor
    expect(s.call("via_descriptor", { key: "b" }).diff).toEqual([]);
    const bump = s.call("bump_all", {});
    expect(bump.diff).toEqual(expect.arrayContaining([{ op: "replace", path: "/rows/a/n", value: 4, old: 3 }, { op: "replace", path: "/rows/2/n", value: 5, old: 4 }]));
    expect(bump.diff).toHaveLength(4);
    const def = s.call("define", { key: "d" });
    expect(def.diff).toEqual([{ op: "add", path: "/rows/d", value: { n: 5 } }]);
    expect(json(s.call("entries", {}))).toEqual(["2=5", "10=3", "b=100", "a=4", "d=5"]);
    expect(s.stateHash()).toBe(StateBase.fromState(JSON.parse(s.stateJson())).hash().hex());
    s.dispose();
  });
});

test("state overrides work per record and share untouched records", () => {
  const base = StateBase.fromState({ users: { a: { n: 1 }, b: { n: 2 } }, k: 1 });
  const o = base.withOverrides({ users: { b: null, c: { n: 3 } }, k: 2 });
  expect(JSON.parse(o.toJson())).toEqual({ users: { a: { n: 1 }, c: { n: 3 } }, k: 2 });
  expect(o.record("users", "a")).toBe(base.record("users", "a"));
});

describe("reference_state with match_new_ids: equal up to a renaming of the records the episode created", () => {
  const base = StateBase.fromState({ books: { B1: { loan: null }, B2: { loan: null }, B3: { loan: null } }, loans: { L9: { book: "B0" } }, next_loan: 10, log: [] });
  /** A view after creating loans for `books` in this order, with sequential ids as envs make them; `log` keeps an ordered history. */
  const lend = (books: string[], log: boolean) => {
    const t = new StateTracker(base);
    books.forEach((book, i) => {
      const id = `L${10 + i}`;
      t.apply({
        records: [
          ["loans", id, JSON.stringify({ book })],
          ["books", book, JSON.stringify({ loan: id })],
        ],
        values: [["next_loan", String(11 + i)], ...(log ? [["log", JSON.stringify(books.slice(0, i + 1).map((b, j) => `loan L${10 + j} for ${b}`))] as [string, string]] : [])],
      });
    });
    return t.snapshot();
  };

  test("the same loans made in another order are the same outcome; exact equality says otherwise", () => {
    expect(sameState(lend(["B1", "B2"], false), lend(["B2", "B1"], false))).toBe(false);
    expect(sameStateUpToNewIds(lend(["B1", "B2"], false), lend(["B2", "B1"], false))).toBe(true);
    // unless the state itself records the order: the log's renamed entries still come in another order
    expect(sameStateUpToNewIds(lend(["B1", "B2"], true), lend(["B2", "B1"], true))).toBe(false);
  });

  test("ids are renamed in record keys, references and text", () => {
    const withText = (books: string[]) => {
      const t = new StateTracker(base);
      books.forEach((book, i) => {
        const id = `L${10 + i}`;
        t.apply({ records: [["loans", id, JSON.stringify({ book, note: `loan ${id} (not L1 or L100)` })], ["books", book, JSON.stringify({ loan: id })]], values: [["next_loan", String(11 + i)]] });
      });
      return t.snapshot();
    };
    expect(sameState(withText(["B1", "B2"]), withText(["B2", "B1"]))).toBe(false);
    expect(sameStateUpToNewIds(withText(["B1", "B2"]), withText(["B2", "B1"]))).toBe(true);
    expect(sameStateUpToNewIds(withText(["B1", "B2"]), withText(["B1", "B3"]))).toBe(false); // another book is another outcome
    expect(sameStateUpToNewIds(withText(["B1", "B2"]), withText(["B1"]))).toBe(false); // fewer loans
    expect(sameStateUpToNewIds(withText(["B1", "B2"]), withText(["B1", "B2"]))).toBe(true);
  });

  test("created records identical apart from their ids pair up in any order", () => {
    const t1 = new StateTracker(base);
    const t2 = new StateTracker(base);
    for (const [t, ids] of [[t1, ["N1", "N2", "N3"]], [t2, ["N7", "N8", "N9"]]] as const)
      for (const id of ids) t.apply({ records: [["loans", id, JSON.stringify({ book: "B3", self: id })]], values: [] });
    expect(sameStateUpToNewIds(t1.snapshot(), t2.snapshot())).toBe(true);
    t2.apply({ records: [["loans", "L9", JSON.stringify({ book: "B1" })]], values: [] }); // and an existing record changed
    expect(sameStateUpToNewIds(t1.snapshot(), t2.snapshot())).toBe(false);
  });
});
