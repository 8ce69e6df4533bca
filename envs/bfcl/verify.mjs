#!/usr/bin/env node
// Checks the JavaScript ports of BFCL's backend classes against a golden file written by the
// oracle (python-client/tests/bfcl_oracle.py, which runs the original classes from bfcl-eval):
// every call's output text must be byte-identical and, after every turn, every involved instance's
// public state (type-tagged: int vs float, dict order and key types) must hash the same.
//
// Usage: node envs/bfcl/verify.mjs GOLDEN.json [--json]   (exit 0 only when everything matches)
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import vm from "node:vm";

const HERE = dirname(fileURLToPath(import.meta.url));
export const CLASS_FILES = {
  GorillaFileSystem: "gorilla-file-system.js",
  MathAPI: "math-api.js",
  MessageAPI: "message-api.js",
  TwitterAPI: "twitter-api.js",
  TicketAPI: "ticket-api.js",
  TradingBot: "trading-bot.js",
  TravelAPI: "travel-api.js",
  VehicleControlAPI: "vehicle-control-api.js",
};

/** Loads the ports into a fresh context, as the sandbox would (one realm per episode). */
export function loadPorts(longContextData, travelBaseCosts) {
  const ctx = vm.createContext({});
  const files = ["py-text.js", "bfcl-runtime.js", "long-context.js", ...Object.values(CLASS_FILES), "bfcl-scorer.js"];
  let src = "";
  for (const f of files) {
    try {
      src += readFileSync(join(HERE, f), "utf8") + "\n";
    } catch {
      /* a class not ported yet: its tasks are reported as skipped */
    }
  }
  if (travelBaseCosts) vm.runInContext(`var BFCL_TRAVEL_BASE_COSTS = ${JSON.stringify(travelBaseCosts)};`, ctx);
  if (longContextData) vm.runInContext(`var BFCL_LONG_CONTEXT = ${JSON.stringify(longContextData)};`, ctx);
  vm.runInContext(src + "\n;globalThis.__ports = {PyText, BfclRuntime, BfclScorer, classes: {" + Object.keys(CLASS_FILES).map((c) => `${c}: typeof ${c} === 'undefined' ? undefined : ${c}`).join(",") + "}};", ctx);
  return ctx.__ports;
}

const sha = (s) => createHash("sha256").update(s).digest("hex");

export function publicState(ports, instance) {
  return { d: Object.keys(instance).filter((k) => !k.startsWith("_")).map((k) => [`s:${k}`, ports.PyText.tagged(instance[k])]) };
}

/** Set literals print in a per-process hash order in Python; compare them as sets. */
const setOrderFree = (s) => s.replace(/\{('[^']*'(?:, '[^']*')*)\}/g, (_, items) => `{${items.split(", ").sort().join(", ")}}`);

/** Replays one call sequence (golden turns) through the ports; returns the mismatches. */
export function replayTask(task, ports, stats, turns = task.turns, label = task.id) {
  const { PyText, classes } = ports;
  const problems = [];
  const instances = {};
  const owner = {};
  for (const c of task.involved_classes) {
    const cls = classes[c];
    if (!cls) continue; // not ported yet: its calls and states are counted as skipped
    const inst = new cls();
    if (c !== "MathAPI") inst._load_scenario(PyText.fromJson(task.initial_config[c] ?? {}), task.long_context);
    instances[c] = inst;
    for (const m of Object.keys(cls.SIGNATURES)) owner[m] = c;
  }
  for (const [ti, turn] of turns.entries()) {
    for (const [ci, call] of turn.calls.entries()) {
      // a class not ported yet: its calls are counted as skipped
      const unported = task.involved_classes.some((c) => !classes[c]);
      if (unported) {
        stats.skippedCalls++;
        continue;
      }
      // as the executor runs it: names no involved class has (its NameError), its safety list
      const out = ports.BfclScorer.run({ instances, owner }, call.name, PyText.fromJson(call.args));
      stats.calls++;
      if (out === call.out || (out.includes("Must be one of {") && setOrderFree(out) === setOrderFree(call.out))) stats.callsMatched++;
      else problems.push(`${label} turn ${ti} call ${ci} ${call.name}(${JSON.stringify(call.args).slice(0, 200)}):\n   want ${JSON.stringify(call.out).slice(0, 600)}\n   got  ${JSON.stringify(out).slice(0, 600)}`);
    }
    for (const [c, want] of Object.entries(turn.state_sha256)) {
      if (!instances[c]) continue;
      stats.states++;
      const got = sha(JSON.stringify(publicState(ports, instances[c])));
      if (got === want) stats.statesMatched++;
      else problems.push(`${label} turn ${ti}: ${c} state differs${turn.state ? `\n   want ${JSON.stringify(turn.state[c]).slice(0, 1500)}\n   got  ${JSON.stringify(publicState(ports, instances[c])).slice(0, 1500)}` : ""}`);
    }
  }
  return problems;
}

/** Our scorer on a model trajectory (one call per step) against the official checker's verdict. */
export function checkVerdict(task, turns, want, golden, stats, label) {
  if (!want) return [];
  const ports = loadPorts(golden.long_context_data, golden.travel_base_costs);
  const gt = { ...task, ground_truth: task.turns.map((t) => t.calls.map((c) => ({ name: c.name, args: c.args }))) };
  const scorer = new ports.BfclScorer(gt, ports.classes);
  for (const turn of turns) {
    for (const c of turn.calls) scorer.call(c.name, ports.PyText.fromJson(c.args));
    scorer.endTurn();
  }
  const got = scorer.result();
  stats.verdicts++;
  if (got.valid === want.valid && (got.error_type ?? null) === (want.error_type ?? null)) {
    stats.verdictsMatched++;
    return [];
  }
  return [`${label}: verdict ${JSON.stringify(got)} but the official checker says ${JSON.stringify(want)}`];
}

export function verify(golden) {
  const stats = { tasks: 0, tasksMatched: 0, skipped: 0, skippedCalls: 0, calls: 0, callsMatched: 0, states: 0, statesMatched: 0, verdicts: 0, verdictsMatched: 0 };
  const problems = [];
  for (const task of golden.tasks) {
    const ports = loadPorts(golden.long_context_data, golden.travel_base_costs);
    const partial = task.involved_classes.some((c) => !ports.classes[c]);
    if (partial) stats.skipped++;
    else stats.tasks++;
    let p;
    try {
      p = replayTask(task, ports, stats);
      p.push(...checkVerdict(task, task.turns, task.verdict, golden, stats, task.id));
      for (const v of task.variants ?? []) {
        const label = `${task.id} [${v.kind}]`;
        p.push(...replayTask(task, loadPorts(golden.long_context_data, golden.travel_base_costs), stats, v.turns, label));
        p.push(...checkVerdict(task, v.turns, v.verdict, golden, stats, label));
      }
    } catch (e) {
      p = [`${task.id}: the port threw ${e && e.stack}`];
    }
    if (!p.length && !partial) stats.tasksMatched++;
    problems.push(...p);
  }
  return { stats, problems };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const golden = JSON.parse(readFileSync(process.argv[2], "utf8"));
  const { stats, problems } = verify(golden);
  if (process.argv.includes("--json")) console.log(JSON.stringify({ stats, problems }));
  else {
    for (const p of problems.slice(0, 30)) console.log(p);
    console.log(JSON.stringify(stats));
  }
  process.exit(problems.length || stats.skipped ? 1 : 0);
}
