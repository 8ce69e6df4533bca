/** Array members a small model calls on a collection it takes for an array (`this.trials.filter(...)`). */
export const ARRAY_MEMBERS = ["filter", "map", "find", "findIndex", "forEach", "some", "every", "reduce", "push", "splice", "sort", "includes", "indexOf", "length", "slice", "concat", "flatMap"];

const isRecordMap = (v: unknown): boolean =>
  v !== null && typeof v === "object" && !Array.isArray(v) && Object.values(v).length > 0 && Object.values(v).every((r) => r !== null && typeof r === "object" && !Array.isArray(r));

/** The state's collections: top-level keys whose value is an object of records keyed by id. */
export function collectionsOf(initialState: Record<string, unknown>): string[] {
  return Object.entries(initialState)
    .filter(([, v]) => isRecordMap(v))
    .map(([k]) => k);
}

/**
 * What most likely made a written class fail its check, said so the model can fix it (added to the
 * re-ask after the check's own report of the exception and the arguments that raised it). The one
 * cause named so far is the commonest in the real runs (docs/local-model.md): a collection, stored
 * as an object keyed by record id, used as an array (`this.trials.filter` → `TypeError: not a
 * function`, three re-asks in a row of the 1.5B). Found in the source, not guessed from the
 * message: each hint names the exact expression.
 */
export function repairHints(source: string, problems: readonly string[], initialState: Record<string, unknown>): string[] {
  if (!problems.some((p) => /TypeError|ReferenceError|not a function|undefined/.test(p))) return [];
  const hints: string[] = [];
  for (const name of collectionsOf(initialState)) {
    const used = new Set<string>();
    const member = new RegExp(`this\\.${name}\\s*\\.\\s*(${ARRAY_MEMBERS.join("|")})\\b`, "g");
    for (const m of source.matchAll(member)) used.add(`this.${name}.${m[1]}`);
    if (new RegExp(`\\bof\\s+this\\.${name}\\s*\\)`).test(source)) used.add(`for (... of this.${name})`);
    if (used.size === 0) continue;
    hints.push(
      `this.${name} is an object keyed by record id, not an array, so ${[...used].join(", ")} fails: iterate with Object.values(this.${name}) (or Object.entries for the ids), and look a record up with this.${name}[id].`,
    );
  }
  return hints;
}
