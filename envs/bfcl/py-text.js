// Python semantics for the BFCL ports: the value model the original classes compute with, and the
// exact text CPython renders for it. Values: int = BigInt (so int and float stay distinct, as in
// Python, and 1 / 1.0 render differently), float = number, str = string, None = null, bool =
// boolean, list = Array, dict = PyDict (typed keys, insertion order), set = PySet. Written from
// CPython's documented behaviour (json.dumps defaults, repr, random.Random, round, str methods).
const PyText = (function () {
  "use strict";

  const isInt = (v) => typeof v === "bigint";
  const isFloat = (v) => typeof v === "number";
  const isNum = (v) => typeof v === "bigint" || typeof v === "number" || typeof v === "boolean";

  /** Python's exception types, as far as the ports raise them; `str(e)` is the message. */
  class PyError extends Error {
    constructor(type, message) {
      super(message);
      this.pyType = type;
    }
  }
  const TypeError_ = (m) => new PyError("TypeError", m);
  const ValueError_ = (m) => new PyError("ValueError", m);
  const KeyError_ = (k) => new PyError("KeyError", repr(k));

  // ----- dict and set keys: equal Python keys (1, 1.0, True) share one slot

  function keyOf(k) {
    if (typeof k === "string") return "s" + k;
    if (typeof k === "bigint") return "n" + k.toString();
    if (typeof k === "boolean") return k ? "n1" : "n0";
    if (typeof k === "number") return Number.isInteger(k) ? "n" + BigInt(k).toString() : Number.isNaN(k) ? "nan" : "f" + k;
    if (k === null) return "N";
    if (k instanceof PyTuple) return "t" + k.items.map(keyOf).join("\u0000");
    throw TypeError_(`unhashable type: '${typeName(k)}'`);
  }

  class PyDict {
    constructor(entries) {
      this.map = new Map(); // keyOf -> [key, value]
      if (entries) for (const [k, v] of entries) this.set(k, v);
    }
    get size() {
      return this.map.size;
    }
    has(k) {
      return this.map.has(keyOf(k));
    }
    get(k, dflt) {
      const e = this.map.get(keyOf(k));
      return e ? e[1] : dflt;
    }
    /** `d[k]`: KeyError when absent. */
    item(k) {
      const e = this.map.get(keyOf(k));
      if (!e) throw KeyError_(k);
      return e[1];
    }
    set(k, v) {
      const kk = keyOf(k);
      const e = this.map.get(kk);
      if (e) e[1] = v; // an existing key keeps its original object and position
      else this.map.set(kk, [k, v]);
    }
    pop(k) {
      const kk = keyOf(k);
      const e = this.map.get(kk);
      if (!e) throw KeyError_(k);
      this.map.delete(kk);
      return e[1];
    }
    keys() {
      return [...this.map.values()].map((e) => e[0]);
    }
    values() {
      return [...this.map.values()].map((e) => e[1]);
    }
    items() {
      return [...this.map.values()].map((e) => [e[0], e[1]]);
    }
    copy() {
      return new PyDict(this.items());
    }
  }

  class PySet {
    constructor(items) {
      this.map = new Map();
      if (items) for (const v of items) this.add(v);
    }
    get size() {
      return this.map.size;
    }
    has(v) {
      return this.map.has(keyOf(v));
    }
    add(v) {
      const k = keyOf(v);
      if (!this.map.has(k)) this.map.set(k, v);
    }
    values() {
      return [...this.map.values()];
    }
  }

  class PyTuple {
    constructor(items) {
      this.items = items;
    }
  }

  /** A value Python would not json.dumps and prints with a repr of its own (mpf, Decimal). */
  class PyOpaque {
    constructor(reprText, strText) {
      this.reprText = reprText;
      this.strText = strText ?? reprText;
    }
  }

  function typeName(v) {
    if (v === null || v === undefined) return "NoneType";
    if (typeof v === "bigint") return "int";
    if (typeof v === "number") return "float";
    if (typeof v === "string") return "str";
    if (typeof v === "boolean") return "bool";
    if (Array.isArray(v)) return "list";
    if (v instanceof PyDict) return "dict";
    if (v instanceof PySet) return "set";
    if (v instanceof PyTuple) return "tuple";
    if (v && v.pyTypeName) return v.pyTypeName;
    return "object";
  }

  // ----- numbers

  /** repr(float): the shortest round-tripping digits (as JS), laid out by Python's rules. */
  function floatRepr(x) {
    if (Number.isNaN(x)) return "nan";
    if (x === Infinity) return "inf";
    if (x === -Infinity) return "-inf";
    if (x === 0) return Object.is(x, -0) ? "-0.0" : "0.0";
    const sign = x < 0 ? "-" : "";
    const m = /^(\d+)(?:\.(\d+))?(?:e([+-]\d+))?$/.exec(String(Math.abs(x)));
    let digits = m[1] + (m[2] ?? "");
    let decpt = m[1].length + (m[3] ? Number(m[3]) : 0);
    const lead = digits.length - digits.replace(/^0+/, "").length;
    digits = digits.slice(lead).replace(/0+$/, "");
    decpt -= lead;
    if (decpt <= -4 || decpt > 16) {
      const e = decpt - 1;
      const mant = digits[0] + (digits.length > 1 ? "." + digits.slice(1) : "");
      return `${sign}${mant}e${e < 0 ? "-" : "+"}${String(Math.abs(e)).padStart(2, "0")}`;
    }
    if (decpt <= 0) return `${sign}0.${"0".repeat(-decpt)}${digits}`;
    if (decpt >= digits.length) return `${sign}${digits}${"0".repeat(decpt - digits.length)}.0`;
    return `${sign}${digits.slice(0, decpt)}.${digits.slice(decpt)}`;
  }

  /** The exact value of a finite double as numerator / 2^shift (BigInt). */
  function exactBinary(x) {
    const buf = new DataView(new ArrayBuffer(8));
    buf.setFloat64(0, x);
    const hi = buf.getUint32(0);
    const lo = buf.getUint32(4);
    const expBits = (hi >>> 20) & 0x7ff;
    let mant = (BigInt(hi & 0xfffff) << 32n) | BigInt(lo);
    let exp;
    if (expBits === 0) exp = -1074;
    else {
      mant |= 1n << 52n;
      exp = expBits - 1075;
    }
    if (hi >>> 31) mant = -mant;
    return exp >= 0 ? { num: mant << BigInt(exp), shift: 0n } : { num: mant, shift: BigInt(-exp) };
  }

  /** round-half-even of x * 10^nd, computed on the exact binary value (CPython's dtoa mode 3). */
  function scaledHalfEven(x, nd) {
    const { num, shift } = exactBinary(x);
    let n = num;
    let d = 1n << shift;
    if (nd >= 0) n *= 10n ** BigInt(nd);
    else d *= 10n ** BigInt(-nd);
    const neg = n < 0n;
    if (neg) n = -n;
    let q = n / d;
    const r2 = (n % d) * 2n;
    if (r2 > d || (r2 === d && q % 2n === 1n)) q += 1n;
    return neg ? -q : q;
  }

  /** `f"{x:.{nd}f}"` for a float. */
  function formatFixed(x, nd) {
    if (!Number.isFinite(x)) return floatRepr(x);
    const q = scaledHalfEven(x, nd);
    const neg = q < 0n || Object.is(x, -0) || (q === 0n && x < 0);
    let s = (q < 0n ? -q : q).toString();
    if (nd > 0) {
      s = s.padStart(nd + 1, "0");
      s = s.slice(0, s.length - nd) + "." + s.slice(s.length - nd);
    }
    return (neg ? "-" : "") + s;
  }

  /** Python's round(number, ndigits). */
  function round(x, nd) {
    if (typeof x === "boolean") x = x ? 1n : 0n;
    if (typeof x !== "bigint" && typeof x !== "number") throw TypeError_(`type ${typeName(x)} doesn't define __round__ method`);
    if (nd === undefined || nd === null) {
      if (isInt(x)) return x;
      if (!Number.isFinite(x)) throw Number.isNaN(x) ? ValueError_("cannot convert float NaN to integer") : new PyError("OverflowError", "cannot convert float infinity to integer");
      return scaledHalfEven(x, 0);
    }
    if (!isInt(nd) && typeof nd !== "boolean") throw TypeError_(`'${typeName(nd)}' object cannot be interpreted as an integer`);
    const n = Number(nd);
    if (isInt(x)) {
      if (n >= 0) return x;
      const p = 10n ** BigInt(-n);
      const neg = x < 0n;
      const a = neg ? -x : x;
      let q = a / p;
      const r2 = (a % p) * 2n;
      if (r2 > p || (r2 === p && q % 2n === 1n)) q += 1n;
      return (neg ? -q : q) * p;
    }
    if (typeof x !== "number") throw TypeError_(`type ${typeName(x)} doesn't define __round__ method`);
    if (!Number.isFinite(x) || x === 0) return x;
    if (n > 323) return x;
    if (n < -308) return 0 * x;
    const q = scaledHalfEven(x, n);
    const y = n >= 0 ? parseFloat(`${q}e-${n}`) : parseFloat(`${q}e${-n}`);
    if (!Number.isFinite(y)) throw new PyError("OverflowError", "rounded value too large to represent");
    return y === 0 && x < 0 ? -0 : y;
  }

  const toF = (v) => (typeof v === "bigint" ? Number(v) : typeof v === "boolean" ? (v ? 1 : 0) : v);
  const toI = (v) => (typeof v === "boolean" ? (v ? 1n : 0n) : v);
  function numCheck(op, a, b) {
    if (!isNum(a) || !isNum(b)) throw TypeError_(`unsupported operand type(s) for ${op}: '${typeName(a)}' and '${typeName(b)}'`);
  }
  /** Binary arithmetic with Python's int/float promotion (`op`: `+=` for an augmented assignment on a number, whose TypeError names it). */
  function add(a, b, op = "+") {
    if (typeof a === "string" && typeof b === "string") return a + b;
    if (Array.isArray(a) && Array.isArray(b)) return [...a, ...b];
    if (typeof a === "string" || typeof b === "string") {
      if (typeof a === "string") throw TypeError_(`can only concatenate str (not "${typeName(b)}") to str`);
    }
    numCheck(op, a, b);
    if (isFloat(a) || isFloat(b)) return toF(a) + toF(b);
    return toI(a) + toI(b);
  }
  function sub(a, b) {
    numCheck("-", a, b);
    if (isFloat(a) || isFloat(b)) return toF(a) - toF(b);
    return toI(a) - toI(b);
  }
  function mul(a, b) {
    if ((typeof a === "string" || Array.isArray(a)) && (isInt(b) || typeof b === "boolean")) return repeatSeq(a, toI(b));
    if ((typeof b === "string" || Array.isArray(b)) && (isInt(a) || typeof a === "boolean")) return repeatSeq(b, toI(a));
    if (typeof a === "string" || Array.isArray(a) || typeof b === "string" || Array.isArray(b)) {
      const seq = typeof a === "string" || Array.isArray(a) ? b : a;
      throw TypeError_(`can't multiply sequence by non-int of type '${typeName(seq)}'`);
    }
    numCheck("*", a, b);
    if (isFloat(a) || isFloat(b)) return toF(a) * toF(b);
    return toI(a) * toI(b);
  }
  function repeatSeq(s, n) {
    if (n <= 0n) return typeof s === "string" ? "" : [];
    if (typeof s === "string") return s.repeat(Number(n));
    let out = [];
    for (let i = 0n; i < n; i++) out = out.concat(s);
    return out;
  }
  /** True division `/`: always a float. */
  function div(a, b) {
    numCheck("/", a, b);
    if (toF(b) === 0 && !(isInt(b) ? b !== 0n : false)) throw new PyError("ZeroDivisionError", isFloat(a) || isFloat(b) ? "float division by zero" : "division by zero");
    if (isInt(toI(a)) && isInt(toI(b))) return intTrueDiv(toI(a), toI(b));
    return toF(a) / toF(b);
  }
  /** int / int, correctly rounded as CPython does (exact for the magnitudes ports see). */
  function intTrueDiv(a, b) {
    const fa = Number(a);
    const fb = Number(b);
    if (Number.isSafeInteger(fa) && Number.isSafeInteger(fb)) return fa / fb;
    return parseFloat(bigRatioToString(a, b));
  }
  function bigRatioToString(a, b) {
    const neg = a < 0n !== b < 0n;
    if (a < 0n) a = -a;
    if (b < 0n) b = -b;
    const scale = 10n ** 40n;
    const q = (a * scale) / b;
    const s = q.toString().padStart(41, "0");
    return `${neg ? "-" : ""}${s.slice(0, -40)}.${s.slice(-40)}`;
  }
  function pow(a, b) {
    numCheck("** or pow()", a, b);
    if (isInt(toI(a)) && isInt(toI(b)) && toI(b) >= 0n) return toI(a) ** toI(b);
    const x = toF(a);
    const y = toF(b);
    if (x === 0 && y < 0) throw new PyError("ZeroDivisionError", "0.0 cannot be raised to a negative power");
    if (x < 0 && !Number.isInteger(y)) throw new PyError("ValueError", "complex result"); // Python returns a complex here; ports never render it
    const r = Math.pow(x, y);
    if (!Number.isFinite(r) && Number.isFinite(x) && Number.isFinite(y)) throw new PyError("OverflowError", "(34, 'Numerical result out of range')");
    return r;
  }
  /** a % b with Python's sign rule. */
  function mod(a, b) {
    numCheck("%", a, b);
    if (isFloat(a) || isFloat(b)) {
      const x = toF(a);
      const y = toF(b);
      if (y === 0) throw new PyError("ZeroDivisionError", "float modulo");
      let m = x % y;
      if (m !== 0 && m < 0 !== y < 0) m += y;
      else if (m === 0) m = y < 0 ? -0 : 0;
      return m;
    }
    const x = toI(a);
    const y = toI(b);
    if (y === 0n) throw new PyError("ZeroDivisionError", "integer modulo by zero");
    let m = x % y;
    if (m !== 0n && m < 0n !== y < 0n) m += y;
    return m;
  }
  /** Python comparison `<` etc. between numbers (and str with str). */
  function lt(a, b) {
    if (typeof a === "string" && typeof b === "string") return cmpStr(a, b) < 0;
    if (!isNum(a) || !isNum(b)) throw TypeError_(`'<' not supported between instances of '${typeName(a)}' and '${typeName(b)}'`);
    return cmpNum(a, b) < 0;
  }
  function le(a, b) {
    if (typeof a === "string" && typeof b === "string") return cmpStr(a, b) <= 0;
    if (!isNum(a) || !isNum(b)) throw TypeError_(`'<=' not supported between instances of '${typeName(a)}' and '${typeName(b)}'`);
    return cmpNum(a, b) <= 0;
  }
  function gt(a, b) {
    if (typeof a === "string" && typeof b === "string") return cmpStr(a, b) > 0;
    if (!isNum(a) || !isNum(b)) throw TypeError_(`'>' not supported between instances of '${typeName(a)}' and '${typeName(b)}'`);
    return cmpNum(a, b) > 0;
  }
  function ge(a, b) {
    if (typeof a === "string" && typeof b === "string") return cmpStr(a, b) >= 0;
    if (!isNum(a) || !isNum(b)) throw TypeError_(`'>=' not supported between instances of '${typeName(a)}' and '${typeName(b)}'`);
    return cmpNum(a, b) >= 0;
  }
  function cmpNum(a, b) {
    a = toI(a);
    b = toI(b);
    if (isInt(a) && isInt(b)) return a < b ? -1 : a > b ? 1 : 0;
    // int vs float: compare exactly (a BigInt against a double compares by value in JS)
    if (Number.isNaN(a) || Number.isNaN(b)) return NaN;
    return a < b ? -1 : a > b ? 1 : 0;
  }
  /** Python str order: by code point (JS compares UTF-16 units). */
  function cmpStr(a, b) {
    const n = Math.min(a.length, b.length);
    for (let i = 0; i < n; i++) {
      const ca = a.codePointAt(i);
      const cb = b.codePointAt(i);
      if (ca !== cb) return ca - cb;
      if (ca > 0xffff) i++;
    }
    return a.length - b.length;
  }

  /** Python `==` (the state checker's rule). */
  function eq(a, b) {
    if (a === b) return true;
    if (isNum(a) && isNum(b)) return cmpNum(a, b) === 0;
    if (a === null || b === null || a === undefined || b === undefined) return false;
    if (typeof a === "string" || typeof b === "string") return false;
    if (Array.isArray(a)) return Array.isArray(b) && a.length === b.length && a.every((x, i) => eq(x, b[i]));
    if (a instanceof PyTuple) return b instanceof PyTuple && a.items.length === b.items.length && a.items.every((x, i) => eq(x, b.items[i]));
    if (a instanceof PyDict) {
      if (!(b instanceof PyDict) || a.size !== b.size) return false;
      for (const [k, v] of a.items()) if (!b.has(k) || !eq(v, b.get(k))) return false;
      return true;
    }
    if (a instanceof PySet) return b instanceof PySet && a.size === b.size && a.values().every((x) => b.has(x));
    if (a && typeof a.__eq__ === "function") return a.__eq__(b);
    return false;
  }

  /** Python truthiness. */
  function truthy(v) {
    if (v === null || v === undefined) return false;
    if (typeof v === "boolean") return v;
    if (typeof v === "bigint") return v !== 0n;
    if (typeof v === "number") return v !== 0;
    if (typeof v === "string" || Array.isArray(v)) return v.length > 0;
    if (v instanceof PyDict || v instanceof PySet) return v.size > 0;
    if (v instanceof PyTuple) return v.items.length > 0;
    return true;
  }

  /** `x in container`. */
  function contains(container, x) {
    if (typeof container === "string") {
      if (typeof x !== "string") throw TypeError_(`'in <string>' requires string as left operand, not ${typeName(x)}`);
      return container.includes(x);
    }
    if (Array.isArray(container)) return container.some((y) => eq(y, x));
    if (container instanceof PyTuple) return container.items.some((y) => eq(y, x));
    if (container instanceof PyDict || container instanceof PySet) return container.has(x);
    throw TypeError_(`argument of type '${typeName(container)}' is not iterable`);
  }

  /** len(): str counts code points. */
  function len(v) {
    if (typeof v === "string") {
      let n = 0;
      for (const _ of v) n++;
      return BigInt(n);
    }
    if (Array.isArray(v)) return BigInt(v.length);
    if (v instanceof PyDict || v instanceof PySet) return BigInt(v.size);
    if (v instanceof PyTuple) return BigInt(v.items.length);
    throw TypeError_(`object of type '${typeName(v)}' has no len()`);
  }

  /** Iterating a Python value: list items, dict keys, str characters. */
  function iter(v) {
    if (Array.isArray(v)) return v;
    if (typeof v === "string") return [...v];
    if (v instanceof PyDict) return v.keys();
    if (v instanceof PySet) return v.values();
    if (v instanceof PyTuple) return v.items;
    throw TypeError_(`'${typeName(v)}' object is not iterable`);
  }

  /** sum() of numbers, left to right from int 0. */
  function sum(values) {
    let s = 0n;
    for (const v of iter(values)) {
      if (!isNum(v)) throw TypeError_(`unsupported operand type(s) for +: '${typeName(s)}' and '${typeName(v)}'`);
      s = add(s, v);
    }
    return s;
  }

  /** abs(v). */
  function abs(v) {
    if (typeof v === "bigint") return v < 0n ? -v : v;
    if (typeof v === "boolean") return v ? 1n : 0n;
    if (typeof v === "number") return Math.abs(v);
    throw TypeError_(`bad operand type for abs(): '${typeName(v)}'`);
  }
  /** float(v). */
  function float(v) {
    if (typeof v === "number") return v;
    if (typeof v === "bigint") return Number(v);
    if (typeof v === "boolean") return v ? 1 : 0;
    if (typeof v === "string") {
      const t = strip(v).replace(/(?<=\d)_(?=\d)/g, "");
      if (/^[+-]?((\d+\.?\d*|\.\d+)([eE][+-]?\d+)?)$/.test(t)) return Number(t);
      const m = /^([+-]?)(inf|infinity|nan)$/i.exec(t);
      if (m) return m[2].toLowerCase() === "nan" ? NaN : m[1] === "-" ? -Infinity : Infinity;
      throw ValueError_(`could not convert string to float: ${strRepr(v)}`);
    }
    throw TypeError_(`float() argument must be a string or a real number, not '${typeName(v)}'`);
  }
  /** int(v). */
  function int(v) {
    if (typeof v === "bigint") return v;
    if (typeof v === "boolean") return v ? 1n : 0n;
    if (typeof v === "number") {
      if (Number.isNaN(v)) throw ValueError_("cannot convert float NaN to integer");
      if (!Number.isFinite(v)) throw new PyError("OverflowError", "cannot convert float infinity to integer");
      return BigInt(Math.trunc(v));
    }
    if (typeof v === "string") {
      const t = strip(v).replace(/(?<=\d)_(?=\d)/g, "");
      if (/^[+-]?\d+$/.test(t)) return BigInt(t);
      throw ValueError_(`invalid literal for int() with base 10: ${strRepr(v)}`);
    }
    throw TypeError_(`int() argument must be a string, a bytes-like object or a real number, not '${typeName(v)}'`);
  }

  // ----- strings

  /** str.splitlines() (no keepends). */
  function splitlines(s) {
    const out = [];
    const re = /\r\n|[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]/g;
    let last = 0;
    let m;
    while ((m = re.exec(s))) {
      out.push(s.slice(last, m.index));
      last = m.index + m[0].length;
    }
    if (last < s.length) out.push(s.slice(last));
    return out;
  }
  const WS = "[\\t\\n\\v\\f\\r \\x1c-\\x1f\\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000]";
  /** str.split() with no separator: runs of whitespace. */
  function splitWs(s) {
    return s.split(new RegExp(`${WS}+`)).filter((p) => p.length > 0);
  }
  function strip(s, chars) {
    if (chars === undefined || chars === null) return s.replace(new RegExp(`^${WS}+|${WS}+$`, "g"), "");
    let a = 0;
    let b = s.length;
    while (a < b && chars.includes(s[a])) a++;
    while (b > a && chars.includes(s[b - 1])) b--;
    return s.slice(a, b);
  }
  function rstrip(s, chars) {
    let b = s.length;
    if (chars === undefined || chars === null) return s.replace(new RegExp(`${WS}+$`), "");
    while (b > 0 && chars.includes(s[b - 1])) b--;
    return s.slice(0, b);
  }
  function sortedStrs(list) {
    return [...list].sort(cmpStr);
  }

  /** repr(str). */
  function strRepr(s) {
    const quote = s.includes("'") && !s.includes('"') ? '"' : "'";
    let out = quote;
    for (const ch of s) {
      const c = ch.codePointAt(0);
      if (ch === quote || ch === "\\") out += "\\" + ch;
      else if (ch === "\t") out += "\\t";
      else if (ch === "\n") out += "\\n";
      else if (ch === "\r") out += "\\r";
      else if (c < 0x20 || c === 0x7f) out += "\\x" + c.toString(16).padStart(2, "0");
      else if (c < 0x7f) out += ch;
      else if (isPrintable(ch)) out += ch;
      else if (c <= 0xff) out += "\\x" + c.toString(16).padStart(2, "0");
      else if (c <= 0xffff) out += "\\u" + c.toString(16).padStart(4, "0");
      else out += "\\U" + c.toString(16).padStart(8, "0");
    }
    return out + quote;
  }
  const NON_PRINTABLE = /[\p{Cc}\p{Cf}\p{Cs}\p{Co}\p{Cn}\p{Zl}\p{Zp}\p{Zs}]/u;
  const isPrintable = (ch) => ch === " " || !NON_PRINTABLE.test(ch);

  /** repr() of any port value. */
  function repr(v) {
    if (v === null || v === undefined) return "None";
    if (v === true) return "True";
    if (v === false) return "False";
    if (typeof v === "bigint") return v.toString();
    if (typeof v === "number") return floatRepr(v);
    if (typeof v === "string") return strRepr(v);
    if (Array.isArray(v)) return `[${v.map(repr).join(", ")}]`;
    if (v instanceof PyTuple) return v.items.length === 1 ? `(${repr(v.items[0])},)` : `(${v.items.map(repr).join(", ")})`;
    if (v instanceof PyDict) return `{${v.items().map(([k, x]) => `${repr(k)}: ${repr(x)}`).join(", ")}}`;
    if (v instanceof PySet) return v.size === 0 ? "set()" : `{${v.values().map(repr).join(", ")}}`;
    if (v instanceof PyOpaque) return v.reprText;
    if (v && typeof v.__repr__ === "function") return v.__repr__();
    return String(v);
  }
  /** str(). */
  function str(v) {
    if (typeof v === "string") return v;
    if (v instanceof PyOpaque) return v.strText;
    if (v && typeof v.__str__ === "function") return v.__str__();
    return repr(v);
  }

  // ----- json.dumps with the defaults: ensure_ascii, ", " and ": ", floats by repr

  function jsonStr(s) {
    let out = '"';
    for (let i = 0; i < s.length; i++) {
      const c = s.charCodeAt(i);
      const ch = s[i];
      if (ch === '"') out += '\\"';
      else if (ch === "\\") out += "\\\\";
      else if (ch === "\n") out += "\\n";
      else if (ch === "\r") out += "\\r";
      else if (ch === "\t") out += "\\t";
      else if (ch === "\b") out += "\\b";
      else if (ch === "\f") out += "\\f";
      else if (c < 0x20 || c > 0x7e) out += "\\u" + c.toString(16).padStart(4, "0");
      else out += ch;
    }
    return out + '"';
  }
  function jsonFloat(x) {
    if (Number.isNaN(x)) return "NaN";
    if (x === Infinity) return "Infinity";
    if (x === -Infinity) return "-Infinity";
    return floatRepr(x);
  }
  function dumps(v) {
    if (v === null || v === undefined) return "null";
    if (v === true) return "true";
    if (v === false) return "false";
    if (typeof v === "bigint") return v.toString();
    if (typeof v === "number") return jsonFloat(v);
    if (typeof v === "string") return jsonStr(v);
    if (Array.isArray(v)) return v.length ? `[${v.map(dumps).join(", ")}]` : "[]";
    if (v instanceof PyTuple) return v.items.length ? `[${v.items.map(dumps).join(", ")}]` : "[]";
    if (v instanceof PyDict) {
      if (!v.size) return "{}";
      return `{${v
        .items()
        .map(([k, x]) => `${jsonKey(k)}: ${dumps(x)}`)
        .join(", ")}}`;
    }
    throw TypeError_(`Object of type ${typeName(v)} is not JSON serializable`);
  }
  function jsonKey(k) {
    if (typeof k === "string") return jsonStr(k);
    if (k === true) return '"true"';
    if (k === false) return '"false"';
    if (k === null) return '"null"';
    if (typeof k === "bigint") return `"${k}"`;
    if (typeof k === "number") return `"${jsonFloat(k)}"`;
    throw TypeError_(`keys must be str, int, float, bool or None, not ${typeName(k)}`);
  }

  /** How BFCL's executor turns a call's result into the model's observation text. */
  function render(result) {
    if (typeof result === "string") return result;
    if (result instanceof PyDict) {
      try {
        return dumps(result);
      } catch {
        return str(result);
      }
    }
    return str(result);
  }

  // ----- CPython's random.Random: MT19937, init_by_array seeding, getrandbits, _randbelow

  class Random {
    constructor(seed) {
      this.mt = new Uint32Array(624);
      this.mti = 625;
      let a = typeof seed === "bigint" ? seed : BigInt(seed);
      if (a < 0n) a = -a;
      const key = [];
      while (a > 0n) {
        key.push(Number(a & 0xffffffffn));
        a >>= 32n;
      }
      if (!key.length) key.push(0);
      this.initByArray(key);
    }
    initGenrand(s) {
      const mt = this.mt;
      mt[0] = s >>> 0;
      for (let i = 1; i < 624; i++) {
        const prev = mt[i - 1] ^ (mt[i - 1] >>> 30);
        mt[i] = (Math.imul(1812433253, prev) + i) >>> 0;
      }
      this.mti = 624;
    }
    initByArray(key) {
      const mt = this.mt;
      this.initGenrand(19650218);
      let i = 1;
      let j = 0;
      for (let k = Math.max(624, key.length); k; k--) {
        const prev = mt[i - 1] ^ (mt[i - 1] >>> 30);
        mt[i] = ((mt[i] ^ Math.imul(prev, 1664525)) + key[j] + j) >>> 0;
        i++;
        j++;
        if (i >= 624) {
          mt[0] = mt[623];
          i = 1;
        }
        if (j >= key.length) j = 0;
      }
      for (let k = 623; k; k--) {
        const prev = mt[i - 1] ^ (mt[i - 1] >>> 30);
        mt[i] = ((mt[i] ^ Math.imul(prev, 1566083941)) - i) >>> 0;
        i++;
        if (i >= 624) {
          mt[0] = mt[623];
          i = 1;
        }
      }
      mt[0] = 0x80000000;
    }
    genrand() {
      const mt = this.mt;
      if (this.mti >= 624) {
        let kk = 0;
        for (; kk < 624 - 397; kk++) {
          const y = (mt[kk] & 0x80000000) | (mt[kk + 1] & 0x7fffffff);
          mt[kk] = mt[kk + 397] ^ (y >>> 1) ^ (y & 1 ? 0x9908b0df : 0);
        }
        for (; kk < 623; kk++) {
          const y = (mt[kk] & 0x80000000) | (mt[kk + 1] & 0x7fffffff);
          mt[kk] = mt[kk + (397 - 624)] ^ (y >>> 1) ^ (y & 1 ? 0x9908b0df : 0);
        }
        const y = (mt[623] & 0x80000000) | (mt[0] & 0x7fffffff);
        mt[623] = mt[396] ^ (y >>> 1) ^ (y & 1 ? 0x9908b0df : 0);
        this.mti = 0;
      }
      let y = mt[this.mti++];
      y ^= y >>> 11;
      y ^= (y << 7) & 0x9d2c5680;
      y ^= (y << 15) & 0xefc60000;
      y ^= y >>> 18;
      return y >>> 0;
    }
    random() {
      const a = this.genrand() >>> 5;
      const b = this.genrand() >>> 6;
      return (a * 67108864 + b) / 9007199254740992;
    }
    getrandbits(k) {
      if (k <= 32) return BigInt(this.genrand() >>> (32 - k));
      let out = 0n;
      let shift = 0n;
      for (let left = k; left > 0; left -= 32) {
        let r = this.genrand();
        if (left < 32) r >>>= 32 - left;
        out |= BigInt(r) << shift;
        shift += 32n;
      }
      return out;
    }
    randbelow(n) {
      const k = n.toString(2).length;
      let r = this.getrandbits(k);
      while (r >= n) r = this.getrandbits(k);
      return r;
    }
    randint(a, b) {
      return a + this.randbelow(b - a + 1n);
    }
    uniform(a, b) {
      return a + (b - a) * this.random();
    }
  }

  // ----- values in and out: JSON with Python types preserved

  /**
   * Python values from JSON as the harness writes it: an integral number is an int, any other
   * number a float, `{"$float": x}` a float whose value is integral (10.0), objects are dicts.
   */
  function fromJson(v) {
    if (v === null || typeof v === "boolean" || typeof v === "string") return v;
    if (typeof v === "number") return Number.isInteger(v) && !Object.is(v, -0) ? BigInt(v) : v;
    if (Array.isArray(v)) return v.map(fromJson);
    if (typeof v === "object") {
      const keys = Object.keys(v);
      if (keys.length === 1 && keys[0] === "$float") return Number(v.$float);
      if (keys.length === 1 && keys[0] === "$int") return BigInt(v.$int);
      if (keys.length === 1 && keys[0] === "$opaque") return new PyOpaque(v.$opaque);
      return new PyDict(keys.map((k) => [k, fromJson(v[k])]));
    }
    return v;
  }
  /** The reverse of fromJson (for the bridge's state view; dict keys become strings as json.dumps makes them). */
  function toJson(v) {
    if (v === null || v === undefined || typeof v === "boolean" || typeof v === "string") return v ?? null;
    if (typeof v === "bigint") return Number.isSafeInteger(Number(v)) ? Number(v) : { $int: v.toString() };
    if (typeof v === "number") return Number.isFinite(v) && Number.isInteger(v) ? { $float: v } : Number.isFinite(v) ? v : { $float: String(v) };
    if (Array.isArray(v)) return v.map(toJson);
    if (v instanceof PyTuple) return v.items.map(toJson);
    if (v instanceof PySet) return { $set: v.values().map(toJson) };
    if (v instanceof PyDict) {
      const o = {};
      for (const [k, x] of v.items()) o[typeof k === "string" ? k : repr(k)] = toJson(x);
      return o;
    }
    if (v instanceof PyOpaque) return { $repr: v.reprText };
    if (v && typeof v.__json__ === "function") return v.__json__();
    return String(v);
  }

  /**
   * A type-tagged canonical text of a value (the oracle writes the same from the original objects):
   * every scalar tagged with its Python type, dicts as ordered [key, value] pairs.
   */
  function tagged(v) {
    if (v === null || v === undefined) return "N";
    if (typeof v === "boolean") return v ? "b:1" : "b:0";
    if (typeof v === "bigint") return "i:" + v.toString();
    if (typeof v === "number") return "f:" + floatRepr(v);
    if (typeof v === "string") return "s:" + v;
    if (Array.isArray(v)) return { l: v.map(tagged) };
    if (v instanceof PyTuple) return { t: v.items.map(tagged) };
    if (v instanceof PyDict) return { d: v.items().map(([k, x]) => [tagged(k), tagged(x)]) };
    if (v instanceof PySet) return { set: v.values().map((x) => JSON.stringify(tagged(x))).sort() };
    if (v instanceof PyOpaque) return "o:" + v.reprText;
    if (v && typeof v.__tagged__ === "function") return v.__tagged__();
    return "?:" + String(v);
  }

  return {
    PyError, PyDict, PySet, PyTuple, PyOpaque, Random,
    isInt, isFloat, isNum, typeName, toF, toI, float, int, abs,
    floatRepr, formatFixed, round, add, sub, mul, div, pow, mod, lt, le, gt, ge, eq, cmpNum, cmpStr, truthy, contains, len, iter, sum,
    splitlines, splitWs, strip, rstrip, sortedStrs, strRepr, repr, str, dumps, render,
    fromJson, toJson, tagged,
    TypeError: TypeError_, ValueError: ValueError_, KeyError: KeyError_,
  };
})();
