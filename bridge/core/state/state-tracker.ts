import { diffJson, pointer, type PatchOp } from "./json-patch.js";
import { StateView, type StateBase } from "./state-base.js";
import { changeSet, changeSetText } from "./state-changes.js";
import { collectionEntry, recordEntry, type StateHash, topEntries } from "./state-hash.js";

/** What the guest reports after each call: records that may have changed, and top-level values that did. */
export interface GuestChanges {
  records: [collection: string, id: string, json: string | null][];
  values: [key: string, json: string | null][];
}

/**
 * The host's copy of one episode's state: the shared base plus the records that differ from it.
 * Applying the guest's change reports yields an exact per-step diff and keeps the state hash current
 * in time proportional to the change, whatever the size of the state.
 */
export class StateTracker {
  readonly view: StateView;
  private readonly hash: StateHash;

  constructor(
    readonly base: StateBase,
    from?: { view: StateView; hash: StateHash },
  ) {
    this.view = from?.view ?? new StateView(base);
    this.hash = from?.hash ?? base.hash();
  }

  /** An independent tracker in this one's current state (copies only the changed-record maps). */
  fork(): StateTracker {
    return new StateTracker(this.base, { view: this.snapshot(), hash: this.hash.clone() });
  }

  stateHash(): string {
    return this.hash.hex();
  }

  apply(changes: GuestChanges): PatchOp[] {
    const ops: PatchOp[] = [];
    for (const [coll, id, json] of changes.records) this.applyRecord(coll, id, json, ops);
    for (const [key, json] of changes.values) this.applyValue(key, json, ops);
    return ops;
  }

  private applyRecord(coll: string, id: string, json: string | null, ops: PatchOp[]): void {
    if (!(this.view.top.get(coll) instanceof Object)) return; // collection no longer present as a collection
    const prev = this.view.record(coll, id);
    if ((json ?? undefined) === prev) return;
    const before: unknown = prev === undefined ? undefined : JSON.parse(prev);
    const after: unknown = json === null ? undefined : JSON.parse(json);
    diffJson(before, after, pointer(coll, id), ops);
    if (prev !== undefined) this.hash.remove(recordEntry(coll, id, prev));
    if (json !== null) this.hash.add(recordEntry(coll, id, json));
    let recs = this.view.records.get(coll);
    if (!recs) this.view.records.set(coll, (recs = new Map<string, string | null>()));
    const baseJson = this.base.record(coll, id);
    if ((json ?? undefined) === baseJson) recs.delete(id);
    else recs.set(id, json);
  }

  private applyValue(key: string, json: string | null, ops: PatchOp[]): void {
    const prev = this.view.top.get(key);
    if (prev !== undefined && typeof prev !== "string") {
      // a whole collection was replaced or removed: rare, so done the simple way
      const before: unknown = JSON.parse(this.view.toJsonOf(key));
      this.hash.remove(collectionEntry(key));
      for (const id of this.view.ids(key)) this.hash.remove(recordEntry(key, id, this.view.record(key, id)!));
      this.view.records.delete(key);
      diffJson(before, json === null ? undefined : JSON.parse(json), pointer(key), ops);
    } else if (prev !== undefined) {
      if (prev === json) return;
      for (const e of topEntries(key, prev)) this.hash.remove(e);
      diffJson(JSON.parse(prev), json === null ? undefined : JSON.parse(json), pointer(key), ops);
    } else if (json !== null) {
      diffJson(undefined, JSON.parse(json), pointer(key), ops);
    }
    if (json === null) this.view.top.delete(key);
    else {
      this.view.top.set(key, json);
      for (const e of topEntries(key, json)) this.hash.add(e);
    }
  }

  /** A frozen copy of the current view (cheap: copies only the changed-record maps). */
  snapshot(): StateView {
    const records = new Map([...this.view.records].map(([k, m]) => [k, new Map(m)] as const));
    return new StateView(this.base, records, new Map(this.view.top));
  }
}

/** True when two views over the same base hold equal states (compares only what changed). */
export function sameState(a: StateView, b: StateView): boolean {
  return changeSetText(changeSet(a)) === changeSetText(changeSet(b));
}
