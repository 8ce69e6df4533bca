/**
 * JSON text read the way Python's json.loads reads it, for the values JavaScript would blur: a
 * number written with a fraction or an exponent is a float even when integral (`30.0`), so it
 * becomes `{"$float": 30}`; an integer too large for a double stays exact as `{"$int": "…"}`.
 * Everything else is plain JSON. The core reads every action's tool-call arguments with it
 * (action-parser.ts), so an env written against Python semantics sees the types Python would; the
 * BFCL ports read these markers (PyText.fromJson in envs/bfcl/py-text.js) and their importer uses
 * the same reader (a port may import the core, never the other way).
 */
export function pyJsonParse(text: string): unknown {
  let i = 0;
  const fail = (msg: string): never => {
    throw new SyntaxError(`${msg} at position ${i}`);
  };
  const ws = () => {
    while (i < text.length && (text[i] === " " || text[i] === "\t" || text[i] === "\n" || text[i] === "\r")) i++;
  };
  const value = (): unknown => {
    ws();
    const c = text[i];
    if (c === "{") {
      i++;
      const out: Record<string, unknown> = {};
      ws();
      if (text[i] === "}") {
        i++;
        return out;
      }
      for (;;) {
        ws();
        if (text[i] !== '"') fail("expected a string key");
        const k = str();
        ws();
        if (text[i] !== ":") fail("expected ':'");
        i++;
        // a duplicated key keeps the last value, as json.loads does
        Object.defineProperty(out, k, { value: value(), enumerable: true, writable: true, configurable: true });
        ws();
        if (text[i] === ",") i++;
        else if (text[i] === "}") {
          i++;
          return out;
        } else fail("expected ',' or '}'");
      }
    }
    if (c === "[") {
      i++;
      const out: unknown[] = [];
      ws();
      if (text[i] === "]") {
        i++;
        return out;
      }
      for (;;) {
        out.push(value());
        ws();
        if (text[i] === ",") i++;
        else if (text[i] === "]") {
          i++;
          return out;
        } else fail("expected ',' or ']'");
      }
    }
    if (c === '"') return str();
    if (text.startsWith("true", i)) return (i += 4), true;
    if (text.startsWith("false", i)) return (i += 5), false;
    if (text.startsWith("null", i)) return (i += 4), null;
    // json.loads also accepts NaN and ±Infinity
    if (text.startsWith("NaN", i)) return (i += 3), { $float: "NaN" };
    if (text.startsWith("Infinity", i)) return (i += 8), { $float: "Infinity" };
    if (text.startsWith("-Infinity", i)) return (i += 9), { $float: "-Infinity" };
    const m = /^-?(?:0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?/.exec(text.slice(i, i + 400));
    if (!m) fail("unexpected character");
    i += m![0].length;
    const isFloat = m![1] !== undefined || m![2] !== undefined;
    const n = Number(m![0]);
    if (isFloat) return Number.isInteger(n) ? { $float: n } : n;
    return Number.isSafeInteger(n) ? n : { $int: BigInt(m![0]).toString() };
  };
  const str = (): string => {
    const start = i;
    i++;
    for (;;) {
      const c = text[i];
      if (c === undefined) fail("unterminated string");
      if (c === "\\") i += 2;
      else if (c === '"') break;
      else i++;
    }
    i++;
    return JSON.parse(text.slice(start, i)) as string;
  };
  const v = value();
  ws();
  if (i !== text.length) fail("extra data");
  return v;
}
