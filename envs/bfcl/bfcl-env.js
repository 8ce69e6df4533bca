// The served env for one BFCL multi-turn task. The Python-semantics instances (BigInt ints, typed
// dict keys, a directory tree with parent links) live in non-enumerable fields, so they are not
// the bridge's JSON state; what the bridge tracks is `bfcl` (progress and per-turn verdicts) and
// `state` (a JSON view of the model's instances, refreshed after every call).
// Initial state: {task: {id, involved_classes, initial_config, long_context, ground_truth}}.
class BfclEnv {
  constructor(state) {
    const plain = (v) => JSON.parse(JSON.stringify(v));
    // the manifest's default state has no task (`envscaler check` loads the env with it): no classes, no turns
    const t = state.task ?? { id: "", involved_classes: [], initial_config: {}, long_context: false, ground_truth: [] };
    const task = {
      id: t.id,
      involved_classes: plain(t.involved_classes),
      initial_config: plain(t.initial_config),
      long_context: !!t.long_context,
      ground_truth: plain(t.ground_truth),
    };
    Object.defineProperty(this, "_scorer", { value: new BfclScorer(task, BFCL_CLASSES), enumerable: false });
    this.bfcl = { turns_total: task.ground_truth.length, turns_done: 0, calls: 0, turn_verdicts: [], first_failure: null };
    this.state = this._view();
  }

  _view() {
    const out = {};
    for (const [name, inst] of Object.entries(this._scorer.model.instances)) {
      const attrs = {};
      for (const k of Object.keys(inst)) if (!k.startsWith("_")) attrs[k] = k === "root" ? { [PyText.str(inst.root.name)]: { type: "directory", contents: inst.root.__json__() } } : PyText.toJson(inst[k]);
      out[name] = attrs;
    }
    return out;
  }

  /** One model call: the observation text exactly as bfcl-eval renders it. */
  _call(name, args) {
    const out = this._scorer.call(name, PyText.fromJson(args ?? {}));
    this.bfcl.calls += 1;
    this.state = this._view();
    return out;
  }

  /**
   * A call to a name the task's tools do not list (the manifest's unlisted_call_method): bfcl-eval's
   * executor evaluates any call, so a method of a class the task does not involve, a private one or
   * a name nothing has gives its NameError text (and counts as a model call), and its safety list
   * answers as there. A name Python itself resolves there (a builtin such as `print`, a global of
   * the executor's module) or a keyword its eval cannot parse would run Python, which is not
   * ported: an error, and nothing recorded.
   */
  _unlisted_call(call) {
    const name = call.name;
    if (!BfclScorer.BLOCKED.includes(name) && (BFCL_PY_GLOBALS.includes(name) || BFCL_PY_KEYWORDS.includes(name))) {
      throw new Error(`'${name}' is ${BFCL_PY_KEYWORDS.includes(name) ? "a Python keyword" : "a name Python resolves in bfcl-eval's executor (a builtin or a global of its module)"}: what the original would do with it is not ported, so nothing ran`);
    }
    return this._call(name, call.arguments);
  }

  /** The episode calls this when a user turn ends: the turn's ground truth runs and is checked. */
  _bfcl_end_turn() {
    const v = this._scorer.endTurn();
    const verdict = { turn: v.turn, checked: v.checked, valid: v.valid, ...(v.valid ? {} : { error_type: v.error_type, error_message: v.error_message }) };
    this.bfcl.turn_verdicts.push(verdict);
    this.bfcl.turns_done += 1;
    if (!v.valid && this.bfcl.first_failure === null) this.bfcl.first_failure = verdict;
    return verdict;
  }
}

// every public method of every ported class is a tool method of the env (BFCL dispatches on the
// bare method name; no two classes share one)
for (const cls of Object.values(BFCL_CLASSES)) {
  for (const name of Object.keys(cls.SIGNATURES)) {
    BfclEnv.prototype[name] = function (args) {
      return this._call(name, args);
    };
  }
}
