import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { pyJsonParse } from "../../bridge/core/episode/py-json.js";

/** The pinned release the ports were verified against (python-client's test extra installs it). */
export const BFCL_EVAL_VERSION = "2026.3.23";
export const BFCL_CATEGORIES = ["base", "miss_func", "miss_param", "long_context"] as const;
export type BfclCategory = (typeof BFCL_CATEGORIES)[number];

/** Class -> (port file, func-doc file, short name used in env ids). */
export const BFCL_CLASSES = {
  GorillaFileSystem: { file: "gorilla-file-system.js", doc: "gorilla_file_system.json", short: "fs" },
  MathAPI: { file: "math-api.js", doc: "math_api.json", short: "math" },
  MessageAPI: { file: "message-api.js", doc: "message_api.json", short: "message" },
  TwitterAPI: { file: "twitter-api.js", doc: "posting_api.json", short: "twitter" },
  TicketAPI: { file: "ticket-api.js", doc: "ticket_api.json", short: "ticket" },
  TradingBot: { file: "trading-bot.js", doc: "trading_bot.json", short: "trading" },
  TravelAPI: { file: "travel-api.js", doc: "travel_booking.json", short: "travel" },
  VehicleControlAPI: { file: "vehicle-control-api.js", doc: "vehicle_control.json", short: "vehicle" },
} as const;
type ClassName = keyof typeof BFCL_CLASSES;

/** What BFCL's FC inference loop says at a turn where held-out functions are added (miss_func). */
export const BFCL_HOLDOUT_MESSAGE = "I have updated some more functions you can choose from. What about now?";
/** MAXIMUM_STEP_LIMIT in bfcl_eval/constants/default_prompts.py. */
export const BFCL_MAX_STEPS_PER_TURN = 20;

/** Our JavaScript ports, shipped with the package (the data is read from the installed bfcl-eval). */
const SOURCES = import.meta.url.endsWith(".ts") ? import.meta.dirname : resolve(import.meta.dirname, "..", "..", "..", "envs", "bfcl");

/** The installed bfcl-eval package folder, found through a Python interpreter. */
export function findBfclPackage(python = process.env.BFCL_PYTHON ?? "python3"): string {
  try {
    // stderr is captured, not inherited: the user gets one line saying what to do, not a Python traceback
    return execFileSync(python, ["-c", "import bfcl_eval, os; print(os.path.dirname(bfcl_eval.__file__))"], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] }).trim();
  } catch (e) {
    const err = e as { stderr?: string; message: string };
    const last = (err.stderr ?? "").trim().split("\n").pop() || err.message.split("\n")[0];
    throw new Error(`bfcl-eval is not importable with ${python} (${last}): install it (pip install --no-deps bfcl-eval==${BFCL_EVAL_VERSION} mpmath==1.3.0), point --python or $BFCL_PYTHON at an interpreter that has it, or pass --from <its bfcl_eval folder>`, { cause: e });
  }
}

/**
 * The data the classes keep in Python code rather than in data files: long_context.py's constants
 * and TravelAPI's route-cost table, read from the package with its own interpreter (never committed).
 */
export interface BfclPackageData {
  long_context: Record<string, unknown>;
  travel_base_costs: unknown[];
  /** Names Python resolves in the executor's module (builtins, the module's globals): calls to them would run Python, not a port. */
  py_globals: string[];
  py_keywords: string[];
}

export function packageData(pkg: string, python = process.env.BFCL_PYTHON ?? "python3"): BfclPackageData {
  const script = `
import ast, json, math, os, sys
pkg = sys.argv[1]
src = os.path.join(pkg, "eval_checker", "multi_turn_eval", "func_source_code")
def to_json(v):
    if v is Ellipsis: return {"$opaque": "Ellipsis"}
    if isinstance(v, bool) or v is None or isinstance(v, str): return v
    if isinstance(v, int): return v if abs(v) <= 2**53 else {"$int": str(v)}
    if isinstance(v, float):
        if math.isnan(v) or math.isinf(v): return {"$float": "NaN" if math.isnan(v) else ("Infinity" if v > 0 else "-Infinity")}
        return {"$float": v} if v == int(v) else v
    if isinstance(v, (list, tuple)): return [to_json(x) for x in v]
    if isinstance(v, dict): return {str(k): to_json(x) for k, x in v.items()}
    raise TypeError(type(v).__name__)
lc = {}
for node in ast.parse(open(os.path.join(src, "long_context.py")).read()).body:
    if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name) and node.targets[0].id.isupper():
        lc[node.targets[0].id] = to_json(ast.literal_eval(node.value))
costs = None
for node in ast.walk(ast.parse(open(os.path.join(src, "travel_booking.py")).read())):
    if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", "") == "base_costs":
        costs = [[a, b, c] for (a, b), c in ast.literal_eval(node.value).items()]
import builtins, keyword
names = set(dir(builtins)) | {"__name__", "__doc__", "__file__", "__builtins__", "__spec__", "__loader__", "__package__", "__cached__"}
for node in ast.parse(open(os.path.join(pkg, "eval_checker", "multi_turn_eval", "multi_turn_utils.py")).read()).body:
    if isinstance(node, (ast.Import, ast.ImportFrom)): names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    elif isinstance(node, (ast.FunctionDef, ast.ClassDef)): names.add(node.name)
    elif isinstance(node, ast.Assign): names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
print(json.dumps({"long_context": lc, "travel_base_costs": costs, "py_globals": sorted(names), "py_keywords": keyword.kwlist}))
`;
  const out = execFileSync(python, ["-c", script, pkg], { encoding: "utf8", maxBuffer: 64 * 1024 * 1024 });
  const data = JSON.parse(out) as Omit<BfclPackageData, "travel_base_costs"> & { travel_base_costs: unknown[] | null };
  if (!data.travel_base_costs) throw new Error("TravelAPI's base_costs table was not found in travel_booking.py (a bfcl-eval version the ports were not written for?)");
  return data as BfclPackageData;
}

/** The env source: package data, the Python-semantics helpers, the 8 classes, the checker, the env class. */
export function bfclSource(data: { long_context?: Record<string, unknown>; travel_base_costs: unknown[]; py_globals?: string[]; py_keywords?: string[] }): string {
  const files = ["py-text.js", "bfcl-runtime.js", "long-context.js", ...Object.values(BFCL_CLASSES).map((c) => c.file), "bfcl-scorer.js"];
  const parts = [
    `// Generated by \`envscaler import bfcl\` from bfcl-eval (Apache-2.0): its long_context.py constants and TravelAPI route costs, then our ports.`,
    `var BFCL_TRAVEL_BASE_COSTS = ${JSON.stringify(data.travel_base_costs)};`,
    ...(data.long_context ? [`var BFCL_LONG_CONTEXT = ${JSON.stringify(data.long_context)};`] : []),
    `var BFCL_PY_GLOBALS = ${JSON.stringify(data.py_globals ?? [])};`,
    `var BFCL_PY_KEYWORDS = ${JSON.stringify(data.py_keywords ?? [])};`,
  ];
  for (const f of files) {
    const p = join(SOURCES, f);
    if (!existsSync(p)) throw new Error(`the BFCL port is incomplete: ${p} is missing`);
    parts.push(readFileSync(p, "utf8"));
  }
  parts.push(`const BFCL_CLASSES = { ${Object.keys(BFCL_CLASSES).join(", ")} };`);
  parts.push(readFileSync(join(SOURCES, "bfcl-env.js"), "utf8"));
  return parts.join("\n");
}

const GORILLA_TO_OPENAPI: Record<string, string> = {
  integer: "integer", number: "number", float: "number", string: "string", boolean: "boolean", bool: "boolean", array: "array", list: "array",
  dict: "object", object: "object", tuple: "array", any: "string", byte: "integer", short: "integer", long: "integer", double: "number", char: "string",
  ArrayList: "array", Array: "array", HashMap: "object", Hashtable: "object", Queue: "array", Stack: "array", Any: "string", String: "string", Bigint: "integer",
};

/** bfcl_eval.model_handler.utils._cast_to_openai_type with GORILLA_TO_OPENAPI. */
function castToOpenAiType(properties: Record<string, Record<string, unknown>>): Record<string, Record<string, unknown>> {
  for (const value of Object.values(properties)) {
    if (!("type" in value)) value.type = "string";
    else {
      const t = value.type as string;
      if (t === "float") {
        value.format = "float";
        value.description = `${value.description as string} This is a float type value.`;
      }
      value.type = GORILLA_TO_OPENAPI[t] ?? "string";
    }
    if (value.type === "array" || value.type === "object") {
      if (value.properties) value.properties = castToOpenAiType(value.properties as Record<string, Record<string, unknown>>);
      else if (value.items) {
        const items = value.items as Record<string, unknown>;
        items.type = GORILLA_TO_OPENAPI[items.type as string];
        if (items.type === "array" && items.items) (items.items as Record<string, unknown>).type = GORILLA_TO_OPENAPI[(items.items as Record<string, unknown>).type as string];
        else if (items.type === "object" && items.properties) items.properties = castToOpenAiType(items.properties as Record<string, Record<string, unknown>>);
      }
    }
  }
  return properties;
}

/**
 * A func-doc entry as BFCL's OpenAI-style FC handlers give it to the model: the Python-syntax hint
 * appended to the description, Gorilla types mapped to OpenAPI ones (floats marked). The `response`
 * schema the docs carry is dropped: our tool schema has no place for it.
 */
export function toOpenAiTool(doc: Record<string, unknown>): { type: "function"; function: Record<string, unknown> } {
  const item = structuredClone(doc) as Record<string, unknown> & { parameters: Record<string, unknown> };
  item.description = `${item.description as string} Note that the provided function is in Python 3 syntax.`;
  item.parameters.type = "object";
  item.parameters.properties = castToOpenAiType((item.parameters.properties ?? {}) as Record<string, Record<string, unknown>>);
  delete item.response;
  return { type: "function", function: item };
}

interface BfclEntry {
  id: string;
  question: { role: string; content: string }[][];
  initial_config: Record<string, unknown>;
  involved_classes: ClassName[];
  missed_function?: Record<string, string[]>;
}

const readJsonl = (path: string): unknown[] =>
  readFileSync(path, "utf8")
    .split("\n")
    .filter((l) => l.trim())
    .map((l) => pyJsonParse(l));

/** The scenario check: the official verdict the env computed turn by turn (a throw shows the failed rule). */
const VERDICT_CHECK = `({ final }) => {
  const b = final.bfcl;
  if (b.turns_done !== b.turns_total) throw new Error("multi_turn:force_terminated: " + b.turns_done + " of " + b.turns_total + " turns were played");
  if (b.first_failure) throw new Error(b.first_failure.error_type + " at turn " + b.first_failure.turn + ": " + b.first_failure.error_message);
  return true;
}`;

export interface BfclImportResult {
  envId: string;
  dir: string;
  scenarios: number;
}

/**
 * Writes one bundle per (category, set of involved classes): its tools are exactly the func docs
 * of those classes, as BFCL shows them, so every task sees BFCL's tool list; each task is a
 * multi-turn scenario (user_turns) scored all-or-nothing by the official checker's rules.
 */
export function importBfcl(pkg: string, out: string, categories: readonly BfclCategory[] = BFCL_CATEGORIES, python?: string): BfclImportResult[] {
  const dataDir = join(pkg, "data");
  if (!existsSync(join(dataDir, "multi_turn_func_doc"))) throw new Error(`${pkg} is not the bfcl_eval package folder (no data/multi_turn_func_doc)`);
  const data = packageData(pkg, python);
  const docs = new Map<ClassName, Record<string, unknown>[]>();
  for (const [cls, spec] of Object.entries(BFCL_CLASSES) as [ClassName, (typeof BFCL_CLASSES)[ClassName]][]) docs.set(cls, readJsonl(join(dataDir, "multi_turn_func_doc", spec.doc)) as Record<string, unknown>[]);
  const written: BfclImportResult[] = [];
  for (const cat of categories) {
    const file = join(dataDir, `BFCL_v4_multi_turn_${cat}.json`);
    const entries = readJsonl(file) as BfclEntry[];
    const answers = new Map((readJsonl(join(dataDir, "possible_answer", `BFCL_v4_multi_turn_${cat}.json`)) as { id: string; ground_truth: string[][] }[]).map((a) => [a.id, a.ground_truth]));
    // long_context.py's constants are read only when long_context is on, so only that category carries them
    const source = bfclSource(cat === "long_context" ? data : { travel_base_costs: data.travel_base_costs, py_globals: data.py_globals, py_keywords: data.py_keywords });
    const groups = new Map<string, BfclEntry[]>();
    for (const e of entries) {
      const key = [...e.involved_classes].sort().join(",");
      groups.set(key, [...(groups.get(key) ?? []), e]);
    }
    for (const [key, group] of groups) {
      const classes = key.split(",") as ClassName[];
      const envId = `bfcl-${cat}-${classes.map((c) => BFCL_CLASSES[c].short).join("-")}-v1`;
      const dir = join(out, envId.replace(/-v1$/, ""));
      mkdirSync(dir, { recursive: true });
      const tools = classes.flatMap((c) => docs.get(c)!.map(toOpenAiTool));
      const manifest = {
        format: "envscaler.env/v1",
        id: envId,
        name: `BFCL v3 multi-turn ${cat}: ${classes.join(" + ")}`,
        introduction: `BFCL v3 multi-turn (${cat}) with ${classes.join(" and ")}, from bfcl-eval ${BFCL_EVAL_VERSION} (Apache-2.0). The backend is hidden: the agent sees only the user's questions and the tools' outputs.`,
        rules: [],
        class_name: "BfclEnv",
        source_file: "env.js",
        tools,
        // bfcl-eval's executor evaluates any call, listed or not (its NameError text for a name no involved class has)
        unlisted_call_method: "_unlisted_call",
        observation_format: "python",
        max_steps: 200,
        default_state: {},
        limits: { memory_mb: 256, call_timeout_ms: 5000 },
      };
      writeFileSync(join(dir, "manifest.json"), `${JSON.stringify(manifest, null, 1)}\n`);
      writeFileSync(join(dir, "env.js"), source);
      const scenarios = group.map((e) => scenarioOf(e, answers.get(e.id), envId, cat));
      writeFileSync(join(dir, "scenarios.json"), `${JSON.stringify(scenarios)}\n`);
      written.push({ envId, dir, scenarios: scenarios.length });
    }
  }
  return written;
}

/**
 * A ground-truth call string (Python call syntax with literal arguments) as {name, args, pos}:
 * keyword arguments by name, positional ones in order (the env binds them by the method's
 * Python signature, as the original's eval does).
 */
export function parseGroundTruthCall(call: string): { name: string; args: Record<string, unknown>; pos?: unknown[] } {
  const m = /^\s*([A-Za-z_]\w*)\s*\(([\s\S]*)\)\s*$/.exec(call);
  if (!m) throw new Error(`cannot parse ground-truth call ${call}`);
  const args: Record<string, unknown> = {};
  const pos: unknown[] = [];
  for (const p of splitTopLevel(m[2]!)) {
    const kw = /^\s*([A-Za-z_]\w*)\s*=(?!=)([\s\S]*)$/.exec(p);
    if (kw) args[kw[1]!] = pyLiteral(kw[2]!);
    else pos.push(pyLiteral(p));
  }
  return { name: m[1]!, args, ...(pos.length ? { pos } : {}) };
}

function splitTopLevel(s: string): string[] {
  const out: string[] = [];
  let depth = 0;
  let quote: string | null = null;
  let cur = "";
  for (let i = 0; i < s.length; i++) {
    const c = s[i]!;
    if (quote) {
      cur += c;
      if (c === "\\") cur += s[++i] ?? "";
      else if (c === quote) quote = null;
      continue;
    }
    if (c === "'" || c === '"') quote = c;
    else if ("([{".includes(c)) depth++;
    else if (")]}".includes(c)) depth--;
    if (c === "," && depth === 0) {
      if (cur.trim()) out.push(cur);
      cur = "";
    } else cur += c;
  }
  if (cur.trim()) out.push(cur);
  return out;
}

/** A Python literal (str, int, float, bool, None, list, tuple, dict) as the JSON our ports read. */
export function pyLiteral(src: string): unknown {
  let i = 0;
  const s = src.trim();
  const ws = () => {
    while (i < s.length && /\s/.test(s[i]!)) i++;
  };
  const val = (): unknown => {
    ws();
    const c = s[i]!;
    if (c === "'" || c === '"') {
      let out = "";
      const q = c;
      i++;
      while (s[i] !== q) {
        if (i >= s.length) throw new Error(`unterminated string in ${src}`);
        if (s[i] === "\\") {
          const n = s[i + 1]!;
          const esc: Record<string, string> = { n: "\n", t: "\t", r: "\r", "\\": "\\", "'": "'", '"': '"', "0": "\0" };
          if (n === "u") {
            out += String.fromCharCode(parseInt(s.slice(i + 2, i + 6), 16));
            i += 6;
            continue;
          }
          if (n === "x") {
            out += String.fromCharCode(parseInt(s.slice(i + 2, i + 4), 16));
            i += 4;
            continue;
          }
          out += esc[n] ?? `\\${n}`;
          i += 2;
        } else out += s[i++];
      }
      i++;
      ws();
      // adjacent literals concatenate
      if (s[i] === "'" || s[i] === '"') return out + (val() as string);
      return out;
    }
    if (c === "[" || c === "(") {
      const close = c === "[" ? "]" : ")";
      i++;
      const out: unknown[] = [];
      for (;;) {
        ws();
        if (s[i] === close) {
          i++;
          return out;
        }
        out.push(val());
        ws();
        if (s[i] === ",") i++;
      }
    }
    if (c === "{") {
      i++;
      const out: Record<string, unknown> = {};
      for (;;) {
        ws();
        if (s[i] === "}") {
          i++;
          return out;
        }
        const k = val();
        ws();
        i++; // ':'
        out[String(k)] = val();
        ws();
        if (s[i] === ",") i++;
      }
    }
    for (const [lit, v] of [["True", true], ["False", false], ["None", null]] as const) {
      if (s.startsWith(lit, i)) {
        i += lit.length;
        return v;
      }
    }
    const m = /^[+-]?(?:\d[\d_]*(?:\.[\d_]*)?|\.\d[\d_]*)(?:[eE][+-]?\d+)?/.exec(s.slice(i));
    if (!m) throw new Error(`unsupported literal in ${src}`);
    i += m[0].length;
    const text = m[0].replace(/_/g, "");
    if (/[.eE]/.test(text)) {
      const n = Number(text);
      return Number.isInteger(n) ? { $float: n } : n;
    }
    return Number.isSafeInteger(Number(text)) ? Number(text) : { $int: BigInt(text).toString() };
  };
  const v = val();
  return v;
}

function scenarioOf(e: BfclEntry, gt: string[][] | undefined, envId: string, cat: BfclCategory): Record<string, unknown> {
  if (!gt) throw new Error(`${e.id} has no ground truth`);
  const holdout = e.missed_function ?? {};
  const turns = e.question.map((msgs, i) => {
    const add = holdout[String(i)];
    const content = add ? BFCL_HOLDOUT_MESSAGE : msgs.map((m) => m.content).join("\n");
    return { content, ...(add ? { add_tools: add } : {}) };
  });
  return {
    id: e.id,
    env_id: envId,
    task: turns[0]!.content,
    mode: "task",
    user_turns: turns.slice(1),
    max_steps_per_turn: BFCL_MAX_STEPS_PER_TURN,
    turn_end_method: "_bfcl_end_turn",
    max_steps: e.question.length * (BFCL_MAX_STEPS_PER_TURN + 1),
    initial_state: { task: { id: e.id, category: cat, involved_classes: e.involved_classes, initial_config: e.initial_config, long_context: cat === "long_context", ground_truth: gt.map((turn) => turn.map(parseGroundTruthCall)) } },
    reward: "all",
    checks: [{ description: "the official BFCL multi-turn checker passes every turn (state equality and ground-truth outputs)", source: VERDICT_CHECK }],
  };
}

/** A fingerprint of the data files, printed in reports (the scores depend on the data version). */
export function bfclDataHashes(pkg: string, categories: readonly BfclCategory[] = BFCL_CATEGORIES): Record<string, string> {
  const out: Record<string, string> = {};
  for (const cat of categories) {
    for (const [kind, path] of [["question", join(pkg, "data", `BFCL_v4_multi_turn_${cat}.json`)], ["possible_answer", join(pkg, "data", "possible_answer", `BFCL_v4_multi_turn_${cat}.json`)]] as const) {
      out[`${kind}/${cat}`] = createHash("sha256").update(readFileSync(path)).digest("hex").slice(0, 16);
    }
  }
  return out;
}
