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
    // the message under way (between _action_start and _action_end), or null
    Object.defineProperty(this, "_batch", { value: null, enumerable: false, writable: true });
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

  /**
   * One model message with several calls starts (the manifest's action_methods.start): the
   * original runs a message as one batch, so from here to _action_end the calls share its
   * executor's `func_call_result` (a name no class has repeats the previous call's result), a
   * multi-turn message stops at its first exception, the message is one process entry, and the
   * results are rendered when the message ends. A Python keyword as a name makes the whole message
   * unreadable to the original's decoder: then none of its calls run.
   */
  _action_start({ calls }) {
    const kw = calls.find((c) => AceRuntime.PY_SYNTAX_KEYWORDS.includes(c.name));
    if (kw) throw new Error(`'${kw.name}' is a Python keyword: ACEBench's decoder cannot read a message calling it, so none of its calls ran`);
    // calls the bridge refuses itself (arguments it could not read) never reach the executor
    const readable = calls.filter((c) => c.arguments !== null && typeof c.arguments === "object");
    this._batch = { last: { set: false, value: undefined }, results: [], stopped: false, failed: false };
    this._process.push(AceRuntime.messageText(readable.map((c) => [c.name, PyText.fromJson(c.arguments)])));
    this._refresh();
    return null;
  }

  /** The message's calls are done: its results as the original renders them then (null: the call's own text stands). */
  _action_end() {
    const b = this._batch;
    if (!b) return null;
    this._batch = null;
    // the original keeps the instances for the final state once a message executed (multi-turn: without an exception)
    if (this._task.mode !== "multi_turn" || !b.failed) this._executed.any = true;
    this._refresh();
    return b.results.map((r) => (r.error ? null : PyText.render(r.value)));
  }

  /** One model call: the observation text exactly as ACEBench's executor renders it. */
  _call(name, args) {
    const kwargs = PyText.fromJson(args ?? {});
    const b = this._batch;
    if (b && b.stopped) {
      b.results.push({ error: true });
      throw new Error("not run: an earlier call of this message raised, and ACEBench's multi-turn executor stops a message at its first exception");
    }
    // outside a message (a call on its own) the call is a message: its text, written before it runs (a method may change its arguments)
    if (!b) this._process.push(AceRuntime.callText(name, kwargs));
    const r = AceRuntime.execute(this._inst, this._task, name, kwargs, this._task.mode, b ? b.last : undefined);
    if (b) {
      b.results.push(r);
      if (r.error) b.failed = true;
      if (r.error && this._task.mode === "multi_turn") b.stopped = true;
    } else if (this._task.mode !== "multi_turn" || !r.error) this._executed.any = true;
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
    if (AceRuntime.PY_SYNTAX_KEYWORDS.includes(call.name)) {
      if (this._batch) this._batch.results.push({ error: true });
      throw new Error(`'${call.name}' is a Python keyword: ACEBench's decoder cannot read a call to it (its message would fail to parse), so nothing ran`);
    }
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
