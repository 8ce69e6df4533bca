/**
 * TauPy: the Python semantics the tau-bench tool ports need (sierra-research/tau-bench, MIT
 * licence), shared by retail-env.js and airline-env.js. A bundle's env.js is one file, so
 * `envscaler import taubench` writes this file and the domain's class into it, one after the other;
 * envs/taubench/verify.mjs loads them the same way. Kept outside the env classes so that none of
 * it is exposed as a tool.
 *
 * - Python's str()/repr() of JSON values and floats ("1e+16", "1e-05", "0.1"), round(x, 2)
 *   (correctly rounded from the exact binary value, ties to even), ==, <, sorted() by code point,
 *   `in`, len(), truthiness, and the errors Python raises (KeyError "'balance'", TypeError for
 *   missing/unexpected arguments, "unhashable type" for list/dict keys).
 * - run(): how tau-bench's Env.step calls Tool.invoke(data, **kwargs) and turns any exception
 *   into "Error: <str(e)>".
 * - calculate(): str(round(float(eval(expression)), 2)) without eval: a faithful subset of
 *   CPython 3.11 (tokenizer, parser limits such as 200 nested parentheses, int/float/complex
 *   arithmetic with ** and //, and CPython's error texts).
 * - Floats: the ports run with observation_format "python", so the state holds Python's values as
 *   the global `Py` layer (bridge/core/sandbox/python-values.js) reads them: a float with an integral
 *   value (46.0) is a box, dicts keep insertion order. Everything here accepts boxes; arith, abs
 *   and round2 give float results where Python does (46.0 - 46.0 is 0.0, not 0), and clone keeps
 *   order and boxes, so json.dumps of a result is the original's text.
 */
const TauPy = (function () {
  "use strict";
  // The Py layer when the env runs with observation_format "python", as the importer writes the
  // bundles; otherwise a JSON-only stand-in (no float boxes, JS key order, JSON-quoted strings),
  // which behaves as the ports did before the layer existed.
  const Values =
    typeof Py === "object" && Py !== null
      ? Py
      : {
          isFloat: (v) => typeof v === "number" && !Number.isInteger(v),
          num: (v) => v,
          float: (x) => x,
          copy: (v) => (v === undefined ? null : JSON.parse(JSON.stringify(v))),
        };
  const hasOwn = Object.prototype.hasOwnProperty;

  /** An exception carrying the text Python's str(exception) would give. */
  function PyError(message) {
    this.message = message;
  }
  PyError.prototype.name = "PyError";
  function err(message) {
    return new PyError(message);
  }

  /** A float box (see Values.float): an object to JS, a float to Python. */
  const isBox = (v) => v !== null && typeof v === "object" && Values.isFloat(v);
  const isNum = (v) => typeof v === "number" || typeof v === "boolean" || isBox(v);

  function typeName(v) {
    if (v === null || v === undefined) return "NoneType";
    if (isBox(v)) return "float";
    if (typeof v === "boolean") return "bool";
    if (typeof v === "number") return Number.isInteger(v) ? "int" : "float";
    if (typeof v === "string") return "str";
    if (Array.isArray(v)) return "list";
    return "dict";
  }

  // ----- float formatting --------------------------------------------------------------------

  /** Shortest round-trip digits of |x| (finite, non-zero) and the decimal point position. */
  function shortestDigits(x) {
    const s = String(Math.abs(x));
    const m = /^(\d+)(?:\.(\d+))?(?:e([+-]\d+))?$/.exec(s);
    const intp = m[1];
    const frac = m[2] || "";
    const exp = m[3] ? parseInt(m[3], 10) : 0;
    let digits = intp + frac;
    let decpt = intp.length + exp;
    let lead = 0;
    while (lead < digits.length - 1 && digits[lead] === "0") lead++;
    digits = digits.slice(lead);
    decpt -= lead;
    digits = digits.replace(/0+$/, "");
    if (digits === "") digits = "0";
    return { digits, decpt };
  }

  /** Python repr(float): shortest round-trip, exponent form when decpt <= -4 or > 16. */
  function floatRepr(x, addDot0) {
    if (addDot0 === undefined) addDot0 = true;
    if (x !== x) return "nan";
    if (x === Infinity) return "inf";
    if (x === -Infinity) return "-inf";
    if (x === 0) return (1 / x < 0 ? "-0" : "0") + (addDot0 ? ".0" : "");
    const sign = x < 0 ? "-" : "";
    const d = shortestDigits(x);
    const digits = d.digits;
    const decpt = d.decpt;
    if (decpt <= -4 || decpt > 16) {
      const e = decpt - 1;
      const mant = digits[0] + (digits.length > 1 ? "." + digits.slice(1) : "");
      const ae = String(Math.abs(e));
      return sign + mant + "e" + (e < 0 ? "-" : "+") + (ae.length < 2 ? "0" + ae : ae);
    }
    if (decpt <= 0) return sign + "0." + "0".repeat(-decpt) + digits;
    if (decpt >= digits.length) return sign + digits + "0".repeat(decpt - digits.length) + (addDot0 ? ".0" : "");
    return sign + digits.slice(0, decpt) + "." + digits.slice(decpt);
  }

  /** A JSON number printed as Python would print it (integral values as Python ints). */
  function numStr(x) {
    if (isBox(x)) return floatRepr(Values.num(x));
    if (Number.isInteger(x)) return Math.abs(x) < 1e21 ? String(x) : BigInt(x).toString();
    return floatRepr(x);
  }

  /** Python repr() of a str. */
  function strRepr(s) {
    const q = s.indexOf("'") >= 0 && s.indexOf('"') < 0 ? '"' : "'";
    let out = q;
    for (const ch of s) {
      const c = ch.codePointAt(0);
      if (ch === q || ch === "\\") out += "\\" + ch;
      else if (ch === "\n") out += "\\n";
      else if (ch === "\r") out += "\\r";
      else if (ch === "\t") out += "\\t";
      else if (c < 0x20 || (c >= 0x7f && c < 0xa0)) out += "\\x" + (c < 16 ? "0" : "") + c.toString(16);
      else if (c >= 0xd800 && c < 0xe000) out += "\\u" + c.toString(16);
      else out += ch;
    }
    return out + q;
  }

  /** Python repr() of a JSON value. */
  function repr(v) {
    if (v === null || v === undefined) return "None";
    if (v === true) return "True";
    if (v === false) return "False";
    if (typeof v === "number" || isBox(v)) return numStr(v);
    if (typeof v === "string") return strRepr(v);
    if (Array.isArray(v)) return "[" + v.map(repr).join(", ") + "]";
    return "{" + Object.keys(v).map((k) => strRepr(k) + ": " + repr(v[k])).join(", ") + "}";
  }

  /** Python str() of a JSON value (what an f-string prints). */
  function str(v) {
    return typeof v === "string" ? v : repr(v);
  }

  // ----- round(x, 2) ---------------------------------------------------------------------------

  /**
   * Python round(x, 2): the double nearest to the exact decimal value of x rounded to 2 places,
   * ties (only possible when x is exactly k/8 with k odd) to even. toFixed is exact except that
   * it breaks ties away from zero, so ties are handled separately.
   */
  function round2(x) {
    if (typeof x !== "number" && !isBox(x)) throw err("type " + typeName(x) + " doesn't define __round__ method");
    // round() of a float is a float (round(97.0, 2) is 97.0), of an int an int
    return Values.isFloat(x) ? Values.float(round2Number(Values.num(x))) : x;
  }
  function round2Number(x) {
    if (!isFinite(x) || Number.isInteger(x)) return x;
    const t = x * 8; // exact
    if (Number.isInteger(t) && Math.abs(t % 2) === 1) {
      const ip = Math.trunc(x);
      const fr = Math.abs(x - ip); // exact: 0.125, 0.375, 0.625 or 0.875
      const d = fr === 0.125 ? "12" : fr === 0.375 ? "38" : fr === 0.625 ? "62" : "88";
      return parseFloat((x < 0 ? "-" : "") + String(Math.abs(ip)) + "." + d);
    }
    if (Math.abs(x) >= 1e21) return x;
    return parseFloat(x.toFixed(2));
  }

  // ----- dict / list access with Python's errors -------------------------------------------

  /** Python `k in d` for a dict d. */
  function isIn(d, k) {
    if (k !== null && typeof k === "object") throw err("unhashable type: '" + typeName(k) + "'");
    return typeof k === "string" && hasOwn.call(d, k);
  }

  /** Python d[k]. */
  function get(d, k) {
    if (d === null || d === undefined || typeof d === "number" || typeof d === "boolean" || isBox(d)) {
      throw err("'" + typeName(d) + "' object is not subscriptable");
    }
    if (typeof d === "string" || Array.isArray(d)) {
      const what = typeof d === "string" ? "string" : "list";
      if (typeof k !== "number" || !Number.isInteger(k)) {
        if (typeof d === "string") throw err("string indices must be integers, not '" + typeName(k) + "'");
        throw err("list indices must be integers or slices, not " + typeName(k));
      }
      const seq = typeof d === "string" ? Array.from(d) : d;
      const i = k < 0 ? seq.length + k : k;
      if (i < 0 || i >= seq.length) throw err(what + " index out of range");
      return seq[i];
    }
    if (k !== null && typeof k === "object") throw err("unhashable type: '" + typeName(k) + "'");
    if (typeof k === "string" && hasOwn.call(d, k)) return d[k];
    throw err(repr(k));
  }

  /** Python iteration over a value (list: items, str: characters, dict: keys). */
  function iter(v) {
    if (isBox(v)) throw err("'float' object is not iterable");
    if (Array.isArray(v)) return v;
    if (typeof v === "string") return Array.from(v);
    if (v !== null && typeof v === "object") return Object.keys(v);
    throw err("'" + typeName(v) + "' object is not iterable");
  }

  /** Python len(). */
  function len(v) {
    if (isBox(v)) throw err("object of type 'float' has no len()");
    if (Array.isArray(v)) return v.length;
    if (typeof v === "string") return Array.from(v).length;
    if (v !== null && typeof v === "object") return Object.keys(v).length;
    throw err("object of type '" + typeName(v) + "' has no len()");
  }

  /** Python ==, for the JSON values the tools compare. */
  function eq(a, b) {
    a = Values.num(a);
    b = Values.num(b);
    if (a === b) return true;
    if (a === null || b === null || typeof a !== "object" || typeof b !== "object") {
      // bool is an int subclass in Python
      if ((typeof a === "boolean" || typeof a === "number") && (typeof b === "boolean" || typeof b === "number")) return Number(a) === Number(b);
      return false;
    }
    if (Array.isArray(a) !== Array.isArray(b)) return false;
    if (Array.isArray(a)) return a.length === b.length && a.every((x, i) => eq(x, b[i]));
    const ka = Object.keys(a);
    return ka.length === Object.keys(b).length && ka.every((k) => hasOwn.call(b, k) && eq(a[k], b[k]));
  }

  /** Python seq.count(x) for a list or str. */
  function count(seq, x) {
    if (Array.isArray(seq)) {
      let n = 0;
      for (const y of seq) if (eq(y, x)) n++;
      return n;
    }
    if (typeof seq === "string") {
      if (typeof x !== "string") throw err("must be str, not " + typeName(x));
      if (x === "") return Array.from(seq).length + 1;
      return seq.split(x).length - 1;
    }
    throw err("'" + typeName(seq) + "' object has no attribute 'count'");
  }

  /** Python `needle in haystack` (substring for str, membership for list/dict). */
  function contains(hay, needle) {
    if (typeof hay === "string") {
      if (typeof needle !== "string") throw err("'in <string>' requires string as left operand, not " + typeName(needle));
      return hay.indexOf(needle) >= 0;
    }
    if (Array.isArray(hay)) return hay.some((x) => eq(x, needle));
    if (hay !== null && typeof hay === "object") return isIn(hay, needle);
    throw err("argument of type '" + typeName(hay) + "' is not iterable");
  }

  /** Python truthiness. */
  function truthy(v) {
    if (isBox(v)) return Values.num(v) !== 0;
    if (Array.isArray(v)) return v.length > 0;
    if (v !== null && typeof v === "object") return Object.keys(v).length > 0;
    return !!v;
  }

  /** Python s.lower(). */
  function lower(s) {
    if (typeof s !== "string") throw err("'" + typeName(s) + "' object has no attribute 'lower'");
    return s.toLowerCase();
  }

  /** Compares two strings by code point, as Python does. */
  function cmpStr(a, b) {
    const n = Math.min(a.length, b.length);
    for (let i = 0; i < n; i++) {
      const ca = a.charCodeAt(i);
      const cb = b.charCodeAt(i);
      if (ca === cb) continue;
      const sa = ca >= 0xd800 && ca < 0xe000;
      const sb = cb >= 0xd800 && cb < 0xe000;
      if (sa !== sb) return sa ? 1 : -1; // a surrogate (astral code point) sorts after any BMP char
      return ca < cb ? -1 : 1;
    }
    return a.length === b.length ? 0 : a.length < b.length ? -1 : 1;
  }

  /** Python a < b for the JSON values the tools compare. */
  function lt(a, b) {
    if (typeof a === "string" && typeof b === "string") return cmpStr(a, b) < 0;
    if (isNum(a) && isNum(b)) return Number(Values.num(a)) < Number(Values.num(b));
    throw err("'<' not supported between instances of '" + typeName(a) + "' and '" + typeName(b) + "'");
  }

  /** Python a + b, a - b, a * b for numbers (bool is an int; a float operand makes a float); TypeError for other operands. */
  function arith(op, a, b) {
    if (!isNum(a) || !isNum(b)) throw err("unsupported operand type(s) for " + op + ": '" + typeName(a) + "' and '" + typeName(b) + "'");
    const x = Number(Values.num(a));
    const y = Number(Values.num(b));
    const r = op === "+" ? x + y : op === "-" ? x - y : x * y;
    return Values.isFloat(a) || Values.isFloat(b) ? Values.float(r) : r;
  }

  /** Python abs() of a number (a float stays a float). */
  function abs(a) {
    if (!isNum(a)) throw err("bad operand type for abs(): '" + typeName(a) + "'");
    const r = Math.abs(Number(Values.num(a)));
    return Values.isFloat(a) ? Values.float(r) : r;
  }

  /** Python sorted() of a list of str (or of numbers). Stable, like Python's. */
  function sorted(v) {
    const items = iter(v).slice();
    return items
      .map((x, i) => [x, i])
      .sort((p, q) => (lt(p[0], q[0]) ? -1 : lt(q[0], p[0]) ? 1 : p[1] - q[1]))
      .map((p) => p[0]);
  }

  /** A deep copy of a JSON value (json.dumps takes a snapshot; copy.deepcopy copies), keeping dict order and floats. */
  function clone(v) {
    return Values.copy(v);
  }

  /** The first element of a list, or Python's IndexError. */
  function first(list) {
    if (list.length === 0) throw err("list index out of range");
    return list[0];
  }

  /**
   * Calls a tool body as tau-bench's Env.step calls Tool.invoke(data, **kwargs): Python's own
   * errors for unexpected or missing keyword arguments, and any exception raised by the body
   * turned into the observation "Error: <str(exception)>".
   */
  function run(toolClass, params, args, body) {
    if (args === null || typeof args !== "object" || Array.isArray(args)) args = {};
    const where = toolClass + ".invoke()";
    for (const k of Object.keys(args)) {
      if (k === "data") return "Error: " + where + " got multiple values for argument 'data'";
      if (params.indexOf(k) < 0) return "Error: " + where + " got an unexpected keyword argument '" + k + "'";
    }
    const missing = params.filter((p) => !hasOwn.call(args, p));
    if (missing.length) {
      const q = missing.map((p) => "'" + p + "'");
      const list = q.length === 1 ? q[0] : q.length === 2 ? q[0] + " and " + q[1] : q.slice(0, -1).join(", ") + ", and " + q[q.length - 1];
      return "Error: " + where + " missing " + q.length + " required positional argument" + (q.length > 1 ? "s" : "") + ": " + list;
    }
    try {
      return body.apply(null, params.map((p) => (args[p] === undefined ? null : args[p])));
    } catch (e) {
      if (e instanceof PyError) return "Error: " + e.message;
      return "Error: " + (e !== null && typeof e === "object" && "message" in e ? String(e.message) : String(e));
    }
  }

  // ----- calculate: str(round(float(eval(expression)), 2)) without eval ---------------------
  //
  // A faithful subset of CPython 3.11 for the characters the tool accepts ("0123456789+-*/(). "):
  // tokenizer (leading zeros, unmatched/unclosed/too deeply nested parentheses, "..." literal),
  // the PEG parser's two passes (generic "invalid syntax", "Perhaps you forgot a comma?" inside
  // brackets, starred groups, tokenizer errors found later in the source taking precedence), and
  // evaluation of int (arbitrary precision), float, complex, tuple and Ellipsis values with
  // Python's operators (+ - * / // **, unary +/-, calls) and error messages.

  const ALLOWED = "0123456789+-*/(). ";
  const SUFFIX = " (<string>, line 1)";

  function SyntaxErr(message) {
    this.message = message;
  }

  function tokenizer(src) {
    let i = 0;
    let level = 0;
    let done = false;
    const n = src.length;
    const isDigit = (c) => c >= "0" && c <= "9";
    function fail(msg) {
      done = true;
      return { type: "ERR", msg };
    }
    function next() {
      if (done) return { type: "END", level };
      while (i < n && src[i] === " ") i++;
      if (i >= n) {
        if (level > 0) {
          const t = fail("'(' was never closed");
          t.eof = true;
          return t;
        }
        done = true;
        return { type: "END", level };
      }
      const c = src[i];
      if (isDigit(c) || (c === "." && i + 1 < n && isDigit(src[i + 1]))) {
        const start = i;
        let isFloat = false;
        if (c === ".") {
          isFloat = true;
          i++;
          while (i < n && isDigit(src[i])) i++;
        } else if (c === "0") {
          while (i < n && src[i] === "0") i++;
          let nonzero = false;
          while (i < n && isDigit(src[i])) {
            nonzero = true;
            i++;
          }
          if (i < n && src[i] === ".") {
            isFloat = true;
            i++;
            while (i < n && isDigit(src[i])) i++;
          } else if (nonzero) {
            return fail("leading zeros in decimal integer literals are not permitted; use an 0o prefix for octal integers");
          }
        } else {
          while (i < n && isDigit(src[i])) i++;
          if (i < n && src[i] === ".") {
            isFloat = true;
            i++;
            while (i < n && isDigit(src[i])) i++;
          }
        }
        const text = src.slice(start, i);
        return { type: "NUM", text, isFloat, level };
      }
      if (c === ".") {
        if (src[i + 1] === "." && src[i + 2] === ".") {
          i += 3;
          return { type: "ELL", level };
        }
        i++;
        return { type: "OP", v: ".", level };
      }
      if (c === "(") {
        if (level >= 200) return fail("too many nested parentheses");
        level++;
        i++;
        return { type: "OP", v: "(", level };
      }
      if (c === ")") {
        if (level === 0) return fail("unmatched ')'");
        level--;
        i++;
        return { type: "OP", v: ")", level };
      }
      if ((c === "*" || c === "/") && src[i + 1] === c) {
        i += 2;
        return { type: "OP", v: c + c, level };
      }
      i++;
      return { type: "OP", v: c, level };
    }
    return { next, isDone: () => done };
  }

  // AST nodes: {k:"num", text, isFloat} {k:"ell"} {k:"tuple"} {k:"un", op, e} {k:"bin", op, l, r}
  // {k:"call", f, arg: null | {star: "" | "*" | "**", e}}; every node carries its depth d.
  function parse(src) {
    const tok = tokenizer(src);
    const toks = [];
    function fetch(k) {
      while (toks.length <= k) {
        const t = tok.next();
        if (t.type === "ERR") {
          const e = new SyntaxErr(t.msg);
          e.fromTokenizer = true;
          e.eof = !!t.eof;
          throw e;
        }
        toks.push(t);
      }
      return toks[k];
    }
    let pos = 0;
    let inv = false; // second pass: the invalid_* rules are active
    let memoExpr = Object.create(null);
    let memoDisj = Object.create(null);
    let levels = 0; // rough count of CPython parser recursion levels (MAXSTACK 6000)
    const peek = () => fetch(pos);
    const isOp = (t, v) => t.type === "OP" && t.v === v;
    const mk = (node, kids) => {
      let d = 0;
      for (const c of kids) if (c.d > d) d = c.d;
      node.d = d + 1;
      return node;
    };
    function enter(n) {
      levels += n;
      if (levels > 5985) {
        const e = new SyntaxErr("");
        e.memory = true;
        throw e;
      }
    }

    function expression() {
      const key = pos;
      const m = memoExpr[key];
      if (m !== undefined) {
        pos = m.end;
        return m.node;
      }
      enter(1);
      let node = null;
      if (inv) {
        // invalid_expression: a=disjunction b=expression_without_invalid, inside brackets
        const save = pos;
        const a = disjunction();
        if (a) {
          const was = inv;
          inv = false;
          const b = expressionNoMemo();
          inv = was;
          if (b && toks[pos - 1].level !== 0) throw new SyntaxErr("invalid syntax. Perhaps you forgot a comma?");
        }
        pos = save;
      }
      node = expressionNoMemo();
      levels -= 1;
      memoExpr[key] = { node, end: pos };
      return node;
    }
    function expressionNoMemo() {
      const save = pos;
      const d = disjunction();
      if (d) {
        peek(); // 'if'
        return d;
      }
      pos = save;
      return null;
    }

    // disjunction .. sum .. term: binary + - * / // with precedence, left-associative
    function disjunction() {
      const key = pos;
      const m = memoDisj[key];
      if (m !== undefined) {
        pos = m.end;
        return m.node;
      }
      enter(18);
      const operands = [];
      const ops = [];
      let f = factor();
      if (f) {
        operands.push(f);
        for (;;) {
          const save = pos;
          const t = peek();
          if (t.type === "OP" && (t.v === "+" || t.v === "-" || t.v === "*" || t.v === "/" || t.v === "//")) {
            pos++;
            const r = factor();
            if (r) {
              ops.push(t.v);
              operands.push(r);
              continue;
            }
            pos = save;
          }
          break;
        }
      }
      let node = null;
      if (operands.length) {
        // fold * / // first, then + -
        const terms = [];
        const addOps = [];
        let cur = operands[0];
        for (let i = 0; i < ops.length; i++) {
          const op = ops[i];
          if (op === "+" || op === "-") {
            terms.push(cur);
            addOps.push(op);
            cur = operands[i + 1];
          } else {
            cur = mk({ k: "bin", op, l: cur, r: operands[i + 1] }, [cur, operands[i + 1]]);
          }
        }
        terms.push(cur);
        node = terms[0];
        for (let i = 0; i < addOps.length; i++) node = mk({ k: "bin", op: addOps[i], l: node, r: terms[i + 1] }, [node, terms[i + 1]]);
      }
      levels -= 18;
      memoDisj[key] = { node, end: pos };
      return node;
    }

    // factor: ('+'|'-')* power ;  power: primary ['**' factor]  (right-associative)
    function factor() {
      const start = pos;
      const chain = []; // [{prefix: [ops], prim}]
      let used = 0;
      for (;;) {
        const prefix = [];
        const before = pos;
        for (;;) {
          const t = peek();
          if (t.type === "OP" && (t.v === "+" || t.v === "-")) {
            prefix.push(t.v);
            pos++;
          } else break;
        }
        enter(prefix.length + 2);
        used += prefix.length + 2;
        const prim = primary();
        if (!prim) {
          if (chain.length === 0) {
            pos = start;
            levels -= used;
            return null;
          }
          pos = before - 1; // back to before the '**'
          break;
        }
        chain.push({ prefix, prim });
        const t = peek();
        if (isOp(t, "**")) {
          pos++;
          continue;
        }
        break;
      }
      let acc = null;
      for (let i = chain.length - 1; i >= 0; i--) {
        let v = acc === null ? chain[i].prim : mk({ k: "bin", op: "**", l: chain[i].prim, r: acc }, [chain[i].prim, acc]);
        const pre = chain[i].prefix;
        for (let j = pre.length - 1; j >= 0; j--) v = mk({ k: "un", op: pre[j], e: v }, [v]);
        acc = v;
      }
      levels -= used;
      return acc;
    }

    function primary() {
      let a = atom();
      if (!a) return null;
      for (;;) {
        const save = pos;
        const t = peek();
        if (isOp(t, ".")) {
          pos++;
          peek(); // NAME expected
          pos = save;
          break;
        }
        if (isOp(t, "(")) {
          genexp();
          pos = save + 1;
          const arg = args();
          if (isOp(peek(), ")")) {
            pos++;
            a = mk({ k: "call", f: a, arg }, arg ? [a, arg.e] : [a]);
            continue;
          }
          pos = save;
        }
        break;
      }
      return a;
    }

    // genexp: '(' expression for_if_clauses ')' never matches here, but is tried (and in the
    // second pass invalid_comprehension: '(' starred_expression for_if_clauses)
    function genexp() {
      const save = pos;
      pos++;
      if (expression()) peek();
      pos = save;
      if (inv) {
        pos++;
        if (isOp(peek(), "*")) {
          pos++;
          if (expression()) peek();
        }
        pos = save;
      }
      return null;
    }

    // arguments (one at most: no commas in the alphabet): expression | '*' expression | '**' expression
    function args() {
      const save = pos;
      const t = peek();
      if (isOp(t, "*") || isOp(t, "**")) {
        pos++;
        const e = expression();
        if (e) {
          peek();
          return { star: t.v, e };
        }
        pos = save;
        return null;
      }
      const e = expression();
      if (e) {
        peek(); // ':=' / '=' / ','
        return { star: "", e };
      }
      pos = save;
      return null;
    }

    function atom() {
      const t = peek();
      if (t.type === "NUM") {
        if (!t.isFloat && t.text.length > 4300) {
          // raised by the parser's action for the literal, not by the tokenizer
          throw new SyntaxErr(
            "Exceeds the limit (4300 digits) for integer string conversion: value has " +
              t.text.length +
              " digits; use sys.set_int_max_str_digits() to increase the limit - Consider hexadecimal for huge integer literals to avoid decimal conversion limits.",
          );
        }
        pos++;
        return { k: "num", text: t.text, isFloat: t.isFloat, d: 1 };
      }
      if (t.type === "ELL") {
        pos++;
        return { k: "ell", d: 1 };
      }
      if (!isOp(t, "(")) return null;
      enter(4);
      const save = pos;
      let result = null;
      // tuple: '(' [star_named_expression ',' ...] ')'
      pos++;
      const s2 = pos;
      if (isOp(peek(), "*")) {
        pos++;
        if (disjunction()) peek();
      } else if (expression()) peek();
      pos = s2;
      if (isOp(peek(), ")")) {
        pos++;
        result = { k: "tuple", d: 1 };
      } else {
        // group: '(' named_expression ')'
        pos = save + 1;
        const e = expression();
        if (e) {
          peek();
          if (isOp(peek(), ")")) {
            pos++;
            result = e;
          }
        }
        if (!result) {
          pos = save;
          if (inv) {
            // invalid_group
            pos = save + 1;
            if (isOp(peek(), "*")) {
              pos++;
              if (expression() && isOp(peek(), ")")) throw new SyntaxErr("cannot use starred expression here");
            }
            pos = save + 1;
            if (isOp(peek(), "**")) {
              pos++;
              if (expression() && isOp(peek(), ")")) throw new SyntaxErr("cannot use double starred expression here");
            }
            pos = save;
          }
          genexp();
          pos = save;
        }
      }
      levels -= 4;
      return result;
    }

    function parseEval() {
      pos = 0;
      const e = expression();
      if (!e) return null;
      peek(); // ','
      if (peek().type === "END") return e;
      return null;
    }

    function scanRest() {
      // _PyPegen_tokenize_full_source_to_check_for_errors: a later tokenizer error replaces a
      // parser error (an unclosed parenthesis on the same line does not)
      if (tok.isDone()) return;
      try {
        for (;;) {
          const t = fetch(toks.length);
          if (t.type === "END") return;
        }
      } catch (e) {
        if (e instanceof SyntaxErr && e.eof) return;
        throw e;
      }
    }
    function withScan(f) {
      try {
        return f();
      } catch (e) {
        if (e instanceof SyntaxErr && !e.memory && !e.fromTokenizer) scanRest();
        throw e;
      }
    }

    const tree = withScan(parseEval);
    if (tree) return tree;
    // second pass, with the invalid_* rules
    memoExpr = Object.create(null);
    memoDisj = Object.create(null);
    levels = 0;
    inv = true;
    withScan(parseEval);
    if (src.length === 0) throw new SyntaxErr("invalid syntax\u0000line0");
    scanRest();
    throw new SyntaxErr("invalid syntax");
  }

  // ----- values ----------------------------------------------------------------------------
  // {t:"int", v:BigInt} {t:"float", v:number} {t:"complex", re, im} {t:"tuple"} {t:"ellipsis"}

  const INT = (v) => ({ t: "int", v });
  const FLT = (v) => ({ t: "float", v });
  const CPX = (re, im) => ({ t: "complex", re, im });

  function bitLength(b) {
    return b === 0n ? 0 : b.toString(2).length;
  }
  function pow2(k) {
    let r = 1;
    while (k > 0) {
      r *= 2;
      k--;
    }
    while (k < 0) {
      r /= 2;
      k++;
    }
    return r;
  }
  /** PyLong_AsDouble: correctly rounded, OverflowError when too large. */
  function intToFloat(b) {
    const x = Number(b);
    if (!isFinite(x)) throw err("int too large to convert to float");
    return x;
  }
  /** int / int, correctly rounded (long_true_divide). */
  function trueDiv(a, b) {
    if (b === 0n) throw err("division by zero");
    const neg = a < 0n !== b < 0n;
    const A = a < 0n ? -a : a;
    const B = b < 0n ? -b : b;
    if (A === 0n) return neg ? -0 : 0;
    if (A <= 9007199254740992n && B <= 9007199254740992n) return Number(a) / Number(b);
    const diff = bitLength(A) - bitLength(B);
    if (diff > 1025) throw err("integer division result too large for a float");
    // e = floor(log2(A/B))
    let e = diff;
    const lhs = diff >= 0 ? A : A << BigInt(-diff);
    const rhs = diff >= 0 ? B << BigInt(diff) : B;
    if (lhs < rhs) e = diff - 1;
    if (e < -1080) return neg ? -0 : 0;
    const lsb = Math.max(e, -1022) - 52;
    let num = A;
    let den = B;
    if (lsb <= 0) num = A << BigInt(-lsb);
    else den = B << BigInt(lsb);
    let q = num / den;
    const r = num % den;
    const twice = 2n * r;
    if (twice > den || (twice === den && (q & 1n) === 1n)) q += 1n;
    let x;
    if (lsb < -1022) x = Number(q) * pow2(-1022) * pow2(lsb + 1022);
    else x = Number(q) * pow2(lsb);
    if (!isFinite(x)) throw err("integer division result too large for a float");
    return neg ? -x : x;
  }
  function floorDivInt(a, b) {
    if (b === 0n) throw err("integer division or modulo by zero");
    let q = a / b;
    if (a % b !== 0n && a < 0n !== b < 0n) q -= 1n;
    return q;
  }
  function floorDivFloat(vx, wx) {
    if (wx === 0) throw err("float floor division by zero");
    let mod = vx % wx;
    let div = (vx - mod) / wx;
    if (mod) {
      if (wx < 0 !== mod < 0) {
        mod += wx;
        div -= 1.0;
      }
    }
    let floordiv;
    if (div) {
      floordiv = Math.floor(div);
      if (div - floordiv > 0.5) floordiv += 1.0;
    } else {
      floordiv = (vx / wx < 0 || Object.is(vx / wx, -0) ? -0 : 0);
    }
    return floordiv;
  }
  const isOddInt = (x) => isFinite(x) && Number.isInteger(x) && Math.abs(x % 2) === 1;
  /** float_pow; returns a value (complex for a negative base and a fractional exponent). */
  function floatPow(v, w, iv, iw) {
    if (iw === 0) return FLT(1.0);
    if (iv !== iv) return FLT(iv);
    if (iw !== iw) return FLT(iv === 1.0 ? 1.0 : iw);
    if (!isFinite(iw)) {
      const a = Math.abs(iv);
      if (a === 1.0) return FLT(1.0);
      if (iw > 0 === a > 1.0) return FLT(Math.abs(iw));
      return FLT(0.0);
    }
    if (!isFinite(iv)) {
      const odd = isOddInt(iw);
      if (iw > 0) return FLT(odd ? iv : Math.abs(iv));
      return FLT(odd ? (iv < 0 ? -0 : 0) : 0.0);
    }
    if (iv === 0) {
      const odd = isOddInt(iw);
      if (iw < 0) throw err("0.0 cannot be raised to a negative power");
      return FLT(odd ? iv : 0.0);
    }
    let negate = false;
    if (iv < 0) {
      if (iw !== Math.floor(iw)) return complexPow(toComplex(v), toComplex(w));
      iv = -iv;
      negate = isOddInt(iw);
    }
    if (iv === 1.0) return FLT(negate ? -1.0 : 1.0);
    let ix = Math.pow(iv, iw);
    if (!isFinite(ix)) throw err("(34, 'Numerical result out of range')");
    if (negate) ix = -ix;
    return FLT(ix);
  }
  function toComplex(x) {
    if (x.t === "complex") return x;
    if (x.t === "int") return CPX(intToFloat(x.v), 0);
    return CPX(x.v, 0);
  }
  function cProd(a, b) {
    return CPX(a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re);
  }
  function cQuot(a, b) {
    const abr = Math.abs(b.re);
    const abi = Math.abs(b.im);
    if (abr >= abi) {
      if (abr === 0) return null;
      const ratio = b.im / b.re;
      const denom = b.re + b.im * ratio;
      return CPX((a.re + a.im * ratio) / denom, (a.im - a.re * ratio) / denom);
    }
    if (abi >= abr) {
      const ratio = b.re / b.im;
      const denom = b.re * ratio + b.im;
      return CPX((a.re * ratio + a.im) / denom, (a.im * ratio - a.re) / denom);
    }
    return CPX(NaN, NaN);
  }
  function complexPow(a, b) {
    let p;
    let edom = false;
    if (b.im === 0 && b.re === Math.floor(b.re) && Math.abs(b.re) <= 100) {
      const n = b.re;
      const powu = (x, k) => {
        let r = CPX(1, 0);
        let q = x;
        let mask = 1;
        while (mask > 0 && k >= mask) {
          if (k & mask) r = cProd(r, q);
          mask <<= 1;
          q = cProd(q, q);
        }
        return r;
      };
      if (n > 0) p = powu(a, n);
      else {
        p = cQuot(CPX(1, 0), powu(a, -n));
        if (p === null) {
          edom = true;
          p = CPX(0, 0);
        }
      }
    } else if (b.re === 0 && b.im === 0) p = CPX(1, 0);
    else if (a.re === 0 && a.im === 0) {
      if (b.im !== 0 || b.re < 0) edom = true;
      p = CPX(0, 0);
    } else {
      const vabs = Math.hypot(a.re, a.im);
      let len = Math.pow(vabs, b.re);
      const at = Math.atan2(a.im, a.re);
      let phase = at * b.re;
      if (b.im !== 0) {
        len /= Math.exp(at * b.im);
        phase += b.im * Math.log(vabs);
      }
      p = CPX(len * Math.cos(phase), len * Math.sin(phase));
    }
    if (edom) throw err("0.0 to a negative or complex power");
    if (Math.abs(p.re) === Infinity || Math.abs(p.im) === Infinity) throw err("complex exponentiation");
    return p;
  }
  const tn = (x) => x.t;
  function opSym(op) {
    return op === "**" ? "** or pow()" : op;
  }
  function unsupported(op, a, b) {
    return err("unsupported operand type(s) for " + opSym(op) + ": '" + tn(a) + "' and '" + tn(b) + "'");
  }
  function binop(op, a, b) {
    if (a.t === "tuple" || b.t === "tuple") {
      if (op === "+" && a.t === "tuple") {
        if (b.t === "tuple") return a;
        throw err('can only concatenate tuple (not "' + tn(b) + '") to tuple');
      }
      if (op === "*") {
        const seq = a.t === "tuple" ? a : b;
        const n = a.t === "tuple" ? b : a;
        if (n.t === "int") {
          if (n.v > 9223372036854775807n || n.v < -9223372036854775808n) throw err("cannot fit 'int' into an index-sized integer");
          return seq;
        }
        throw err("can't multiply sequence by non-int of type '" + tn(n) + "'");
      }
      throw unsupported(op, a, b);
    }
    if (a.t === "ellipsis" || b.t === "ellipsis") throw unsupported(op, a, b);
    if (a.t === "complex" || b.t === "complex") {
      if (op === "//") throw unsupported(op, a, b);
      const x = toComplex(a);
      const y = toComplex(b);
      if (op === "+") return CPX(x.re + y.re, x.im + y.im);
      if (op === "-") return CPX(x.re - y.re, x.im - y.im);
      if (op === "*") return cProd(x, y);
      if (op === "/") {
        const q = cQuot(x, y);
        if (q === null) throw err("complex division by zero");
        return q;
      }
      return complexPow(x, y);
    }
    if (a.t === "int" && b.t === "int") {
      if (op === "+") return INT(a.v + b.v);
      if (op === "-") return INT(a.v - b.v);
      if (op === "*") {
        if (bitLength(a.v < 0n ? -a.v : a.v) + bitLength(b.v < 0n ? -b.v : b.v) > 4000000) throw err("int too large to convert to float");
        return INT(a.v * b.v);
      }
      if (op === "/") return FLT(trueDiv(a.v, b.v));
      if (op === "//") return INT(floorDivInt(a.v, b.v));
      // **
      if (b.v < 0n) return floatPow(a, b, intToFloat(a.v), intToFloat(b.v));
      if (a.v === 0n || a.v === 1n) return INT(b.v === 0n ? 1n : a.v);
      if (a.v === -1n) return INT(b.v % 2n === 0n ? 1n : -1n);
      const bits = bitLength(a.v < 0n ? -a.v : a.v);
      if (b.v > 4000000n || bits * Number(b.v) > 4000000) throw err("int too large to convert to float");
      return INT(a.v ** b.v);
    }
    const x = a.t === "int" ? intToFloat(a.v) : a.v;
    const y = b.t === "int" ? intToFloat(b.v) : b.v;
    if (op === "+") return FLT(x + y);
    if (op === "-") return FLT(x - y);
    if (op === "*") return FLT(x * y);
    if (op === "/") {
      if (y === 0) throw err("float division by zero");
      return FLT(x / y);
    }
    if (op === "//") return FLT(floorDivFloat(x, y));
    return floatPow(a, b, x, y);
  }
  function unop(op, a) {
    if (a.t === "int") return INT(op === "-" ? -a.v : a.v);
    if (a.t === "float") return FLT(op === "-" ? -a.v : a.v);
    if (a.t === "complex") return op === "-" ? CPX(-a.re, -a.im) : a;
    throw err("bad operand type for unary " + op + ": '" + tn(a) + "'");
  }
  function complexRepr(c) {
    const f = (x) => floatRepr(x, false);
    if (c.re === 0 && !(1 / c.re < 0)) return f(c.im) + "j";
    const im = f(c.im);
    return "(" + f(c.re) + (im[0] === "-" ? "" : "+") + im + "j)";
  }
  function funcStr(v) {
    if (v.t === "int") return v.v.toString();
    if (v.t === "float") return floatRepr(v.v);
    if (v.t === "complex") return complexRepr(v);
    if (v.t === "tuple") return "()";
    return "Ellipsis";
  }
  function call(f, arg, argv) {
    if (arg && arg.star === "*" && argv.t !== "tuple") throw err(funcStr(f) + " argument after * must be an iterable, not " + tn(argv));
    if (arg && arg.star === "**") throw err(funcStr(f) + " argument after ** must be a mapping, not " + tn(argv));
    throw err("'" + tn(f) + "' object is not callable");
  }

  /** Evaluates the tree without recursion (the sandbox's stack is small). */
  function evaluate(root) {
    const stack = [{ n: root, s: 0 }];
    const vals = [];
    while (stack.length) {
      const fr = stack[stack.length - 1];
      const n = fr.n;
      if (n.k === "num") {
        vals.push(n.isFloat ? FLT(parseFloat(n.text)) : INT(BigInt(n.text)));
        stack.pop();
      } else if (n.k === "ell") {
        vals.push({ t: "ellipsis" });
        stack.pop();
      } else if (n.k === "tuple") {
        vals.push({ t: "tuple" });
        stack.pop();
      } else if (n.k === "un") {
        if (fr.s === 0) {
          fr.s = 1;
          stack.push({ n: n.e, s: 0 });
        } else {
          vals.push(unop(n.op, vals.pop()));
          stack.pop();
        }
      } else if (n.k === "bin") {
        if (fr.s === 0) {
          fr.s = 1;
          stack.push({ n: n.l, s: 0 });
        } else if (fr.s === 1) {
          fr.s = 2;
          stack.push({ n: n.r, s: 0 });
        } else {
          const b = vals.pop();
          const a = vals.pop();
          vals.push(binop(n.op, a, b));
          stack.pop();
        }
      } else {
        // call
        if (fr.s === 0) {
          fr.s = 1;
          stack.push({ n: n.f, s: 0 });
        } else if (fr.s === 1 && n.arg) {
          fr.s = 2;
          stack.push({ n: n.arg.e, s: 0 });
        } else {
          const argv = n.arg ? vals.pop() : null;
          const f = vals.pop();
          call(f, n.arg, argv);
        }
      }
    }
    return vals[0];
  }

  function toFloat(v) {
    if (v.t === "int") return intToFloat(v.v);
    if (v.t === "float") return v.v;
    throw err("float() argument must be a string or a real number, not '" + tn(v) + "'");
  }

  /** Calculate.invoke(data, expression) */
  function calculate(expression) {
    if (typeof expression !== "string") {
      if (expression === null || typeof expression !== "object") throw err("'" + typeName(expression) + "' object is not iterable");
      for (const c of iter(expression)) {
        if (typeof c !== "string") throw err("'in <string>' requires string as left operand, not " + typeName(c));
        if (ALLOWED.indexOf(c) < 0) return "Error: invalid characters in expression";
      }
      return "Error: eval() arg 1 must be a string, bytes or code object";
    }
    for (const ch of expression) if (ALLOWED.indexOf(ch) < 0) return "Error: invalid characters in expression";
    const src = expression.replace(/^ +/, ""); // eval() strips leading spaces and tabs
    try {
      let tree;
      try {
        tree = parse(src);
      } catch (e) {
        if (e instanceof SyntaxErr) {
          if (e.memory) return "Error: ";
          if (e.message === "invalid syntax\u0000line0") return "Error: invalid syntax (<string>, line 0)";
          return "Error: " + e.message + SUFFIX;
        }
        throw e;
      }
      if (tree.d > 2985) return "Error: maximum recursion depth exceeded during compilation";
      return floatRepr(round2Number(toFloat(evaluate(tree))));
    } catch (e) {
      if (e instanceof PyError) return "Error: " + e.message;
      throw e;
    }
  }

  return {
    PyError,
    err,
    typeName,
    floatRepr,
    numStr,
    repr,
    str,
    round2,
    isIn,
    get,
    iter,
    len,
    eq,
    count,
    contains,
    truthy,
    lower,
    cmpStr,
    lt,
    arith,
    abs,
    sorted,
    clone,
    first,
    run,
    calculate,
  };
})();
