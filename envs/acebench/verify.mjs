#!/usr/bin/env node
// Checks the JavaScript ports of ACEBench's agent backends against a golden file written by the
// oracle (python-client/tests/acebench_oracle.py, which runs ACEBench's own classes, executor and
// checker): every call's output text and call text byte-identical, every instance's full state
// (type-tagged) equal after every call, and the same end-to-end verdict and process accuracy.
//
// Usage: node envs/acebench/verify.mjs GOLDEN.json DEFAULTS.json [--json]   (exit 0 only when everything matches)
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import vm from "node:vm";

const HERE = dirname(fileURLToPath(import.meta.url));

/** Loads PyText and the ports into a fresh context, as the sandbox does (one realm per episode). */
export function loadPorts(defaults) {
  const ctx = vm.createContext({});
  const src = [join(HERE, "..", "bfcl", "py-text.js"), ...["ace-runtime.js", "ace-classes.js", "acebench-env.js"].map((f) => join(HERE, f))].map((p) => readFileSync(p, "utf8")).join("\n");
  vm.runInContext(`var ACE_DEFAULTS = ${JSON.stringify(defaults)}; var ACE_TOOL_NAMES = ["search_reminders"];\n${src}\n;globalThis.__ports = {PyText, AceRuntime, AceClasses, AceBenchEnv};`, ctx);
  return ctx.__ports;
}

function stateOf(P, inst) {
  return { d: Object.keys(inst).map((k) => [`s:${k}`, P.tagged(inst[k])]).sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0)) };
}

/**
 * Runs one message of several calls as the bridge runs an action (the env's action start, each
 * call, the action end) and compares it with the original's batch: the texts (the end's, else the
 * call's own), or for a multi-turn message stopped by an exception, the executor's one error text
 * as the failing call's and every later call not run; the process entry and the states after it.
 */
export function runMessage(env, calls) {
  env._action_start({ calls: calls.map((c) => ({ name: c.name, arguments: c.args })) });
  const own = calls.map((c) => {
    try {
      return { text: env._call(c.name, c.args) };
    } catch (e) {
      return { thrown: String(e && e.message) };
    }
  });
  const ended = env._action_end();
  return own.map((o, i) => (o.thrown !== undefined ? o : { text: ended[i] ?? o.text, own: o.text }));
}

function replayMessage(ports, env, m, label, stats, problems) {
  stats.messages++;
  const before = problems.length;
  const got = runMessage(env, m.calls);
  stats.calls += m.calls.length;
  if (Array.isArray(m.outs)) {
    stats.texts += m.calls.length;
    got.forEach((g, i) => {
      if (g.own !== undefined && g.own !== g.text) stats.rerendered++;
      if (g.text === m.outs[i]) stats.textsMatched++;
      else problems.push(`${label} call ${i} ${m.calls[i].name}: want ${JSON.stringify(m.outs[i]).slice(0, 300)} got ${JSON.stringify(g).slice(0, 300)}`);
    });
  } else {
    // the executor stopped at the first exception and returned its text alone
    const k = got.findIndex((g) => g.text === m.outs);
    stats.texts++;
    if (k >= 0 && got.slice(k + 1).every((g) => g.thrown !== undefined && g.thrown.startsWith("not run"))) {
      stats.textsMatched++;
      stats.notRun += m.calls.length - k - 1;
    } else problems.push(`${label}: the original stopped at an exception (${m.outs}), ours: ${JSON.stringify(got).slice(0, 400)}`);
  }
  stats.texts++;
  const text = env.acebench.process[env.acebench.process.length - 1];
  if (text === m.text) stats.textsMatched++;
  else problems.push(`${label}: process entry ${JSON.stringify(text)} != ${JSON.stringify(m.text)}`);
  for (const [cls, want] of Object.entries(m.state)) {
    stats.states++;
    const s = stateOf(ports.PyText, env._inst[cls]);
    if (JSON.stringify(s) === JSON.stringify(want)) stats.statesMatched++;
    else problems.push(`${label}: ${cls} state differs\n   want ${JSON.stringify(want).slice(0, 1200)}\n   got  ${JSON.stringify(s).slice(0, 1200)}`);
  }
  if (problems.length === before) {
    stats.messagesMatched++;
    stats.callsMatched += m.calls.length;
  }
}

/** Replays every variant of every task; returns {stats, problems}. */
export function verify(golden, defaults, answers) {
  const stats = { tasks: 0, tasksMatched: 0, sequences: 0, calls: 0, callsMatched: 0, texts: 0, textsMatched: 0, states: 0, statesMatched: 0, verdicts: 0, verdictsMatched: 0, messages: 0, messagesMatched: 0, notRun: 0, rerendered: 0 };
  const problems = [];
  for (const task of golden.tasks) {
    stats.tasks++;
    const before = problems.length;
    for (const v of task.variants) {
      stats.sequences++;
      const label = `${task.id} [${v.kind}/${v.mode}]`;
      try {
        const ports = loadPorts(defaults);
        const a = answers[task.id];
        const env = new ports.AceBenchEnv({ task: { id: task.id, mode: v.mode, involved_classes: task.involved_classes, initial_config: task.initial_config, ground_truth: a.ground_truth, mile_stone: a.mile_stone } });
        for (const [mi, m] of (v.messages ?? []).entries()) replayMessage(ports, env, m, `${label} message ${mi}`, stats, problems);
        for (const [ci, c] of (v.calls ?? []).entries()) {
          const out = env._call(c.name, c.args);
          stats.calls++;
          if (out === c.out) stats.callsMatched++;
          else problems.push(`${label} call ${ci} ${c.name}(${JSON.stringify(c.args).slice(0, 200)}):\n   want ${JSON.stringify(c.out).slice(0, 500)}\n   got  ${JSON.stringify(out).slice(0, 500)}`);
          stats.texts++;
          const text = env.acebench.process[env.acebench.process.length - 1];
          if (text === c.text) stats.textsMatched++;
          else problems.push(`${label} call ${ci}: call text ${JSON.stringify(text)} != ${JSON.stringify(c.text)}`);
          for (const [cls, want] of Object.entries(c.state)) {
            stats.states++;
            const got = stateOf(ports.PyText, env._inst[cls]);
            if (JSON.stringify(got) === JSON.stringify(want)) stats.statesMatched++;
            else problems.push(`${label} call ${ci}: ${cls} state differs\n   want ${JSON.stringify(want).slice(0, 1200)}\n   got  ${JSON.stringify(got).slice(0, 1200)}`);
          }
        }
        stats.verdicts++;
        const e2e = env.acebench.end_to_end;
        const got = { valid: e2e.valid, error_type: e2e.valid ? null : e2e.error_type, process_accuracy: env.acebench.process_accuracy };
        if (got.valid === v.verdict.valid && got.error_type === v.verdict.error_type && got.process_accuracy === v.verdict.process_accuracy) stats.verdictsMatched++;
        else problems.push(`${label}: verdict ${JSON.stringify(got)} but the official checker says ${JSON.stringify(v.verdict)}`);
      } catch (e) {
        problems.push(`${label}: the port threw ${e && e.stack}`);
      }
    }
    if (problems.length === before) stats.tasksMatched++;
  }
  return { stats, problems };
}

/** The ground truth per task as the bundles carry it (from the scenarios' initial state). */
export function answersFromBundles(scenarioFiles) {
  const out = {};
  for (const f of scenarioFiles) for (const s of JSON.parse(readFileSync(f, "utf8"))) out[s.id] = s.initial_state.task;
  return out;
}
