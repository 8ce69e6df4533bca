import { describe, expect, test } from "vitest";
import { EnvSession } from "../../bridge/episode/env-session.js";
import { StateBase } from "../../bridge/state/state-base.js";
import { sameStateUpToNewIds } from "../../bridge/state/same-state-up-to-new-ids.js";
import { bundleStateBase } from "../../bridge/state/bundle-state.js";
import { sameState, StateTracker } from "../../bridge/state/state-tracker.js";
import { EnvBundle } from "../../envs/load-bundle.js";
import { EnvManifest } from "../../envs/bundle-schema.js";

const SOURCE = `class Big {
  get({ id }) { return this.rows[id] ?? null; }
  bump({ id }) { const r = this.rows[id]; r.n += 1; r.hist.push(r.n); return r.n; }
  keep({ id }) { this.kept = this.rows[id]; return true; }
  poke() { this.kept.n = -1; return true; }
  insert({ id }) { const row = { n: 0, hist: [] }; this.rows[id] = row; row.hist.push("created"); return true; }
  drop({ id }) { delete this.rows[id]; return true; }
  count() { return Object.keys(this.rows).length; }
  replace_all() { this.rows = { only: { n: 1, hist: [] } }; return true; }
}`;

function bigBundle(rows: number): EnvBundle {
  const state = { rows: Object.fromEntries(Array.from({ length: rows }, (_, i) => [`r${i}`, { n: i, hist: [], pad: "x".repeat(200) }])), meta: { v: 1 } };
  const tools = ["get", "bump", "keep", "poke", "insert", "drop", "count", "replace_all"].map((name) => ({
    type: "function" as const,
    function: { name, description: name, parameters: { type: "object" as const, properties: {}, additionalProperties: true } },
  }));
  const manifest = EnvManifest.parse({ format: "envscaler.env/v1", id: "big-v1", name: "big", introduction: "big", class_name: "Big", tools, default_state: state });
  return new EnvBundle("/virtual/big", manifest, SOURCE, state, new Map(), "hash");
}

function counting(base: StateBase): { base: StateBase; reads: () => number } {
  let reads = 0;
  const original = base.read.bind(base);
  base.read = (op, c, id) => {
    if (op === "get") reads++;
    return original(op, c, id);
  };
  return { base, reads: () => reads };
}

test("a large state is not loaded or copied per episode: only touched records cross into the sandbox", async () => {
  const bundle = bigBundle(20_000); // ~5 MB of JSON
  const { base, reads } = counting(bundleStateBase(bundle));
  const s = await EnvSession.open(bundle, base, { seed: 1 });
  expect(reads()).toBe(0);
  const out = s.call("bump", { id: "r123" });
  expect(out).toMatchObject({ kind: "result", json: "124", diff: [{ op: "replace", path: "/rows/r123/n", value: 124, old: 123 }, { op: "add", path: "/rows/r123/hist/0", value: 124 }] });
  s.call("get", { id: "r5" });
  expect(reads()).toBe(2);
  // listing keys does not load records either
  expect(s.call("count", {})).toMatchObject({ json: "20000" });
  expect(reads()).toBe(2);
  s.dispose();
});

test("the incremental state hash equals the hash of the whole state rebuilt from scratch", async () => {
  const bundle = bigBundle(50);
  const s = await EnvSession.open(bundle, bundleStateBase(bundle), { seed: 1 });
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
  const s = await EnvSession.open(bundle, bundleStateBase(bundle), { seed: 1 });
  s.call("keep", { id: "r3" });
  const poke = s.call("poke", {});
  expect(poke.diff).toContainEqual({ op: "replace", path: "/rows/r3/n", value: -1, old: 3 });
  expect(JSON.parse(s.stateJson()).rows.r3.n).toBe(-1);
  s.dispose();
});

test("replacing a whole collection is tracked, and equal end states compare equal", async () => {
  const bundle = bigBundle(5);
  const a = await EnvSession.open(bundle, bundleStateBase(bundle), { seed: 1 });
  const b = await EnvSession.open(bundle, bundleStateBase(bundle), { seed: 2 });
  a.call("replace_all", {});
  expect(JSON.parse(a.stateJson()).rows).toEqual({ only: { n: 1, hist: [] } });
  expect(a.stateHash()).toBe(StateBase.fromState(JSON.parse(a.stateJson())).hash().hex());
  a.dispose();
  const c = await EnvSession.open(bundle, bundleStateBase(bundle), { seed: 3 });
  b.call("bump", { id: "r0" });
  c.call("bump", { id: "r0" });
  expect(sameState(b.tracker.view, c.tracker.view)).toBe(true);
  c.call("bump", { id: "r0" });
  expect(sameState(b.tracker.view, c.tracker.view)).toBe(false);
  b.dispose();
  c.dispose();
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
