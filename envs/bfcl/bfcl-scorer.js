// The official multi-turn checker (bfcl_eval/eval_checker/multi_turn_eval/multi_turn_checker.py),
// as an incremental scorer: the model's calls run on one set of instances, the ground truth's on
// another (both from the task's initial_config); after every turn with non-empty ground truth,
// (1) a turn where the model made no call fails (empty_turn_model_response), (2) every public
// attribute of every involved instance must be equal under Python == (instance_state_mismatch),
// (3) the turn's ground-truth outputs must be a sub-multiset of the model's outputs accumulated
// over all turns so far (execution_response_mismatch). Empty ground-truth turns are not checked.
// The first failure decides; there is no partial credit.
class BfclScorer {
  /**
   * task: {id, involved_classes, initial_config (JSON as fromJson reads it), long_context,
   * ground_truth: [[{name, args}]]}; classes: the port classes by name.
   */
  constructor(task, classes) {
    this.task = task;
    this.classes = classes;
    this.model = BfclScorer.instances(task, classes);
    this.gt = BfclScorer.instances(task, classes);
    this.turn = 0;
    this.turnCalls = 0;
    this.allModelOutputs = [];
    this.failure = null;
    this.turns = [];
  }

  static instances(task, classes) {
    const instances = {};
    const owner = {};
    for (const c of task.involved_classes) {
      const cls = classes[c];
      const inst = new cls();
      if (c !== "MathAPI") inst._load_scenario(PyText.fromJson((task.initial_config || {})[c] ?? {}), !!task.long_context);
      instances[c] = inst;
      for (const m of Object.keys(cls.SIGNATURES)) owner[m] = c;
    }
    return { instances, owner };
  }

  /** A ground-truth call's arguments: positional ones (`pos`) bound by the method's Python signature. */
  static kwargs(set, c) {
    const kw = PyText.fromJson(c.args || {});
    if (c.pos && c.pos.length) {
      const cls = set.instances[set.owner[c.name]];
      const sig = cls ? cls.constructor.SIGNATURES[c.name] : [];
      c.pos.forEach((v, i) => kw.set(sig[i] ? sig[i][0] : `_${i}`, PyText.fromJson(v)));
    }
    return kw;
  }

  /** Names bfcl-eval's executor will not evaluate (its own safety list). */
  static BLOCKED = ["kill", "exit", "quit", "remove", "unlink", "popen", "Popen", "run"];

  /** Runs a call the way bfcl-eval's executor does and returns the observation text. */
  static run(set, name, kwargs) {
    // the original refuses these names before it evaluates the call, whether a class has them or not
    if (BfclScorer.BLOCKED.includes(name)) return `Error during execution: Function call ${name} is not allowed.`;
    const inst = Object.prototype.hasOwnProperty.call(set.owner, name) ? set.instances[set.owner[name]] : undefined;
    if (!inst) return `Error during execution: name '${name}' is not defined`;
    return BfclRuntime.execute(inst, name, kwargs);
  }

  /** One model call in the current turn. */
  call(name, kwargs) {
    const out = BfclScorer.run(this.model, name, kwargs);
    this.turnCalls++;
    this.allModelOutputs.push(out);
    return out;
  }

  /** Ends the current user turn: runs its ground truth and checks it. Returns this turn's verdict. */
  endTurn() {
    const i = this.turn;
    const gtCalls = (this.task.ground_truth[i] || []);
    const gtOutputs = gtCalls.map((c) => BfclScorer.run(this.gt, c.name, BfclScorer.kwargs(this.gt, c)));
    let verdict = { turn: i, checked: gtCalls.length > 0, valid: true };
    if (gtCalls.length > 0) {
      if (this.turnCalls === 0) verdict = { turn: i, checked: true, valid: false, error_type: "multi_turn:empty_turn_model_response", error_message: `Model response list is empty for turn ${i}` };
      else {
        const diff = BfclScorer.stateDifference(this.model.instances, this.gt.instances);
        if (diff) verdict = { turn: i, checked: true, valid: false, error_type: "multi_turn:instance_state_mismatch", error_message: `Model instance for ${diff.cls} does not match the state with ground truth instance.`, differences: diff.attrs };
        else {
          const missing = BfclScorer.missingOutputs(gtOutputs, this.allModelOutputs);
          if (missing.length) verdict = { turn: i, checked: true, valid: false, error_type: "multi_turn:execution_response_mismatch", error_message: `Model response execution results so far does not contain all the ground truth response execution results for turn ${i}.`, missing_items: missing };
        }
      }
    }
    if (!verdict.valid && !this.failure) this.failure = verdict;
    this.turns.push(verdict);
    this.turn++;
    this.turnCalls = 0;
    return verdict;
  }

  static stateDifference(model, gt) {
    for (const [cls, g] of Object.entries(gt)) {
      const m = model[cls];
      const attrs = Object.keys(g).filter((a) => !a.startsWith("_") && !PyText.eq(m[a], g[a]));
      if (attrs.length) return { cls, attrs };
    }
    return null;
  }

  static missingOutputs(want, have) {
    const pool = [...have];
    const missing = [];
    for (const w of want) {
      const i = pool.indexOf(w);
      if (i < 0) missing.push(w);
      else pool.splice(i, 1);
    }
    return missing;
  }

  /** The verdict so far: valid only when every checked turn passed and every turn was played. */
  result() {
    // the official runner rejects an entry with missing turns before executing anything
    if (this.turn !== this.task.ground_truth.length) return { valid: false, error_type: "multi_turn:force_terminated", error_message: `Model was force-terminated during inference phase. The length of the model result turns (${this.turn}) does not match the length of the ground truth turns (${this.task.ground_truth.length}).` };
    if (this.failure) return { valid: false, error_type: this.failure.error_type, error_message: this.failure.error_message, turn: this.failure.turn };
    return { valid: true };
  }
}
