#!/usr/bin/env node
// Checks the JavaScript ports of the tau-bench tools (retail-env.js, airline-env.js) against what
// the original Python tools produced: for every task of every tasks_*.json that has an entry in an
// expected_*.json, the ground-truth actions are applied in order to a fresh copy of the database;
// each tool output's text must equal the expected string byte for byte (the text the original
// showed the model: a tool's string as is, which for tau-bench is json.dumps(...) or a message),
// and the SHA-256 of the final database (the README's serialisation) must equal final_state_sha256.
// The ports run as the bridge runs them with observation_format "python": the data files read with
// Py.parse and each result shown as Py.observation (bridge/core/sandbox/python-values.js).
//
// Usage: node envs/taubench/verify.mjs [data folder, default /work/shared/benchmarks/taubench]
// Exit code 0 only when every output and every hash matches.
import { createHash } from "node:crypto";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const HERE = dirname(fileURLToPath(import.meta.url));
// the guest's Py layer, as the bridge binds it before the env source of a python-format env
const Py = new Function(`return (\n${readFileSync(join(HERE, "..", "..", "bridge", "core", "sandbox", "python-values.js"), "utf8")}\n);`)();
const DATA = process.argv[2] ?? "/work/shared/benchmarks/taubench";
const MAX_DETAILS = 5;

const DOMAINS = [
  { name: "retail", file: "retail-env.js", className: "TauRetailEnv", tables: ["users", "orders", "products"] },
  { name: "airline", file: "airline-env.js", className: "TauAirlineEnv", tables: ["users", "reservations", "flights"] },
];

const readJson = (path) => JSON.parse(readFileSync(path, "utf8"));

// ----- the hash's serialisation (README): sorted keys, "," and ":", \uXXXX, integral floats as ints

function escapeString(s) {
  // JSON.stringify escapes ", \ and control characters as json.dumps does; then every UTF-16 code
  // unit outside " ".."~" becomes \uXXXX, as ensure_ascii does (DEL included; a non-BMP character
  // is already a surrogate pair in JS, so it becomes two escapes)
  return JSON.stringify(s).replace(/[\u007f-\uffff]/g, (c) => "\\u" + c.charCodeAt(0).toString(16).padStart(4, "0"));
}

/** Python repr(float) for a finite non-integral double: JS shortest digits, Python's exponent rules. */
function pythonFloat(x) {
  if (Number.isNaN(x)) return "NaN";
  if (x === Infinity) return "Infinity";
  if (x === -Infinity) return "-Infinity";
  if (Number.isInteger(x)) return BigInt(x).toString();
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

function canonical(v) {
  if (v === null || v === undefined) return "null";
  if (v === true) return "true";
  if (v === false) return "false";
  if (typeof v === "number") return pythonFloat(v);
  if (typeof v === "string") return escapeString(v);
  if (Array.isArray(v)) return `[${v.map(canonical).join(",")}]`;
  return `{${Object.keys(v)
    .sort((a, b) => cmpCodePoints(a, b))
    .map((k) => `${escapeString(k)}:${canonical(v[k])}`)
    .join(",")}}`;
}

/** Python sorts str keys by code point; JS's default sort compares UTF-16 code units. */
function cmpCodePoints(a, b) {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const ca = a.charCodeAt(i);
    const cb = b.charCodeAt(i);
    if (ca === cb) continue;
    const sa = ca >= 0xd800 && ca < 0xe000;
    const sb = cb >= 0xd800 && cb < 0xe000;
    if (sa !== sb) return sa ? 1 : -1;
    return ca - cb;
  }
  return a.length - b.length;
}

const stateHash = (state) => createHash("sha256").update(canonical(state)).digest("hex");

// ----- comparison: text, exactly ------------------------------------------------------------

function outputMatches(expected, actual) {
  if (expected === null) return actual === null;
  return actual === expected;
}

const show = (v, n = 300) => {
  const s = typeof v === "string" ? JSON.stringify(v) : JSON.stringify(v);
  return s === undefined ? String(v) : s.length > n ? s.slice(0, n) + "…" : s;
};

// ----- run -----------------------------------------------------------------------------------

let allOk = true;
for (const domain of DOMAINS) {
  const dir = join(DATA, domain.name);
  // as the importer writes a bundle's env.js: the shared helpers, then the domain's class
  const src = `${readFileSync(join(HERE, "tau-python.js"), "utf8")}\n${readFileSync(join(HERE, domain.file), "utf8")}`;
  const Env = new Function("Py", `${src}; return ${domain.className};`)(Py);
  const dbText = {};
  for (const t of domain.tables) dbText[t] = readFileSync(join(dir, "data", `${t}.json`), "utf8");

  const files = readdirSync(dir);
  const expected = new Map();
  for (const f of files.filter((f) => /^expected_.*\.json$/.test(f)).sort()) for (const e of readJson(join(dir, f))) expected.set(e.id, e);
  const tasks = files
    .filter((f) => /^tasks_\w+\.json$/.test(f))
    .sort()
    .flatMap((f) => readJson(join(dir, f)));

  let nTasks = 0;
  let outOk = 0;
  let outTotal = 0;
  let hashOk = 0;
  const details = [];
  const started = Date.now();
  for (const task of tasks) {
    const exp = expected.get(task.id);
    if (!exp) continue;
    nTasks++;
    const state = {};
    for (const t of domain.tables) state[t] = Py.parse(dbText[t]);
    const env = new Env(state);
    task.actions.forEach((action, i) => {
      let out;
      if (typeof env[action.name] !== "function" || action.name === "constructor") out = null;
      else {
        try {
          out = Py.observation(env[action.name](JSON.parse(JSON.stringify(action.arguments ?? {}))));
        } catch (e) {
          out = `<threw ${e && e.stack ? e.stack : e}>`;
        }
      }
      outTotal++;
      const want = exp.outputs[i] === undefined ? null : exp.outputs[i];
      if (outputMatches(want, out)) outOk++;
      else if (details.length < MAX_DETAILS) details.push(`${task.id} action #${i} ${action.name}(${show(action.arguments, 200)})\n      expected: ${show(want)}\n      got:      ${show(out)}`);
    });
    if (exp.outputs.length !== task.actions.length && details.length < MAX_DETAILS) {
      details.push(`${task.id}: ${task.actions.length} actions but ${exp.outputs.length} expected outputs`);
    }
    const db = {};
    for (const t of domain.tables) db[t] = env[t];
    // any other enumerable field of the instance is part of the state too
    for (const k of Object.keys(env)) if (!(k in db)) db[k] = env[k];
    // JSON.stringify unboxes floats (toJSON); the hash's serialisation then writes integral ones as ints
    const h = stateHash(JSON.parse(JSON.stringify(db)));
    if (h === exp.final_state_sha256) hashOk++;
    else if (details.length < MAX_DETAILS) details.push(`${task.id}: final state hash ${h} != expected ${exp.final_state_sha256}`);
  }
  const ok = nTasks > 0 && outOk === outTotal && hashOk === nTasks && expected.size === nTasks;
  allOk &&= ok;
  console.log(
    `${domain.name}: ${nTasks} tasks with expected results (of ${tasks.length}); outputs ${outOk}/${outTotal} match; final-state hashes ${hashOk}/${nTasks} match` +
      (expected.size !== nTasks ? `; ${expected.size - nTasks} expected entries have no task` : "") +
      ` (${Date.now() - started} ms)`,
  );
  for (const d of details) console.log(`  MISMATCH ${d}`);
}
console.log(allOk ? "ALL MATCH" : "MISMATCHES FOUND");
process.exit(allOk ? 0 : 1);
