/**
 * The members of a JSON object text in the order they are written, each value as its own slice of
 * the text. JSON.parse cannot give this: the object it builds lists integer-like keys ("0" ..
 * "4294967294") first and ascending, and a number's text (46.0 vs 46) is gone. Used to keep a
 * python-format env's state as the original wrote it (StateBase.fromStateText). A repeated key
 * keeps its first position and its last value, as a Python dict does. Expects valid JSON (the
 * caller has already parsed the text).
 */
export function jsonObjectEntries(text: string): [key: string, valueText: string][] {
  let i = skipSpace(text, 0);
  if (text[i] !== "{") throw new Error("not a JSON object");
  i = skipSpace(text, i + 1);
  const entries = new Map<string, string>();
  if (text[i] === "}") return [];
  for (;;) {
    const keyEnd = stringEnd(text, i);
    const key = JSON.parse(text.slice(i, keyEnd)) as string;
    i = skipSpace(text, keyEnd);
    if (text[i] !== ":") throw new Error(`expected ':' at ${i}`);
    const start = skipSpace(text, i + 1);
    const end = valueEnd(text, start);
    entries.set(key, text.slice(start, end));
    i = skipSpace(text, end);
    if (text[i] === "}") return [...entries];
    if (text[i] !== ",") throw new Error(`expected ',' or '}' at ${i}`);
    i = skipSpace(text, i + 1);
  }
}

const SPACE = /[ \t\n\r]*/y;
function skipSpace(text: string, i: number): number {
  SPACE.lastIndex = i;
  SPACE.exec(text);
  return SPACE.lastIndex;
}

const STRING = /"(?:[^"\\]|\\.)*"/y;
function stringEnd(text: string, i: number): number {
  STRING.lastIndex = i;
  if (!STRING.exec(text)) throw new Error(`expected a string at ${i}`);
  return STRING.lastIndex;
}

/** The index just after the JSON value starting at i. */
function valueEnd(text: string, i: number): number {
  const c = text[i];
  if (c === '"') return stringEnd(text, i);
  if (c !== "{" && c !== "[") {
    let j = i;
    while (j < text.length && !/[,}\] \t\n\r]/.test(text[j]!)) j++;
    return j;
  }
  let depth = 0;
  let j = i;
  while (j < text.length) {
    const d = text[j]!;
    if (d === '"') {
      j = stringEnd(text, j);
      continue;
    }
    if (d === "{" || d === "[") depth++;
    else if (d === "}" || d === "]") {
      depth--;
      if (depth === 0) return j + 1;
    }
    j++;
  }
  throw new Error("unterminated JSON value");
}

const TOKEN = /"(?:[^"\\]|\\.)*"|-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?|[ \t\n\r]+/g;

/**
 * A JSON text as JSON.stringify would write its value, except that every object keeps the key
 * order the text has: whitespace dropped, numbers and escaped strings written as JSON.stringify
 * writes them (46.0 -> 46). It is what a python-format guest reports for a record it read but did
 * not change (its dicts keep the text's order, its float boxes stringify as numbers), so the host
 * can tell such a record is unchanged by comparing texts, as it does for any env.
 */
export function compactJsonText(text: string): string {
  return text.replace(TOKEN, (tok) => {
    const c = tok[0]!;
    if (c === '"') return tok.includes("\\") ? JSON.stringify(JSON.parse(tok)) : tok;
    if (c === " " || c === "\t" || c === "\n" || c === "\r") return "";
    return JSON.stringify(Number(tok));
  });
}
