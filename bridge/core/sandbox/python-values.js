// The Python-faithful value layer (`Py`) for envs whose manifest says `observation_format: "python"`
// (docs/env-format.md, "Observation format"). Guest-side code: the bridge evaluates this file in
// the env's sandbox before the env source and binds the result to a frozen, non-configurable
// global `Py`; envs/taubench/verify.mjs loads the same text in Node. It is an expression: a
// function call returning the frozen `Py` object. ES2020, no host access.
//
// Why it exists: a JS object lists integer-like keys ("0" .. "4294967294", e.g. product variant ids
// such as "1151293680") first and ascending, a Python dict in insertion order; and a JS number
// cannot tell Python's 46.0 from 46. Both change the text json.dumps shows an agent. So:
// - Py.parse(text) reads JSON as Python's json.loads does: an object with an integer-like key
//   becomes an ordered dict (a Proxy whose own-key list is the insertion order, so Object.keys,
//   for-in, JSON.stringify and Py.dumps see Python's order), and a number written with a "." or an
//   exponent whose value is integral (46.0, 1e3, -0.0) becomes a float box (Py.float).
// - Py.dict(entries) / Py.copy(v): ordered dicts and order-preserving deep copies for tool code;
//   a plain JS object built by tool code keeps JS's order, so a tool that builds a dict with
//   integer-like keys for its output uses these.
// - Py.float(x): a Python float. Non-integral numbers are plain JS numbers (they can only be
//   floats); integral ones are a frozen box whose valueOf/toJSON give the number, so arithmetic,
//   comparisons with < and JSON.stringify (state tracking, hashes) see a plain number. `===` does
//   not: tool code compares through Py.num.
// - Py.dumps(v): exactly json.dumps(v) with default arguments (", " / ": " separators, ensure_ascii
//   \uXXXX escapes with lowercase hex and surrogate pairs, NaN/Infinity, float repr, dict order as
//   above). Py.observation(v): the tool-result rule of the python format: a string is the text
//   itself, anything else is Py.dumps(v).
(function makePythonValues() {
  "use strict";
  const hasOwn = Object.prototype.hasOwnProperty;
  const own = (o, k) => hasOwn.call(o, k);
  const ReflectDefine = Reflect.defineProperty;
  const ReflectDelete = Reflect.deleteProperty;
  const ReflectOwnKeys = Reflect.ownKeys;
  const ProxyCtor = Proxy;
  const JSONParse = JSON.parse;
  const ObjectKeys = Object.keys;
  const ArrayIsArray = Array.isArray;
  const NumberIsInteger = Number.isInteger;
  const BigIntCtor = BigInt;
  const StringCtor = String;

  //// floats ////

  const FLOAT = Symbol("Py.float");
  function PyFloat(x) {
    this.v = x;
    this[FLOAT] = true;
    Object.freeze(this);
  }
  PyFloat.prototype.valueOf = function valueOf() { return this.v; };
  PyFloat.prototype.toJSON = function toJSON() { return this.v; };
  PyFloat.prototype.toString = function toString() { return floatRepr(this.v); };
  Object.freeze(PyFloat.prototype);

  const isBox = (v) => v !== null && typeof v === "object" && v[FLOAT] === true;
  /** A Python float of value x: x itself when that is unambiguous (not integral), else a box. */
  function float(x) {
    x = +x;
    return NumberIsInteger(x) ? new PyFloat(x) : x;
  }
  /** True for a Python float: a non-integral JS number (incl. NaN, ±Infinity) or a box. */
  const isFloat = (v) => (typeof v === "number" && !NumberIsInteger(v)) || isBox(v);
  /** The JS number of a number or float box (other values unchanged). */
  const num = (v) => (isBox(v) ? v.valueOf() : v);

  /** Python repr(float): shortest round-trip digits, exponent form when the exponent is < -4 or >= 16. */
  function floatRepr(x) {
    if (x !== x) return "nan";
    if (x === Infinity) return "inf";
    if (x === -Infinity) return "-inf";
    if (x === 0) return 1 / x < 0 ? "-0.0" : "0.0";
    const sign = x < 0 ? "-" : "";
    const m = /^(\d+)(?:\.(\d+))?(?:e([+-]\d+))?$/.exec(StringCtor(x < 0 ? -x : x));
    let digits = m[1] + (m[2] || "");
    let decpt = m[1].length + (m[3] ? +m[3] : 0);
    let lead = 0;
    while (lead < digits.length - 1 && digits[lead] === "0") lead++;
    digits = digits.slice(lead).replace(/0+$/, "");
    decpt -= lead;
    if (decpt <= -4 || decpt > 16) {
      const e = decpt - 1;
      const ae = StringCtor(e < 0 ? -e : e);
      return sign + digits[0] + (digits.length > 1 ? "." + digits.slice(1) : "") + "e" + (e < 0 ? "-" : "+") + (ae.length < 2 ? "0" + ae : ae);
    }
    if (decpt <= 0) return sign + "0." + "0".repeat(-decpt) + digits;
    if (decpt >= digits.length) return sign + digits + "0".repeat(decpt - digits.length) + ".0";
    return sign + digits.slice(0, decpt) + "." + digits.slice(decpt);
  }

  //// ordered dicts ////

  // target -> its keys in insertion order. One shared handler; the order lives beside the target.
  const orders = new WeakMap();
  const dicts = new WeakSet();
  const dictHandler = {
    set(t, key, value) {
      // a data property even for "__proto__": a Python dict has no setters
      if (!own(t, key)) orders.get(t).push(key);
      return ReflectDefine(t, key, { value, writable: true, enumerable: true, configurable: true });
    },
    defineProperty(t, key, desc) {
      const isNew = !own(t, key);
      const ok = ReflectDefine(t, key, desc);
      if (ok && isNew) orders.get(t).push(key);
      return ok;
    },
    deleteProperty(t, key) {
      if (own(t, key)) {
        const order = orders.get(t);
        const i = order.indexOf(key);
        if (i >= 0) order.splice(i, 1);
      }
      return ReflectDelete(t, key);
    },
    ownKeys(t) { return orders.get(t).slice(); },
    setPrototypeOf() { return false; },
  };
  /** A dict that keeps insertion order for every key, integer-like ones included. */
  function dict(entries) {
    const target = {};
    orders.set(target, []);
    const d = new ProxyCtor(target, dictHandler);
    dicts.add(d);
    if (entries) for (let i = 0; i < entries.length; i++) d[entries[i][0]] = entries[i][1];
    return d;
  }

  const INDEX_KEY = /^(?:0|[1-9]\d{0,9})$/;
  /** Keys a JS object would list first and ascending rather than in insertion order. */
  const isIndexKey = (k) => INDEX_KEY.test(k) && +k < 4294967295;

  /** A deep copy that keeps dict order and float boxes (json.loads(json.dumps(v)), copy.deepcopy). */
  function copy(v) {
    if (v === undefined) return null;
    if (v === null || typeof v !== "object" || isBox(v)) return v;
    if (ArrayIsArray(v)) {
      const out = [];
      for (let i = 0; i < v.length; i++) out.push(copy(v[i]));
      return out;
    }
    const keys = ObjectKeys(v);
    let ordered = false;
    for (let i = 0; i < keys.length && !ordered; i++) ordered = isIndexKey(keys[i]);
    if (ordered) {
      const d = dict();
      for (let i = 0; i < keys.length; i++) d[keys[i]] = copy(v[keys[i]]);
      return d;
    }
    const out = {};
    for (let i = 0; i < keys.length; i++) {
      const k = keys[i];
      // "__proto__" would call Object.prototype's setter instead of making a key
      if (k === "__proto__") ReflectDefine(out, k, { value: copy(v[k]), writable: true, enumerable: true, configurable: true });
      else out[k] = copy(v[k]);
    }
    return out;
  }

  //// parsing ////

  // One pass over the JSON text's string and number tokens (outside strings a '"' always opens a
  // string, so matching from left to right never starts inside one).
  const TOKEN = /"(?:[^"\\]|\\.)*"(\s*:)?|-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?/g;
  // Marks written into the text before JSON.parse: an object key "\u0000..." is a key that needed
  // translating (integer-like, or a real key that starts with \u0000), the one-key object
  // {"\u0000": n} is a float box. A real key "\u0000" is written "\u0000\u0000", so they never clash.
  const MARK = "\u0000";

  // Cheap test first: a text with no digit-only key, no escape and no number that could be an
  // integral float (46.0, 1e3) reads the same with JSON.parse. False positives only cost time.
  const MAYBE_MARKED = /"(?:0|[1-9]\d{0,9})"\s*:|\\u|\.0+(?![0-9])|\d[eE]/;

  /** JSON text -> values, as json.loads: dict insertion order and integral floats kept. */
  function parse(text) {
    text = StringCtor(text);
    if (!MAYBE_MARKED.test(text)) return JSONParse(text);
    let marked = false;
    const rewritten = text.replace(TOKEN, (tok, colon) => {
      if (tok[0] === '"') {
        if (colon === undefined) return tok;
        const quoted = tok.slice(0, tok.length - colon.length);
        const key = quoted.indexOf("\\") < 0 ? quoted.slice(1, -1) : JSONParse(quoted);
        if (!isIndexKey(key) && key[0] !== MARK) return tok;
        marked = true;
        return '"\\u0000' + tok.slice(1);
      }
      if (!/[.eE]/.test(tok)) return tok;
      const x = +tok;
      if (!NumberIsInteger(x)) return tok;
      marked = true;
      return '{"\\u0000":' + tok + "}";
    });
    const value = JSONParse(rewritten);
    return marked ? revive(value) : value;
  }

  function revive(v) {
    if (v === null || typeof v !== "object") return v;
    if (ArrayIsArray(v)) {
      for (let i = 0; i < v.length; i++) v[i] = revive(v[i]);
      return v;
    }
    const keys = ObjectKeys(v);
    if (keys.length === 1 && keys[0] === MARK) return new PyFloat(v[MARK]);
    let translated = false;
    for (let i = 0; i < keys.length && !translated; i++) translated = keys[i][0] === MARK;
    if (!translated) {
      for (let i = 0; i < keys.length; i++) v[keys[i]] = revive(v[keys[i]]);
      return v;
    }
    const d = dict();
    for (let i = 0; i < keys.length; i++) {
      const k = keys[i];
      d[k[0] === MARK ? k.slice(1) : k] = revive(v[k]);
    }
    return d;
  }

  //// json.dumps ////

  const HEX = "0123456789abcdef";
  // printable ASCII but " and \: written as is (one native test instead of a loop per character)
  const PLAIN = /^[\x20\x21\x23-\x5b\x5d-\x7e]*$/;
  function escapeString(s) {
    if (PLAIN.test(s)) return '"' + s + '"';
    let out = '"';
    let start = 0;
    for (let i = 0; i < s.length; i++) {
      const c = s.charCodeAt(i);
      if (c >= 0x20 && c <= 0x7e && c !== 0x22 && c !== 0x5c) continue;
      out += s.slice(start, i);
      start = i + 1;
      if (c === 0x22) out += '\\"';
      else if (c === 0x5c) out += "\\\\";
      else if (c === 0x0a) out += "\\n";
      else if (c === 0x0d) out += "\\r";
      else if (c === 0x09) out += "\\t";
      else if (c === 0x08) out += "\\b";
      else if (c === 0x0c) out += "\\f";
      // ensure_ascii: every other code unit as \uXXXX; a non-BMP character is already a surrogate
      // pair in a JS string, which is exactly the pair of escapes Python writes
      else out += "\\u" + HEX[(c >> 12) & 15] + HEX[(c >> 8) & 15] + HEX[(c >> 4) & 15] + HEX[c & 15];
    }
    return out + s.slice(start) + '"';
  }

  function numberText(x, asFloat) {
    if (x !== x) return "NaN";
    if (x === Infinity) return "Infinity";
    if (x === -Infinity) return "-Infinity";
    if (asFloat || !NumberIsInteger(x)) return floatRepr(x);
    return x > -1e21 && x < 1e21 ? StringCtor(x === 0 ? 0 : x) : BigIntCtor(x).toString();
  }

  /** json.dumps(v) with default arguments. */
  function dumps(v) {
    if (v === null || v === undefined) return "null";
    if (v === true) return "true";
    if (v === false) return "false";
    if (typeof v === "number") return numberText(v, false);
    if (typeof v === "string") return escapeString(v);
    if (typeof v === "bigint") return v.toString();
    if (isBox(v)) return numberText(v.valueOf(), true);
    if (typeof v !== "object") throw new TypeError("Object of type " + typeof v + " is not JSON serializable");
    if (ArrayIsArray(v)) {
      if (v.length === 0) return "[]";
      let out = "[";
      for (let i = 0; i < v.length; i++) out += (i ? ", " : "") + dumps(v[i]);
      return out + "]";
    }
    const keys = ObjectKeys(v);
    if (keys.length === 0) return "{}";
    let out = "{";
    for (let i = 0; i < keys.length; i++) out += (i ? ", " : "") + escapeString(keys[i]) + ": " + dumps(v[keys[i]]);
    return out + "}";
  }

  /** The observation text of a tool result in the python format. */
  const observation = (v) => (typeof v === "string" ? v : dumps(v));

  return Object.freeze({ parse, dumps, observation, dict, copy, float, isFloat, num, floatRepr, isIndexKey, isDict: (v) => dicts.has(v) });
})()
