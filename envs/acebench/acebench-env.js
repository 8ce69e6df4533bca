// The served env for one ACEBench agent task (multi-step or multi-turn). The Python-semantics
// instances live in a non-enumerable field; what the bridge tracks is `state` (a JSON view of the
// attributes ACEBench saves, refreshed after every call) and `acebench` (the official verdict so
// far: end-to-end state match against the ground truth, and process accuracy over the milestones).
// Initial state: {task: {id, mode, involved_classes, initial_config, ground_truth, mile_stone}}.
class AceBenchEnv {
  constructor(state) {
    const plain = (v) => JSON.parse(JSON.stringify(v ?? null));
    // the manifest's default state has no task (`envscaler check` loads the env with it)
    const t = state.task ?? { id: "", mode: "multi_step", involved_classes: [], initial_config: {}, ground_truth: [], mile_stone: [] };
    const task = { id: t.id, mode: t.mode, involved_classes: plain(t.involved_classes), initial_config: plain(t.initial_config) };
    Object.defineProperty(this, "_task", { value: task, enumerable: false });
    Object.defineProperty(this, "_gt", { value: (plain(t.ground_truth) || []).map(AceValues.decode), enumerable: false });
    Object.defineProperty(this, "_milestones", { value: plain(t.mile_stone) || [], enumerable: false });
    Object.defineProperty(this, "_inst", { value: AceRuntime.instances(task, AceClasses), enumerable: false });
    Object.defineProperty(this, "_process", { value: [], enumerable: false });
    Object.defineProperty(this, "_executed", { value: { any: false }, enumerable: false });
    this.acebench = { calls: 0, process: [], end_to_end: null, process_accuracy: 0 };
    this._refresh();
  }

  _refresh() {
    const view = {};
    for (const c of this._task.involved_classes) {
      const attrs = {};
      for (const k of AceRuntime.SAVED_CLASS[c] || []) if (k in this._inst[c]) attrs[k] = PyText.toJson(this._inst[c][k]);
      view[c] = attrs;
    }
    this.state = view;
    const model = AceRuntime.finalState(this._inst, this._task, this._executed.any).map(AceRuntime.jsonRound);
    const v = AceRuntime.endToEnd(model, this._gt);
    this.acebench.end_to_end = { valid: v.valid, ...(v.valid ? {} : { error_type: v.error_type, error: JSON.parse(JSON.stringify(v.error)) }) };
    this.acebench.process = [...this._process];
    this.acebench.process_accuracy = AceRuntime.processAccuracy(this._process, this._milestones, v.valid);
  }

  /** One model call: the observation text exactly as ACEBench's executor renders it. */
  _call(name, args) {
    const kwargs = PyText.fromJson(args ?? {});
    // the call's text is the agent's message, written before the call runs (a method may change its arguments)
    this._process.push(AceRuntime.callText(name, kwargs));
    const r = AceRuntime.execute(this._inst, this._task, name, kwargs, this._task.mode);
    // the original keeps the instances for the final state once a batch executed (multi-turn: without an exception)
    if (this._task.mode !== "multi_turn" || !r.error) this._executed.any = true;
    this.acebench.calls += 1;
    this._refresh();
    return r.out;
  }

  /**
   * A call to a name the task's docs do not list (the manifest's unlisted_call_method): the
   * original's executor looks any name up among the public methods of the involved instances, so
   * this runs exactly like a listed one (a public method runs; a private, unknown or non-method name
   * gives the executor's UnboundLocalError text). A name that is a Python keyword the original's
   * decoder cannot parse (`class(...)`) never reaches its executor: an error, and nothing recorded.
   */
  _unlisted_call(call) {
    if (AceRuntime.PY_SYNTAX_KEYWORDS.includes(call.name)) throw new Error(`'${call.name}' is a Python keyword: ACEBench's decoder cannot read a call to it (its message would fail to parse), so nothing ran`);
    return this._call(call.name, call.arguments);
  }
}

// every public method of every ported class is a tool method (ACEBench dispatches on the bare name)
// (and so is every name the task's tool docs list: ACEBench's docs name a `search_reminders` no
// class has, which its executor answers with an error)
for (const name of [...Object.values(AceClasses).flatMap((cls) => AceRuntime.methodsOf(cls)), ...ACE_TOOL_NAMES]) {
  if (Object.prototype.hasOwnProperty.call(AceBenchEnv.prototype, name)) continue;
  AceBenchEnv.prototype[name] = function (args) {
    return this._call(name, args);
  };
}
