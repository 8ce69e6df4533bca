// How ACEBench runs and scores an agent episode, in JavaScript: its executor
// (model_inference/multi_{step,turn}/multi_*_utils.py::execute_agent_func_call), the final-state
// snapshot of apimodel_inference.py (SAVED_CLASS), and the checker of eval_main.py::agent_eval,
// model_eval/checker.py::agent_checker and eval_main.py::agent_eval_process.
const AceValues = (function () {
  "use strict";
  const P = PyText;
  /**
   * The importer's typed JSON (what the original's __init__ holds) as PyText values: ints as JSON
   * integers, floats as numbers or {"$float": x} when integral, {"$dict": [[k, v], ...]} for a dict
   * with non-string keys, {"$tuple": [...]}, other objects as str-keyed dicts.
   */
  function decode(v) {
    if (v && typeof v === "object" && !Array.isArray(v)) {
      const keys = Object.keys(v);
      if (keys.length === 1 && keys[0] === "$dict") return new P.PyDict(v.$dict.map(([k, x]) => [decode(k), decode(x)]));
      if (keys.length === 1 && keys[0] === "$tuple") return new P.PyTuple(v.$tuple.map(decode));
      if (keys.length === 1 && (keys[0] === "$float" || keys[0] === "$int")) return P.fromJson(v);
      return new P.PyDict(keys.map((k) => [k, decode(v[k])]));
    }
    if (Array.isArray(v)) return v.map(decode);
    return P.fromJson(v);
  }
  /** What json.dump then json.load make of a value (the original scores the saved result file). */
  function jsonRound(v) {
    if (v instanceof P.PyDict) {
      const out = new P.PyDict();
      for (const [k, x] of v.items()) {
        const key = typeof k === "string" ? k : k === true ? "true" : k === false ? "false" : k === null ? "null" : typeof k === "bigint" ? k.toString() : P.floatRepr(k);
        out.set(key, jsonRound(x));
      }
      return out;
    }
    if (Array.isArray(v)) return v.map(jsonRound);
    if (v instanceof P.PyTuple) return v.items.map(jsonRound);
    return v;
  }
  return { decode, jsonRound };
})();

const AceRuntime = (function () {
  "use strict";
  const P = PyText;

  /** apimodel_inference.py's SAVED_CLASS: the attributes the final state keeps per class. */
  const SAVED_CLASS = { BaseApi: ["wifi", "logged_in"], MessageApi: ["inbox"], ReminderApi: ["reminder_list"], FoodPlatform: ["users", "logged_in_users", "orders"], Travel: ["users", "reservations"] };

  /** The class a method is defined on (Python's qualname in TypeError texts). */
  function owner(cls, method) {
    for (let c = cls; c && c.SIGNATURES; c = Object.getPrototypeOf(c)) if (Object.prototype.hasOwnProperty.call(c.SIGNATURES, method)) return c;
    return null;
  }
  function methodsOf(cls) {
    const out = [];
    for (let c = cls; c && c.SIGNATURES; c = Object.getPrototypeOf(c)) out.push(...Object.keys(c.SIGNATURES));
    return out;
  }

  /** One instance per involved class, loaded as the original does: its own config, then BaseApi's. */
  function instances(task, classes) {
    const inst = {};
    for (const c of task.involved_classes) {
      const i = new classes[c]();
      i._load_scenario(AceValues.decode((task.initial_config || {})[c] ?? {}));
      i._load_scenario(AceValues.decode((task.initial_config || {}).BaseApi ?? {}));
      inst[c] = i;
    }
    return inst;
  }

  function missingText(qual, names) {
    const q = names.map((n) => `'${n}'`);
    const list = q.length === 1 ? q[0] : q.length === 2 ? `${q[0]} and ${q[1]}` : `${q.slice(0, -1).join(", ")}, and ${q[q.length - 1]}`;
    return `${qual}() missing ${names.length} required positional argument${names.length > 1 ? "s" : ""}: ${list}`;
  }
  function bind(qual, sig, kwargs) {
    const names = sig.map((p) => p[0]);
    for (const k of kwargs.keys()) if (!names.includes(k)) throw P.TypeError(`${qual}() got an unexpected keyword argument '${k}'`);
    const missing = sig.filter((p) => p.length < 2 && !kwargs.has(p[0])).map((p) => p[0]);
    if (missing.length) throw P.TypeError(missingText(qual, missing));
    return sig.map((p) => (kwargs.has(p[0]) ? kwargs.get(p[0]) : p[1]));
  }

  /**
   * One call as the original's executor runs it: the method runs on every involved instance that
   * has it (in involved_classes order; the last one's result counts, an exception stops the rest),
   * and the result is rendered as a str as is, a dict through json.dumps (else str()), anything
   * else through str(). An exception becomes "Error during execution: ..." (multi-turn's executor
   * lacks the f-prefix, so its text is the literal "{str(e)}"). `last` is the executor's
   * `func_call_result` across one message's calls (a fresh one per call when calls are messages of
   * their own). Returns {out, value, error}: `value` is the result object, rendered again when the
   * message ends (the original renders a message's results after all its calls ran).
   */
  function execute(inst, task, name, kwargs, mode, last = { set: false, value: undefined }) {
    try {
      for (const c of task.involved_classes) {
        const i = inst[c];
        if (!methodsOf(i.constructor).includes(name)) continue;
        const o = owner(i.constructor, name);
        const args = bind(`${o.name}.${name}`, o.SIGNATURES[name], kwargs);
        // the original's loop variable `func_call_result`: it outlives the call (and the exception of a later instance)
        last.value = i[name](...args);
        last.set = true;
      }
      // no instance has it: the original appends whatever its variable still holds from an earlier call of the message
      if (!last.set) throw new P.PyError("UnboundLocalError", "cannot access local variable 'func_call_result' where it is not associated with a value");
    } catch (e) {
      if (!(e instanceof P.PyError)) throw e;
      return { out: mode === "multi_turn" ? "Error during execution: {str(e)}" : `Error during execution: ${e.message}`, error: true };
    }
    return { out: P.render(last.value), value: last.value, error: false };
  }

  /** The call as the original's decoder rewrites it: name(k=repr(v), ...), in a one-call message. */
  function callText(name, kwargs) {
    return messageText([[name, kwargs]]);
  }
  /** A message of several calls as the original's decoder writes them: [a(k=v), b(k=v)]. */
  function messageText(calls) {
    return `[${calls.map(([name, kwargs]) => `${name}(${kwargs.items().map(([k, v]) => `${k}=${P.repr(v)}`).join(", ")})`).join(", ")}]`;
  }

  /** The final-state list the original saves: [{Class: {saved attrs}}] per involved class, or [] when nothing ran. */
  function finalState(inst, task, executed) {
    if (!executed) return [];
    return task.involved_classes.map((c) => {
      const attrs = new P.PyDict();
      for (const k of Object.keys(inst[c])) if ((SAVED_CLASS[c] || []).includes(k)) attrs.set(k, inst[c][k]);
      return new P.PyDict([[c, attrs]]);
    });
  }

  /** model_eval/checker.py::agent_checker. */
  function agentChecker(modelOutput, possible) {
    const result = { valid: true, error: [], error_type: "class attributes wrong" };
    const scenario = possible.keys()[0];
    const want = possible.values()[0];
    const params = modelOutput.values()[0];
    for (const [param, value] of params.items()) {
      if (!want.has(param)) {
        result.valid = false;
        result.error.push(`class(${scenario}) attributes(${param}) missing in possible_answer.`);
        continue;
      }
      const pv = want.get(param);
      if (pv instanceof P.PyDict) {
        for (const [k, v] of pv.items()) {
          if (!P.contains(value, k)) {
            result.valid = false;
            result.error.push(`class(${scenario}) attributes(${param}) wrong`);
          } else if (!P.eq(v, value instanceof P.PyDict ? value.get(k) : value)) {
            result.valid = false;
            result.error.push(`class(${scenario}) attributes(${param}.${P.str(k)}) wrong`);
          }
        }
      } else if (!P.eq(pv, value)) {
        result.valid = false;
        result.error.push(`class(${scenario}) attributes(${param}) wrong`);
      }
    }
    return result;
  }

  /**
   * eval_main.py::agent_eval for one entry: the class count must match; each ground-truth class is
   * checked against the first model class dict with the same key set. As in the original, a class
   * with no such dict (the ground truth names ReminderApi "ReminderAPI") reuses the previous verdict.
   */
  function endToEnd(model, groundTruth) {
    const gt = Array.isArray(groundTruth) ? groundTruth : [groundTruth];
    if (gt.length !== model.length) return { valid: false, error_type: "wrong number of class", error: [] };
    let checker = { valid: true };
    const out = { valid: true, error_type: "", error: [] };
    for (const g of gt) {
      const keys = g.keys().map(String).sort().join("\u0000");
      const matched = model.find((m) => m.keys().map(String).sort().join("\u0000") === keys);
      if (matched) checker = agentChecker(matched, g);
      if (!checker.valid) {
        out.valid = false;
        out.error.push(checker.error);
        out.error_type = checker.error_type;
      }
    }
    return out;
  }

  /** eval_main.py::agent_eval_process: the share of milestones found in order (best alternative), rounded to 3 places. */
  function processAccuracy(process, milestones, valid) {
    if (valid) return 1;
    const score = (stones) => {
      if (!stones.length) return 1;
      let found = 0;
      let i = 0;
      for (const s of stones) {
        while (i < process.length) {
          const hit = P.strip(process[i]) === P.strip(s);
          i++;
          if (hit) {
            found++;
            break;
          }
        }
      }
      return Number(P.round(found / stones.length, 3n));
    };
    if (milestones.length && Array.isArray(milestones[0])) return Math.max(-1, ...milestones.map(score));
    return score(milestones);
  }

  /** Python's keywords that are no expression (`True`, `None`, `False` parse as constants, so a call to them reaches the executor). */
  const PY_SYNTAX_KEYWORDS = ["and", "as", "assert", "async", "await", "break", "class", "continue", "def", "del", "elif", "else", "except", "finally", "for", "from", "global", "if", "import", "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return", "try", "while", "with", "yield"];

  return { SAVED_CLASS, PY_SYNTAX_KEYWORDS, instances, methodsOf, execute, callText, messageText, finalState, endToEnd, agentChecker, processAccuracy, jsonRound: AceValues.jsonRound };
})();
