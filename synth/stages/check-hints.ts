import { ARRAY_MEMBERS, collectionsOf } from "./repair-hints.js";

/** The keys a check's one argument has (docs/env-format.md). */
const INPUT_KEYS = ["initial", "final", "actions", "messages"];

/** Globals a check may use (the check realm's built-ins). */
const GLOBALS = new Set(["Object", "Array", "JSON", "Math", "Number", "String", "Boolean", "Date", "Set", "Map", "RegExp", "parseInt", "parseFloat", "isNaN", "undefined", "NaN", "Infinity", "true", "false", "null", "this"]);

/** The names a check's source declares: every arrow's and function's parameters (destructured ones too) and its const/let/var. */
function declaredNames(source: string): Set<string> {
  const names = new Set<string>();
  const addList = (list: string) => {
    for (const m of list.matchAll(/[A-Za-z_$][\w$]*/g)) names.add(m[0]);
  };
  for (const m of source.matchAll(/\(([^()]*)\)\s*=>/g)) addList(m[1]!);
  for (const m of source.matchAll(/([A-Za-z_$][\w$]*)\s*=>/g)) names.add(m[1]!);
  for (const m of source.matchAll(/function\b[^(]*\(([^)]*)\)/g)) addList(m[1]!);
  for (const m of source.matchAll(/\b(?:const|let|var)\s+(\{[^}]*\}|\[[^\]]*\]|[A-Za-z_$][\w$]*)/g)) addList(m[1]!);
  return names;
}

/**
 * The parameter list of a check's source: `(a, b) =>`, `a =>`, `({final}) =>`, `function (a) {`.
 * null when the source does not start like a function (its own compile error says so).
 */
function parametersOf(source: string): string | null {
  const s = source.trim();
  const arrow = /^(?:async\s*)?(\([^)]*\)|[A-Za-z_$][\w$]*)\s*=>/.exec(s);
  if (arrow) return arrow[1]!.replace(/^\(|\)$/g, "").trim();
  const fn = /^function\b[^(]*\(([^)]*)\)/.exec(s);
  return fn ? fn[1]!.trim() : null;
}

/**
 * What most likely made a scenario's checks fail, said so the model can fix them (added to the
 * re-ask after vetting's own report). Found in the checks' sources, not guessed from the message,
 * and each hint names the check and the exact expression. The shapes are the real 1.5B's
 * (docs/local-model.md, 2026-11-29): checks written `(initial, final) => final.appointments…`, so
 * `final` is undefined and every check throws; a collection keyed by id used as an array; a key the
 * state does not have; a statement body without braces (a SyntaxError).
 */
export function checkHints(sources: readonly string[], initialState: Record<string, unknown>): string[] {
  const keys = Object.keys(initialState);
  const collections = collectionsOf(initialState);
  const hints: string[] = [];
  for (const [i, source] of sources.entries()) {
    const params = parametersOf(source);
    if (params === null && /^[A-Za-z][\w ]*?\s(\(|\w+\s*=>)/.test(source.trim())) {
      // the 1.5B copied the prompt's own words in front of the function ("JavaScript arrow function ({initial, final}) => …")
      const lead = source.trim().slice(0, Math.max(0, source.trim().search(/\(|[A-Za-z_$][\w$]*\s*=>/))).trim();
      if (lead) hints.push(`check #${i}'s source starts with the words "${lead}": the source must be the function alone, starting with ({initial, final}) =>.`);
    }
    const declared = declaredNames(source);
    const free = new Set<string>();
    for (const m of source.matchAll(/(?<![.\w$'"])([A-Za-z_$][\w$]*)\s*(?=[.[])/g)) if (!declared.has(m[1]!) && !GLOBALS.has(m[1]!)) free.add(m[1]!);
    if (free.size) hints.push(`check #${i} uses ${[...free].join(", ")}, which nothing in it defines: a check sees only ({initial, final, actions, messages}); write ids and values out, e.g. final.${collections[0] ?? keys[0] ?? "records"}['<id>'].`);
    if (params !== null && params !== "" && !params.startsWith("{")) {
      hints.push(
        `check #${i} is written (${params}) => …, but a check is called with ONE object {initial, final, actions, messages}, so its parameters must destructure it: ({initial, final}) => … (initial and final are the states, with the keys ${keys.join(", ")}).`,
      );
    }
    const body = source.trim().replace(/^(?:async\s*)?(\([^)]*\)|[A-Za-z_$][\w$]*)\s*=>\s*/, "");
    if (params !== null && /^(const|let|var|return|if|for)\b/.test(body)) {
      hints.push(`check #${i}'s body is statements without braces; write ({final}) => { const x = …; return …; } or one expression.`);
    }
    const missing = new Set<string>();
    for (const m of source.matchAll(/\b(initial|final)\s*\.\s*([A-Za-z_$][\w$]*)/g)) if (!keys.includes(m[2]!)) missing.add(`${m[1]}.${m[2]}`);
    if (missing.size) hints.push(`check #${i} reads ${[...missing].join(", ")}, which the state does not have: its keys are ${keys.join(", ")} (read final.<key> directly).`);
    for (const name of collections) {
      const used = new Set<string>();
      for (const m of source.matchAll(new RegExp(`\\b(initial|final)\\s*\\.\\s*${name}\\s*\\.\\s*(${ARRAY_MEMBERS.join("|")})\\b`, "g"))) used.add(`${m[1]}.${name}.${m[2]}`);
      if (used.size) hints.push(`check #${i}: ${name} is an object keyed by record id, not an array, so ${[...used].join(", ")} fails: use Object.values(final.${name}), or final.${name}[id] for one record.`);
    }
    for (const m of source.matchAll(/\b(state|env|self|this)\s*\.\s*([A-Za-z_$][\w$]*)/g)) {
      if (keys.includes(m[2]!) && !INPUT_KEYS.includes(m[1]!)) {
        hints.push(`check #${i} reads ${m[1]}.${m[2]}: a check sees no ${m[1]}, only ({initial, final, actions, messages}); read final.${m[2]}.`);
        break;
      }
    }
  }
  return hints;
}

/** A string literal in single quotes where it needs no escaping: double quotes inside a JSON reply are where small models slip. */
const lit = (s: string): string => (/^[\w .:@/-]*$/.test(s) ? `'${s}'` : JSON.stringify(s));

/**
 * Two checks written for this env's own state, shown in the scenario prompt: a small model copies
 * the shape of an example far more reliably than it follows a sentence about it. Built from the
 * richest collection with a string field, so the names are ones the model can see in the state.
 */
export function checkExamples(initialState: Record<string, unknown>): string[] {
  const first = (name: string) => Object.values(initialState[name] as Record<string, Record<string, unknown>>)[0]!;
  // the collection with the richest records: more likely the env's main entity than a lookup table
  const ranked = collectionsOf(initialState).sort((a, b) => Object.keys(first(b)).length - Object.keys(first(a)).length);
  for (const name of ranked) {
    const records = initialState[name] as Record<string, Record<string, unknown>>;
    const [id, record] = Object.entries(records)[0]!;
    const field = Object.entries(record).find(([, v]) => typeof v === "string");
    if (!field) continue;
    const [f, v] = field;
    return [
      `({initial, final}) => final.${name}[${lit(id)}]?.${f} !== initial.${name}[${lit(id)}].${f}`,
      `({initial, final}) => Object.keys(final.${name}).length === Object.keys(initial.${name}).length + 1 && Object.values(final.${name}).some(r => r.${f} === ${lit(v as string)})`,
    ];
  }
  return ["({initial, final}) => Object.keys(final).some(k => JSON.stringify(final[k]) !== JSON.stringify(initial[k]))"];
}
