// BFCL's MathAPI (func_source_code/math_api.py), ported, with the two arbitrary-precision results
// it returns: logarithm's mpmath mpf (computed at mp.dps = precision, printed by mpf.__repr__) and
// square_root's decimal.Decimal (at getcontext().prec = precision, printed by Decimal.__repr__).
// The original sets both precisions process-wide; here they live in the episode's realm.

// ----- mpmath's binary floats: {man (odd BigInt), exp, neg} or the specials

const MP_LOG2_10 = Math.log(10) / Math.log(2); // Python's math.log(10, 2)
const bitLen = (n) => (n === 0n ? 0 : n.toString(2).length);

function mpDpsToPrec(n) {
  return PyText.int(Math.max(1, Number(PyText.round((Number(PyText.int(n)) + 1) * 3.3219280948873626))));
}
function mpPrecToDps(n) {
  return Math.max(1, Number(PyText.round(Number(n) / 3.3219280948873626)) - 1);
}
function mpReprDps(prec) {
  const dps = mpPrecToDps(prec);
  return dps === 15 ? 17 : dps + 3;
}

/** Normalises man * 2^exp (man may be even or wider than prec) to prec bits, round-half-even. */
function mpNormalize(neg, man, exp, prec, sticky = false) {
  if (man === 0n) return { zero: true };
  const bc = bitLen(man);
  if (bc > prec) {
    const shift = BigInt(bc - prec);
    const kept = man >> shift;
    const rem = man - (kept << shift);
    const half = 1n << (shift - 1n);
    let m = kept;
    if (rem > half || (rem === half && (sticky || (kept & 1n) === 1n))) m += 1n;
    man = m;
    exp += Number(shift);
  }
  while (man !== 0n && (man & 1n) === 0n) {
    man >>= 1n;
    exp += 1;
  }
  return { neg, man, exp };
}

/** An exact mpf from a Python int or float (mpmath's convert: from_int / from_float, exact). */
function mpFromNumber(v) {
  if (typeof v === "boolean") v = v ? 1n : 0n;
  if (typeof v === "bigint") return v === 0n ? { zero: true } : mpNormalize(v < 0n, v < 0n ? -v : v, 0, Infinity);
  if (typeof v === "number") {
    if (Number.isNaN(v)) return { nan: true };
    if (!Number.isFinite(v)) return { inf: true, neg: v < 0 };
    if (v === 0) return { zero: true };
    let e = 0;
    let x = Math.abs(v);
    while (!Number.isInteger(x)) {
      x *= 2;
      e -= 1;
    }
    return mpNormalize(v < 0, BigInt(x), e, Infinity);
  }
  throw PyText.TypeError(`cannot create mpf from ${PyText.repr(v)}`);
}

/** atanh(p/q) * 2^W for 0 <= p/q < 1, as a fixed-point BigInt (truncating). */
function mpAtanhFixed(p, q, W) {
  const ONE = 1n << BigInt(W);
  const z = (p << BigInt(W)) / q;
  const z2 = (z * z) >> BigInt(W);
  let term = z;
  let sum = 0n;
  for (let k = 1n; term !== 0n; k += 2n) {
    sum += term / k;
    term = (term * z2) >> BigInt(W);
  }
  void ONE;
  return sum;
}

/** ln(x) rounded to prec bits (round-half-even), for a positive finite mpf; Ziv's loop on the guard bits. */
function mpLog(x, prec) {
  if (x.man === 1n && x.exp === 0) return { zero: true };
  for (let guard = 64; ; guard *= 2) {
    const W = prec + guard + bitLen(BigInt(Math.abs(x.exp) + bitLen(x.man)));
    // x = y * 2^k with y in [0.75, 1.5)
    const bc = bitLen(x.man);
    let k = x.exp + bc - 1;
    let Y = W >= bc - 1 ? x.man << BigInt(W - (bc - 1)) : x.man >> BigInt(bc - 1 - W);
    const ONE = 1n << BigInt(W);
    if (Y * 2n > ONE * 3n) {
      Y >>= 1n;
      k += 1;
    }
    const lnY = Y >= ONE ? 2n * mpAtanhFixed(Y - ONE, Y + ONE, W) : -2n * mpAtanhFixed(ONE - Y, Y + ONE, W);
    const ln2 = 2n * mpAtanhFixed(1n, 3n, W);
    const L = lnY + BigInt(k) * ln2;
    const neg = L < 0n;
    const A = neg ? -L : L;
    // the approximation is within 2^8 units of the truth: round only when no boundary is that close
    const bc2 = bitLen(A);
    if (bc2 <= prec + 16) continue;
    const shift = BigInt(bc2 - prec);
    const rem = A & ((1n << shift) - 1n);
    const half = 1n << (shift - 1n);
    const slack = 1n << 10n;
    if ((rem - half < 0n ? half - rem : rem - half) <= slack || rem <= slack || (1n << shift) - rem <= slack) continue;
    return mpNormalize(neg, A, -W, prec);
  }
}

/** a / b rounded to prec bits (mpf_div). */
function mpDiv(a, b, prec) {
  if (a.nan || b.nan) return { nan: true };
  if (b.zero) throw new PyText.PyError("ZeroDivisionError", "");
  if (a.zero) return { zero: true };
  if (a.inf) return b.inf ? { nan: true } : { inf: true, neg: a.neg !== b.neg };
  if (b.inf) return { zero: true };
  const extra = prec + bitLen(b.man) + 4;
  const num = a.man << BigInt(extra);
  const q = num / b.man;
  const sticky = num % b.man !== 0n;
  // fold the sticky bit in below the rounding position
  return mpNormalize(a.neg !== b.neg, (q << 1n) | (sticky ? 1n : 0n), a.exp - b.exp - extra - 1, prec, false);
}

/** mpmath's to_str(s, dps) (libmpf.to_str with its defaults). */
function mpToStr(s, dps) {
  if (s.zero) return "0.0";
  if (s.nan) return "nan";
  if (s.inf) return s.neg ? "-inf" : "+inf";
  const sign = s.neg ? "-" : "";
  const bc = bitLen(s.man);
  const bitprec = Math.trunc((dps + 3) * MP_LOG2_10) + 10;
  const fixprec = Math.max(bitprec - s.exp - bc, 0);
  const fixdps = Math.trunc(fixprec / MP_LOG2_10 + 0.5);
  const off = s.exp + fixprec;
  const sf = off >= 0 ? s.man << BigInt(off) : s.man >> BigInt(-off);
  const sd = (sf * 10n ** BigInt(fixdps)) >> BigInt(fixprec);
  let digits = sd.toString();
  let exponent = digits.length - fixdps - 1;
  const minFixed = Math.min(-Math.floor(dps / 3), -5);
  const maxFixed = dps;
  if (digits.length > dps && "56789".includes(digits[dps])) {
    digits = digits.slice(0, dps);
    let i = dps - 1;
    while (i >= 0 && digits[i] === "9") i--;
    if (i >= 0) digits = digits.slice(0, i) + String(Number(digits[i]) + 1) + "0".repeat(dps - i - 1);
    else {
      digits = "1" + "0".repeat(dps - 1);
      exponent += 1;
    }
  } else digits = digits.slice(0, dps);
  let split;
  if (minFixed < exponent && exponent < maxFixed) {
    if (exponent < 0) {
      digits = "0".repeat(-exponent) + digits;
      split = 1;
    } else {
      split = exponent + 1;
      if (split > dps) digits += "0".repeat(split - dps);
    }
    exponent = 0;
  } else split = 1;
  digits = digits.slice(0, split) + "." + digits.slice(split);
  digits = digits.replace(/0+$/, "");
  if (digits.endsWith(".")) digits += "0";
  if (exponent === 0) return sign + digits;
  return exponent > 0 ? `${sign}${digits}e+${exponent}` : `${sign}${digits}e${exponent}`;
}

// ----- decimal.Decimal: sign, coefficient digits, exponent

function decFromNumber(v) {
  if (typeof v === "boolean") v = v ? 1n : 0n;
  if (typeof v === "bigint") return { neg: v < 0n, int: (v < 0n ? -v : v).toString(), exp: 0 };
  if (typeof v === "number") {
    if (Number.isNaN(v)) return { nan: true };
    if (!Number.isFinite(v)) return { inf: true, neg: v < 0 };
    let k = 0;
    let x = Math.abs(v);
    while (!Number.isInteger(x)) {
      x *= 2;
      k += 1;
    }
    return { neg: v < 0 || Object.is(v, -0), int: (BigInt(x) * 5n ** BigInt(k)).toString(), exp: -k };
  }
  throw PyText.TypeError(`conversion from ${PyText.typeName(v)} to Decimal is not supported`);
}

/** Rounds a coefficient to prec digits, half-even (Decimal._fix for normal numbers). */
function decFix(d, prec) {
  if (d.int.length <= prec) return d;
  const drop = d.int.length - prec;
  let kept = BigInt(d.int.slice(0, prec));
  const rest = d.int.slice(prec);
  const half = "5" + "0".repeat(drop - 1);
  const cmp = rest === half ? 0 : rest > half ? 1 : -1;
  if (cmp > 0 || (cmp === 0 && kept % 2n === 1n)) kept += 1n;
  let int = kept.toString();
  let exp = d.exp + drop;
  if (int.length > prec) {
    int = int.slice(0, -1);
    exp += 1;
  }
  return { neg: d.neg, int, exp };
}

/** Decimal.sqrt (the _pydecimal algorithm; the C implementation gives the same results). */
function decSqrt(d, precision) {
  if (d.nan) return d;
  if (d.inf) return d.neg ? null : d;
  if (/^0+$/.test(d.int)) return { neg: d.neg, int: "0", exp: Math.floor(d.exp / 2) };
  if (d.neg) return null;
  const prec = precision + 1;
  let e = d.exp >> 1;
  let c;
  let l;
  if (d.exp & 1) {
    c = BigInt(d.int) * 10n;
    l = (d.int.length >> 1) + 1;
  } else {
    c = BigInt(d.int);
    l = (d.int.length + 1) >> 1;
  }
  const shift = prec - l;
  let exact;
  if (shift >= 0) {
    c *= 100n ** BigInt(shift);
    exact = true;
  } else {
    const p = 100n ** BigInt(-shift);
    exact = c % p === 0n;
    c /= p;
  }
  e -= shift;
  let n = 10n ** BigInt(prec);
  for (;;) {
    const q = c / n;
    if (n <= q) break;
    n = (n + q) >> 1n;
  }
  exact = exact && n * n === c;
  if (exact) {
    if (shift >= 0) n /= 10n ** BigInt(shift);
    else n *= 10n ** BigInt(-shift);
    e += shift;
  } else if (n % 5n === 0n) n += 1n;
  return decFix({ neg: false, int: n.toString(), exp: e }, precision);
}

/** str(Decimal) (to-sci-string). */
function decToStr(d) {
  if (d.nan) return "NaN";
  if (d.inf) return d.neg ? "-Infinity" : "Infinity";
  const sign = d.neg ? "-" : "";
  const left = d.exp + d.int.length;
  const dot = d.exp <= 0 && left > -6 ? left : 1;
  let intpart;
  let frac;
  if (dot <= 0) {
    intpart = "0";
    frac = "." + "0".repeat(-dot) + d.int;
  } else if (dot >= d.int.length) {
    intpart = d.int + "0".repeat(dot - d.int.length);
    frac = "";
  } else {
    intpart = d.int.slice(0, dot);
    frac = "." + d.int.slice(dot);
  }
  const exp = left === dot ? "" : `E${left - dot >= 0 ? "+" : "-"}${Math.abs(left - dot)}`;
  return sign + intpart + frac + exp;
}

// ----- the class

class MathAPI {
  constructor() {
    // mpmath.mp.dps and decimal.getcontext().prec, per episode (the original's are process-wide)
    this._mp_prec = 53;
    this._dec_prec = 28;
  }

  _d(...pairs) {
    return new PyText.PyDict(pairs);
  }

  _isNumber(v) {
    return typeof v === "bigint" || typeof v === "number" || typeof v === "boolean";
  }

  logarithm(value, base, precision) {
    try {
      const prec = Number(mpDpsToPrec(precision));
      this._mp_prec = prec;
      const lv = this._mpLogOf(value, prec);
      const lb = this._mpLogOf(base, prec);
      const r = mpDiv(lv, lb, prec);
      const text = mpToStr(r, mpReprDps(prec));
      return this._d(["result", new PyText.PyOpaque(`mpf('${text}')`, mpToStr(r, mpPrecToDps(prec)))]);
    } catch (e) {
      if (e instanceof PyText.PyError) return this._d(["error", e.message]);
      throw e;
    }
  }

  _mpLogOf(v, prec) {
    const x = mpFromNumber(v);
    if (x.nan) return x;
    if (x.zero) return { inf: true, neg: true };
    if (x.inf) {
      if (x.neg) throw new Error("mpmath.log(-inf) gives an mpc; not ported");
      return x;
    }
    if (x.neg) throw new Error("mpmath.log of a negative number gives an mpc; not ported");
    return mpLog(x, prec);
  }

  mean(numbers) {
    if (!PyText.truthy(numbers)) return this._d(["error", "Cannot calculate mean of an empty list"]);
    try {
      return this._d(["result", PyText.div(PyText.sum(numbers), PyText.len(numbers))]);
    } catch (e) {
      if (e instanceof PyText.PyError && e.pyType === "TypeError") return this._d(["error", "All elements in the list must be numbers"]);
      throw e;
    }
  }

  standard_deviation(numbers) {
    if (!PyText.truthy(numbers)) return this._d(["error", "Cannot calculate standard deviation of an empty list"]);
    try {
      const n = PyText.len(numbers);
      const mean = PyText.div(PyText.sum(numbers), n);
      const variance = PyText.div(PyText.sum(PyText.iter(numbers).map((x) => PyText.pow(PyText.sub(x, mean), 2n))), n);
      if (PyText.lt(variance, 0n)) throw PyText.ValueError("math domain error");
      return this._d(["result", Math.sqrt(PyText.toF(variance))]);
    } catch (e) {
      if (e instanceof PyText.PyError && e.pyType === "TypeError") return this._d(["error", "All elements in the list must be numbers"]);
      throw e;
    }
  }

  si_unit_conversion(value, unit_in, unit_out) {
    const to = new PyText.PyDict([["km", 1000n], ["m", 1n], ["cm", 0.01], ["mm", 0.001], ["um", 1e-6], ["nm", 1e-9]]);
    const from = new PyText.PyDict(to.items().map(([u, f]) => [u, PyText.div(1n, f)]));
    if (!this._isNumber(value)) return this._d(["error", "Value must be a number"]);
    if (!PyText.contains(to, unit_in) || !PyText.contains(from, unit_out)) return this._d(["error", `Conversion from '${PyText.str(unit_in)}' to '${PyText.str(unit_out)}' is not supported`]);
    return this._d(["result", PyText.mul(PyText.mul(value, to.item(unit_in)), from.item(unit_out))]);
  }

  imperial_si_conversion(value, unit_in, unit_out) {
    const conv = new PyText.PyDict([
      ["cm_to_in", 0.393701], ["in_to_cm", 2.54], ["m_to_ft", 3.28084], ["ft_to_m", 0.3048], ["m_to_yd", 1.09361], ["yd_to_m", 0.9144],
      ["km_to_miles", 0.621371], ["miles_to_km", 1.60934], ["kg_to_lb", 2.20462], ["lb_to_kg", 0.453592], ["celsius_to_fahrenheit", 1.8], ["fahrenheit_to_celsius", 5 / 9],
    ]);
    if (!this._isNumber(value)) return this._d(["error", "Value must be a number"]);
    if (PyText.eq(unit_in, unit_out)) return this._d(["result", value]);
    const key = `${PyText.str(unit_in)}_to_${PyText.str(unit_out)}`;
    if (!conv.has(key)) return this._d(["error", `Conversion from '${PyText.str(unit_in)}' to '${PyText.str(unit_out)}' is not supported`]);
    let r;
    if (unit_in === "celsius" && unit_out === "fahrenheit") r = PyText.add(PyText.mul(value, conv.item(key)), 32n);
    else if (unit_in === "fahrenheit" && unit_out === "celsius") r = PyText.mul(PyText.sub(value, 32n), conv.item(key));
    else r = PyText.mul(value, conv.item(key));
    return this._d(["result", r]);
  }

  _arith(f, msg) {
    try {
      return this._d(["result", f()]);
    } catch (e) {
      if (e instanceof MathAPI.Early) return e.value;
      if (e instanceof PyText.PyError && e.pyType === "TypeError") return this._d(["error", msg]);
      throw e;
    }
  }

  add(a, b) {
    return this._arith(() => PyText.add(a, b), "Both inputs must be numbers");
  }

  subtract(a, b) {
    return this._arith(() => PyText.sub(a, b), "Both inputs must be numbers");
  }

  multiply(a, b) {
    if (!this._isNumber(a) || !this._isNumber(b)) return this._d(["error", "Both inputs must be numbers"]);
    return this._arith(() => PyText.mul(a, b), "Both inputs must be numbers");
  }

  divide(a, b) {
    return this._arith(() => {
      if (PyText.eq(b, 0n)) throw new MathAPI.Early(this._d(["error", "Cannot divide by zero"]));
      return PyText.div(a, b);
    }, "Both inputs must be numbers");
  }

  power(base, exponent) {
    return this._arith(() => PyText.pow(base, exponent), "Both inputs must be numbers");
  }

  square_root(number, precision) {
    try {
      if (PyText.lt(number, 0n)) return this._d(["error", "Cannot calculate square root of a negative number"]);
      if (typeof precision !== "bigint" && typeof precision !== "boolean") throw PyText.TypeError("an integer is required");
      const p = Number(PyText.toI(precision));
      if (p < 1) throw PyText.ValueError("valid range for prec is [1, MAX_PREC]");
      this._dec_prec = p;
      const r = decSqrt(decFromNumber(number), p);
      if (r === null) throw new PyText.PyError("InvalidOperation", "[<class 'decimal.InvalidOperation'>]");
      const s = decToStr(r);
      return this._d(["result", new PyText.PyOpaque(`Decimal('${s}')`, s)]);
    } catch (e) {
      if (e instanceof PyText.PyError && (e.pyType === "TypeError" || e.pyType === "InvalidOperation")) return this._d(["error", "Input must be a number or computation resulted in an invalid operation"]);
      throw e;
    }
  }

  absolute_value(number) {
    return this._arith(() => PyText.abs(number), "Input must be a number");
  }

  round_number(number, decimal_places) {
    return this._arith(() => PyText.round(number, decimal_places), "First input must be a number, second input must be an integer");
  }

  percentage(part, whole) {
    return this._arith(() => {
      if (PyText.eq(whole, 0n)) throw new MathAPI.Early(this._d(["error", "Whole value cannot be zero"]));
      return PyText.mul(PyText.div(part, whole), 100n);
    }, "Both inputs must be numbers");
  }

  _minmax(numbers, emptyMsg, better) {
    if (!PyText.truthy(numbers)) return this._d(["error", emptyMsg]);
    return this._arith(() => {
      const items = PyText.iter(numbers);
      let best = items[0];
      for (const x of items.slice(1)) if (better(x, best)) best = x;
      return best;
    }, "All elements in the list must be numbers");
  }

  min_value(numbers) {
    return this._minmax(numbers, "Cannot find minimum of an empty list", (x, best) => PyText.lt(x, best));
  }

  max_value(numbers) {
    return this._minmax(numbers, "Cannot find maximum of an empty list", (x, best) => PyText.gt(x, best));
  }

  sum_values(numbers) {
    if (!PyText.truthy(numbers)) return this._d(["error", "Cannot calculate sum of an empty list"]);
    return this._arith(() => PyText.sum(numbers), "All elements in the list must be numbers");
  }
}
/** An early return from inside a guarded block (the original returns from within its try). */
MathAPI.Early = class {
  constructor(value) {
    this.value = value;
  }
};
MathAPI.SIGNATURES = {
  logarithm: [["value"], ["base"], ["precision"]],
  mean: [["numbers"]],
  standard_deviation: [["numbers"]],
  si_unit_conversion: [["value"], ["unit_in"], ["unit_out"]],
  imperial_si_conversion: [["value"], ["unit_in"], ["unit_out"]],
  add: [["a"], ["b"]],
  subtract: [["a"], ["b"]],
  multiply: [["a"], ["b"]],
  divide: [["a"], ["b"]],
  power: [["base"], ["exponent"]],
  square_root: [["number"], ["precision"]],
  absolute_value: [["number"]],
  round_number: [["number"], ["decimal_places", 0n]],
  percentage: [["part"], ["whole"]],
  min_value: [["numbers"]],
  max_value: [["numbers"]],
  sum_values: [["numbers"]],
};
