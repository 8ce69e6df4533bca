import { compactJsonText, jsonObjectEntries } from "./json-object-entries.js";
import { collectionEntry, recordEntry, StateHash, valueEntry } from "./state-hash.js";

/** How the guest should build a state: which top-level keys are lazily loaded collections. */
export interface StateLayout {
  keys: string[];
  collections: string[];
  /** JSON text of every top-level key that is not a collection. */
  values: Record<string, string>;
}

interface Collection {
  ids: string[];
  records: Map<string, string>;
  idsJson?: string;
}

export type JsonObject = Record<string, unknown>;

/**
 * A python-format env's state as its file wrote it (see StateBase.fromStateText): the text of each
 * record and top-level value, which the guest reads instead of the normalised JSON so that dict
 * order and 46.0-style floats survive. Hashes, diffs and checks keep using the normalised JSON.
 */
interface PythonTexts {
  records: Map<string, Map<string, string>>;
  values: Map<string, string>;
}

function isPlainObject(v: unknown): v is JsonObject {
  return v !== null && typeof v === "object" && !Array.isArray(v);
}

/**
 * An immutable initial state, held once per scenario and shared by every episode that starts from it.
 * Top-level keys whose value is an object are collections keyed by id: each record is kept as its own
 * JSON text, so an episode loads only the records it touches and nothing is copied per episode.
 */
export class StateBase {
  private hashCache: StateHash | undefined;
  /** Set by fromStateText (python-format envs): what the guest reads. */
  private python: PythonTexts | undefined;
  /** Per collection, the answer to the guest's "all" read (the base is shared, so it is built once). */
  private allCache = new Map<string, string | null>();
  private recordCharsCache: number | undefined;

  private constructor(
    readonly keys: string[],
    private readonly collections: Map<string, Collection>,
    private readonly values: Map<string, string>,
  ) {}

  static fromState(state: JsonObject): StateBase {
    const keys: string[] = [];
    const collections = new Map<string, Collection>();
    const values = new Map<string, string>();
    for (const [key, value] of Object.entries(state)) {
      keys.push(key);
      if (isPlainObject(value)) {
        const records = new Map<string, string>();
        for (const [id, record] of Object.entries(value)) records.set(id, JSON.stringify(record));
        collections.set(key, { ids: [...records.keys()], records });
      } else {
        values.set(key, JSON.stringify(value ?? null));
      }
    }
    return new StateBase(keys, collections, values);
  }

  /**
   * For python-format envs: the same base as fromState, but collections list their ids in the
   * order the text writes them (not JS's integer-like-keys-first order), and the guest is given
   * each record's own text, which it reads with Py.parse (bridge/core/sandbox/python-values.js).
   */
  static fromStateText(text: string): StateBase {
    const base = StateBase.fromState(JSON.parse(text) as JsonObject);
    const python: PythonTexts = { records: new Map(), values: new Map() };
    const top = jsonObjectEntries(text);
    base.keys.splice(0, base.keys.length, ...top.map(([key]) => key));
    for (const [key, valueText] of top) {
      const c = base.collections.get(key);
      if (!c) {
        python.values.set(key, valueText);
        continue;
      }
      const records = new Map(jsonObjectEntries(valueText));
      c.ids = [...records.keys()];
      // the normalised texts in the file's key order: what the guest reports for an unread-or-unchanged record
      for (const [id, recordText] of records) c.records.set(id, compactJsonText(recordText));
      python.records.set(key, records);
    }
    base.python = python;
    return base;
  }

  /** withOverrides keeps the python texts of what it does not override. */
  private static withPythonTexts(base: StateBase, from: PythonTexts | undefined, overrides: JsonObject): StateBase {
    if (!from) return base;
    const python: PythonTexts = { records: new Map(from.records), values: new Map(from.values) };
    for (const [key, change] of Object.entries(overrides)) {
      python.values.delete(key);
      const recs = python.records.get(key);
      if (!recs) continue;
      if (!isPlainObject(change) || !base.collections.has(key) || !from.records.has(key)) python.records.delete(key);
      else {
        const kept = new Map(recs);
        for (const id of Object.keys(change)) kept.delete(id);
        python.records.set(key, kept);
      }
    }
    base.python = python;
    return base;
  }

  /**
   * A new base with record-level overrides: `{users: {u1: {...}, u2: null}}` replaces u1 and deletes
   * u2; a non-object top-level value replaces that key. Untouched records are shared, not copied.
   */
  withOverrides(overrides: JsonObject): StateBase {
    const keys = [...this.keys];
    const collections = new Map(this.collections);
    const values = new Map(this.values);
    for (const [key, change] of Object.entries(overrides)) {
      if (!keys.includes(key)) keys.push(key);
      const existing = collections.get(key);
      if (existing && isPlainObject(change)) {
        const records = new Map(existing.records);
        for (const [id, record] of Object.entries(change)) {
          if (record === null) records.delete(id);
          else records.set(id, JSON.stringify(record));
        }
        collections.set(key, { ids: [...existing.ids.filter((id) => records.has(id)), ...[...records.keys()].filter((id) => !existing.records.has(id))], records });
      } else if (isPlainObject(change)) {
        values.delete(key);
        const records = new Map(Object.entries(change).map(([id, r]) => [id, JSON.stringify(r)] as [string, string]));
        collections.set(key, { ids: [...records.keys()], records });
      } else {
        collections.delete(key);
        values.set(key, JSON.stringify(change ?? null));
      }
    }
    return StateBase.withPythonTexts(new StateBase(keys, collections, values), this.python, overrides);
  }

  layout(): StateLayout {
    const values = Object.fromEntries(this.values);
    // python-format envs: the guest parses the values as their text wrote them
    if (this.python) for (const [key, text] of this.python.values) if (key in values) values[key] = text;
    return { keys: this.keys, collections: [...this.collections.keys()], values };
  }

  /** Characters of JSON text in the collections' records (computed once). */
  get recordChars(): number {
    if (this.recordCharsCache === undefined) {
      let n = 0;
      for (const c of this.collections.values()) for (const text of c.records.values()) n += text.length;
      this.recordCharsCache = n;
    }
    return this.recordCharsCache;
  }

  isCollection(key: string): boolean {
    return this.collections.has(key);
  }

  record(collection: string, id: string): string | undefined {
    return this.collections.get(collection)?.records.get(id);
  }

  ids(collection: string): readonly string[] {
    return this.collections.get(collection)?.ids ?? [];
  }

  idsJson(collection: string): string {
    const c = this.collections.get(collection);
    if (!c) return "[]";
    c.idsJson ??= JSON.stringify(c.ids);
    return c.idsJson;
  }

  value(key: string): string | undefined {
    return this.values.get(key);
  }

  /** A record's text as the guest reads it (python-format envs: as their file wrote it). */
  private textOf(collection: string, id: string): string | undefined {
    return this.python?.records.get(collection)?.get(id) ?? this.record(collection, id);
  }

  /** Whether records are JSON text the "all" read can splice (not a python-format env's own text). */
  get jsonRecords(): boolean {
    return this.python === undefined;
  }

  /** Answers the guest's lazy reads (see HostRead). */
  read(op: string, collection: string, id: string): string | undefined {
    if (op === "get") return this.textOf(collection, id);
    // a check realm's "the records this state has other than its base" (see StateView.read): none
    if (op === "changed") return this.jsonRecords ? "{}" : undefined;
    if (op === "keys") return this.idsJson(collection);
    if (op === "has") return this.collections.get(collection)?.records.has(id) ? "1" : "0";
    if (op === "all") {
      // python-format record texts are not JSON to splice (and those envs read record by record)
      if (!this.jsonRecords) return undefined;
      let text = this.allCache.get(collection);
      if (text === undefined) {
        text = allRecordsJson(this.ids(collection), (i) => this.textOf(collection, i));
        this.allCache.set(collection, text);
      }
      return text ?? undefined;
    }
    return undefined;
  }

  /** The state hash of this base; computed once (it walks every record) and then shared. */
  hash(): StateHash {
    if (!this.hashCache) {
      const h = new StateHash();
      for (const [name, c] of this.collections) {
        h.add(collectionEntry(name));
        for (const [id, json] of c.records) h.add(recordEntry(name, id, json));
      }
      for (const [key, json] of this.values) h.add(valueEntry(key, json));
      this.hashCache = h;
    }
    return this.hashCache.clone();
  }

  /** The whole state as JSON text, assembled from the stored record texts without parsing them. */
  toJson(): string {
    return new StateView(this).toJson();
  }
}

/**
 * A base plus an episode's changes: the current state without materialising it. Used to answer
 * checkers' reads of the final state, compose state() on request, and compare two episodes.
 */
export class StateView {
  constructor(
    readonly base: StateBase,
    /** collection -> id -> current JSON (null = deleted); only records that differ from the base. */
    readonly records: Map<string, Map<string, string | null>> = new Map(),
    /** top-level keys in current order, with a value's JSON or "collection". */
    readonly top: Map<string, string | { collection: true }> = initialTop(base),
  ) {}

  record(collection: string, id: string): string | undefined {
    const changed = this.records.get(collection)?.get(id);
    if (changed !== undefined) return changed ?? undefined;
    return this.base.record(collection, id);
  }

  ids(collection: string): string[] {
    const changed = this.records.get(collection);
    const baseIds = this.base.ids(collection);
    if (!changed) return [...baseIds];
    const out = baseIds.filter((id) => changed.get(id) !== null);
    for (const [id, json] of changed) if (json !== null && this.base.record(collection, id) === undefined) out.push(id);
    return out;
  }

  read(op: string, collection: string, id: string): string | undefined {
    // what the episode has not changed reads straight from the shared base (and its cached id list)
    const changed = this.records.get(collection);
    if (!changed?.size) return this.base.read(op, collection, id);
    if (op === "keys") return JSON.stringify(this.ids(collection));
    if (op === "changed") return this.base.jsonRecords ? (allRecordsJson([...changed.keys()], (i) => changed.get(i) ?? undefined) ?? undefined) : undefined;
    if (op === "all") return this.base.jsonRecords ? (allRecordsJson(this.ids(collection), (i) => this.read("get", collection, i)) ?? undefined) : undefined;
    const mine = changed.get(id);
    if (mine === undefined) return this.base.read(op, collection, id);
    if (op === "get") return mine ?? undefined;
    if (op === "has") return mine === null ? "0" : "1";
    return undefined;
  }

  /** Per collection, the ids whose record differs from the base's (changed, added or deleted). */
  changedIds(): Record<string, string[]> {
    const out: Record<string, string[]> = {};
    for (const [collection, recs] of this.records) if (recs.size > 0) out[collection] = [...recs.keys()];
    return out;
  }

  layout(): StateLayout {
    const keys: string[] = [];
    const collections: string[] = [];
    const values: Record<string, string> = {};
    for (const [key, v] of this.top) {
      keys.push(key);
      if (typeof v === "string") values[key] = v;
      else collections.push(key);
    }
    return { keys, collections, values };
  }

  toJson(): string {
    const parts: string[] = [];
    for (const key of this.top.keys()) parts.push(`${JSON.stringify(key)}:${this.toJsonOf(key)}`);
    return `{${parts.join(",")}}`;
  }

  /** One top-level key's JSON text; a collection is assembled from its record texts. */
  toJsonOf(key: string): string {
    const v = this.top.get(key);
    if (v === undefined) return "null";
    if (typeof v === "string") return v;
    const recs: string[] = [];
    for (const id of this.ids(key)) recs.push(`${JSON.stringify(id)}:${this.record(key, id)}`);
    return `{${recs.join(",")}}`;
  }
}

function initialTop(base: StateBase): Map<string, string | { collection: true }> {
  const top = new Map<string, string | { collection: true }>();
  for (const key of base.keys) top.set(key, base.isCollection(key) ? { collection: true } : (base.value(key) as string));
  return top;
}

/**
 * The guest's "all" read: every record of a collection as `{id: record}`, the record texts as "get"
 * answers them spliced in (JSON-format envs only), so one host call and one parse replace a call
 * per record when an env enumerates a collection (see populate in bridge/core/sandbox/prelude.js).
 */
function allRecordsJson(ids: readonly string[], text: (id: string) => string | undefined): string | null {
  const parts: string[] = [];
  let size = 0;
  for (const id of ids) {
    const t = text(id);
    if (t === undefined) continue;
    const part = `${JSON.stringify(id)}:${t}`;
    // large records stay lazily loaded: an env that only lists keys must not pull megabytes in
    if ((size += part.length) > ALL_MAX_CHARS) return null;
    parts.push(part);
  }
  return `{${parts.join(",")}}`;
}

/** The most an "all" read answers with; a larger collection is read record by record. @unit UTF-16 code units */
const ALL_MAX_CHARS = 1 << 20;
