import { pyJsonParse } from "./py-json.js";
import { MAX_ACTION_DEPTH, jsonTextTooDeep, tooDeepMessage, valueShape } from "./action-limits.js";

/** One tool call as the agent made it, before validation. `argumentsError` is set when its arguments were not a JSON object. */
export interface ParsedCall {
  id: string;
  name: string;
  arguments: Record<string, unknown>;
  argumentsError?: string;
  /**
   * The arguments as Python's json.loads reads their text (integral floats such as `30.0` kept as
   * `{"$float": 30}`), when they arrived as JSON text; python-format envs get these.
   */
  pyArguments?: Record<string, unknown>;
}

/** What an agent's action amounts to. */
export type ParsedAction =
  | { kind: "tool_calls"; calls: ParsedCall[]; text: string; reasoning?: string }
  | { kind: "text"; text: string; reasoning?: string }
  | { kind: "invalid"; message: string };

const THINK_RE = /<think>([\s\S]*?)<\/think>/gi;
const TOOL_CALL_RE = /<tool_call>\s*([\s\S]*?)\s*<\/tool_call>/gi;
/** A fenced block: its language tag and body; an unclosed fence (a reply cut at the token cap) runs to the end. */
const FENCE_RE = /```[ \t]*([A-Za-z0-9_+-]*)[ \t]*([\s\S]*?)(```|$)/g;
/** Where a tool call written as JSON inside prose starts: `{"name": …`, `{"function": …`, … */
const CALL_START_RE = /\{\s*"(?:name|function|function_call|tool|tool_name|tool_calls|api_name)"\s*:/g;
/** Fence languages whose body is data the model meant as a call (an empty tag counts when the body is JSON-like). */
const JSON_FENCE_LANGS = new Set(["json", "json5", "jsonc", "tool_call", "tool_code", "tool", "function"]);

/** Told to the agent with every unreadable action, so a model can correct its format. */
export const CALL_FORMAT_HINT = 'write a tool call as {"name": "<tool>", "arguments": {...}} (or inside <tool_call>…</tool_call>), and a reply to the user as plain text';

// What real models write for the two parts of a call (OpenAI, Hermes/Qwen, Llama, ReAct-style agents).
const NAME_KEYS = ["name", "tool", "tool_name", "api_name", "function", "action"] as const;
const ARG_KEYS = ["arguments", "parameters", "args", "input", "params", "action_input", "kwargs"] as const;

function isRecord(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === "object" && !Array.isArray(v);
}

/** The same JSON text read with Python's int/float distinction; undefined when it does not parse so. */
function pyParse(text: string): Record<string, unknown> | undefined {
  try {
    const v = pyJsonParse(text);
    return isRecord(v) ? v : undefined;
  } catch {
    return undefined;
  }
}

function parseArguments(raw: unknown, pyRaw?: unknown): { args: Record<string, unknown>; error?: string; py?: Record<string, unknown> } {
  if (raw === undefined || raw === null) return { args: {} };
  if (isRecord(raw)) return { args: raw, ...(isRecord(pyRaw) ? { py: pyRaw } : {}) };
  if (typeof raw === "string") {
    if (raw.trim() === "") return { args: {} };
    // checked on the text, before parsing: a deep value must never be built (see action-limits.ts)
    if (jsonTextTooDeep(raw)) return { args: {}, error: tooDeepMessage("the arguments") };
    try {
      const parsed: unknown = JSON.parse(raw);
      if (isRecord(parsed)) return { args: parsed, py: pyParse(raw) };
      return { args: {}, error: "arguments must be a JSON object" };
    } catch (e) {
      return { args: {}, error: `arguments are not valid JSON: ${(e as Error).message}` };
    }
  }
  return { args: {}, error: "arguments must be a JSON object" };
}

/** The object that names the call: OpenAI's `function` / legacy `function_call` wrapper, or the call itself. */
function callBody(raw: Record<string, unknown>): Record<string, unknown> {
  if (isRecord(raw.function)) return raw.function;
  if (isRecord(raw.function_call)) return raw.function_call;
  return raw;
}

function callName(fn: Record<string, unknown>): string | undefined {
  for (const k of NAME_KEYS) if (typeof fn[k] === "string" && fn[k] !== "") return fn[k];
  return undefined;
}

const CALL_KEYS = new Set<string>([...NAME_KEYS, ...ARG_KEYS, "id", "type", "function_call"]);

/**
 * True when a parsed JSON value is a call, a list of calls, or a `{tool_calls: [...]}` wrapper. A
 * call has a name and nothing but call keys, so a record like `{"name": "Ann", "age": 3}` quoted
 * to the user is not mistaken for a call to a tool "Ann".
 */
function looksLikeCall(v: unknown): boolean {
  if (!isRecord(v)) return false;
  if (isRecord(v.function) || isRecord(v.function_call)) return callName(callBody(v)) !== undefined;
  return callName(v) !== undefined && Object.keys(v).every((k) => CALL_KEYS.has(k));
}

function looksLikeCalls(v: unknown): boolean {
  if (Array.isArray(v)) return v.length > 0 && v.every(looksLikeCall);
  if (isRecord(v) && Array.isArray(v.tool_calls)) return true;
  return looksLikeCall(v);
}

function flattenCalls(values: unknown[]): unknown[] {
  return values.flatMap((v): unknown[] => (Array.isArray(v) ? (v as unknown[]) : isRecord(v) && Array.isArray(v.tool_calls) ? (v.tool_calls as unknown[]) : [v]));
}

/**
 * Accepts `{name, arguments}` and its common variants, or an OpenAI tool_call `{id, type, function: {name, arguments}}`.
 * `pyRaw` is the same call read from its text with Python's number types, when it came as text.
 */
function parseCall(raw: unknown, index: number, step: number, pyRaw?: unknown): ParsedCall | string {
  if (!isRecord(raw)) return `tool call ${index} is not an object`;
  const fn = callBody(raw);
  const name = callName(fn);
  if (name === undefined) return `tool call ${index} has no function name`;
  const argKey = ARG_KEYS.find((k) => fn[k] !== undefined);
  const pyFn = isRecord(pyRaw) ? callBody(pyRaw) : undefined;
  const { args, error, py } = parseArguments(argKey ? fn[argKey] : undefined, argKey && pyFn ? pyFn[argKey] : undefined);
  const id = typeof raw.id === "string" && raw.id ? raw.id : `call_${step}_${index}`;
  if (error) return { id, name, arguments: args, argumentsError: error };
  return py ? { id, name, arguments: args, pyArguments: py } : { id, name, arguments: args };
}

function fromCallList(list: unknown[], step: number, text = "", reasoning?: string, pyList?: unknown[]): ParsedAction {
  const calls: ParsedCall[] = [];
  for (const [i, raw] of list.entries()) {
    const c = parseCall(raw, i, step, pyList?.[i]);
    if (typeof c === "string") return invalid(c);
    calls.push(c);
  }
  if (calls.length === 0) return text ? { kind: "text", text, reasoning } : invalid("the action has no tool calls and no text");
  return { kind: "tool_calls", calls, text, reasoning };
}

function invalid(message: string): ParsedAction {
  return { kind: "invalid", message: `${message}; ${CALL_FORMAT_HINT}` };
}

/** The end (exclusive) of the balanced JSON object/array starting at `start`, or -1 when it never closes. */
function balancedEnd(s: string, start: number): number {
  let depth = 0;
  let inString = false;
  for (let i = start; i < s.length; i++) {
    const c = s[i];
    if (inString) {
      if (c === "\\") i++;
      else if (c === '"') inString = false;
    } else if (c === '"') inString = true;
    else if (c === "{" || c === "[") depth++;
    else if (c === "}" || c === "]") {
      depth--;
      if (depth === 0) return i + 1;
    }
  }
  return -1;
}

type JsonPiece = { ok: true; value: unknown } | { ok: false; error: string };

function parseJson(s: string): JsonPiece {
  if (jsonTextTooDeep(s)) return { ok: false, error: tooDeepMessage("this JSON") };
  try {
    return { ok: true, value: JSON.parse(s) };
  } catch (e) {
    return { ok: false, error: (e as Error).message };
  }
}

/** Calls written as JSON in fenced blocks. null: no fence holds JSON (the fences, if any, are prose). */
function fencedCalls(content: string): { values: unknown[]; text: string } | { error: string } | null {
  const values: unknown[] = [];
  let found = false;
  let problem: string | undefined;
  const text = content.replace(FENCE_RE, (whole, lang: string, body: string, close: string) => {
    const b = body.trim();
    const jsonLike = b.startsWith("{") || b.startsWith("[");
    if (!(jsonLike && (lang === "" || JSON_FENCE_LANGS.has(lang.toLowerCase()))) && lang.toLowerCase() !== "json") return whole;
    found = true;
    const p = parseJson(b);
    if (!p.ok) problem ??= `a \`\`\`${lang} block ${close ? "is not valid JSON" : "is not closed (the reply was cut off?) and is not valid JSON"}: ${p.error}`;
    else if (!looksLikeCalls(p.value)) problem ??= `a \`\`\`${lang} block holds JSON that is not a tool call`;
    else values.push(p.value);
    return "";
  });
  if (!found) return null;
  return problem ? { error: problem } : { values, text: text.trim() };
}

/** Calls written as bare JSON: the whole reply (a JSON object or list), or `{"name": …}` objects inside prose. */
function bareCalls(content: string): { values: unknown[]; text: string } | { error: string } | null {
  if (content.startsWith("{") || content.startsWith("[")) {
    const end = balancedEnd(content, 0);
    if (end < 0) return { error: "the reply starts like JSON but never closes (cut off at the token limit?)" };
    const p = parseJson(content.slice(0, end));
    if (!p.ok) return { error: `the reply starts like JSON but is not valid JSON: ${p.error}` };
    if (!looksLikeCalls(p.value)) return { error: "the reply is JSON but not a tool call" };
    const rest = bareCalls(content.slice(end).trim());
    if (rest && "error" in rest) return rest;
    return { values: [p.value, ...(rest?.values ?? [])], text: rest ? rest.text : content.slice(end).trim() };
  }
  const values: unknown[] = [];
  let text = "";
  let from = 0;
  CALL_START_RE.lastIndex = 0;
  for (let m = CALL_START_RE.exec(content); m; m = CALL_START_RE.exec(content)) {
    const end = balancedEnd(content, m.index);
    if (end < 0) return { error: "a tool call written as JSON never closes (cut off at the token limit?)" };
    const p = parseJson(content.slice(m.index, end));
    if (!p.ok) return { error: `a tool call written as JSON is not valid JSON: ${p.error}` };
    CALL_START_RE.lastIndex = end;
    if (!looksLikeCalls(p.value)) continue; // data quoted in prose (a record with a "name"), not a call
    values.push(p.value);
    text += content.slice(from, m.index);
    from = end;
  }
  if (values.length === 0) return null;
  return { values, text: (text + content.slice(from)).trim() };
}

/** A whole reply that is one code-style call or a list of them, optionally fenced: `get_book(book_id="B1")`, `[a(x=1), b()]`. */
const CODE_CALL_RE = /^\[?\s*[A-Za-z_][\w.]*\([\s\S]*\)\s*\]?$/;

/**
 * The reply when all of it is a function call written as code (BFCL's and Python's style), which
 * small models write for tools (a helper's try of the bridge did, and the episode ended as a text
 * reply with reward 0); null for anything else, prose with a call in it included.
 */
function codeStyleCall(content: string): string | null {
  const fenced = /^```[ \t]*(?:python|py|tool_code|tool|)[ \t]*\n([\s\S]*?)\n?```$/i.exec(content);
  const body = (fenced ? fenced[1]! : content).trim();
  return CODE_CALL_RE.test(body) ? body : null;
}

/**
 * Raw assistant text: optional `<think>…</think>`, then text and/or tool calls in any format small
 * and large models actually emit — `<tool_call>{…}</tool_call>` blocks (Qwen/Hermes), ```json
 * fences, a bare JSON call or list of calls, or a `{"name": …}` object inside prose. Text that looks
 * like a call but does not parse is `invalid` (the agent is told why and can retry), never a reply.
 */
export function parseAssistantText(text: string, step: number): ParsedAction {
  let reasoning: string | undefined;
  let rest = text.replace(THINK_RE, (_, inner: string) => {
    reasoning = (reasoning ? reasoning + "\n" : "") + inner.trim();
    return "";
  });
  if (/<think>/i.test(rest)) return invalid("unclosed <think> tag");
  rest = rest.replace(/<\/think>/gi, ""); // templates that prefill <think> leave only the close tag
  const blocks: unknown[] = [];
  const pyBlocks: unknown[] = [];
  let bad: string | undefined;
  rest = rest.replace(TOOL_CALL_RE, (_, body: string) => {
    const fenced = /^```[A-Za-z]*\s*([\s\S]*?)\s*```$/.exec(body.trim());
    const text = fenced ? fenced[1]! : body;
    const p = parseJson(text);
    if (p.ok) {
      blocks.push(p.value);
      try {
        pyBlocks.push(pyParse(text));
      } catch {
        pyBlocks.push(undefined);
      }
    } else bad ??= `a <tool_call> block is not valid JSON: ${p.error}`;
    return "";
  });
  if (bad) return invalid(bad);
  if (/<\/?tool_call>/i.test(rest)) return invalid("unclosed <tool_call> tag");
  const content = rest.trim();
  if (blocks.length) {
    const flat = flattenCalls(blocks);
    // Python-typed copies line up with the calls only when no block held a list of calls
    return fromCallList(flat, step, content, reasoning, flat.length === blocks.length ? pyBlocks : undefined);
  }
  if (!content) return invalid("the reply is empty");
  const found = fencedCalls(content) ?? bareCalls(content);
  if (!found) {
    const call = codeStyleCall(content);
    if (call) return invalid(`the reply is a function call written as code (${call.length > 80 ? `${call.slice(0, 80)}…` : call}), not as JSON`);
    return { kind: "text", text: content, reasoning };
  }
  if ("error" in found) return invalid(found.error);
  return fromCallList(flattenCalls(found.values), step, found.text, reasoning);
}

/**
 * Normalises every action shape the env accepts: a tool call (`{name, arguments}` and its common
 * variants, or OpenAI's `tool_call`), a list of them, an OpenAI assistant message (`{role, content,
 * tool_calls}`), or raw assistant text (see parseAssistantText). Never throws: an unreadable action
 * is `invalid`.
 */
export function parseAction(action: unknown, step: number): ParsedAction {
  if (typeof action === "string") return parseAssistantText(action, step);
  // EnvRuntime refuses such an action before it reaches an engine; an Episode driven directly gets this
  if (valueShape(action, Number.MAX_SAFE_INTEGER, MAX_ACTION_DEPTH).tooDeep) return invalid(tooDeepMessage("the action"));
  if (Array.isArray(action)) return fromCallList(action, step);
  if (!isRecord(action)) return invalid("an action is a tool call, a list of tool calls, an assistant message or text");
  if ("tool_calls" in action || "role" in action || ("content" in action && callName(callBody(action)) === undefined)) {
    const content = typeof action.content === "string" ? action.content : "";
    const reasoning = typeof action.reasoning_content === "string" ? action.reasoning_content : undefined;
    const list = Array.isArray(action.tool_calls) ? action.tool_calls : [];
    if (list.length === 0) {
      if (!content.trim()) return invalid("the assistant message has neither content nor tool calls");
      const parsed = parseAssistantText(content, step);
      return reasoning && parsed.kind !== "invalid" ? { ...parsed, reasoning } : parsed;
    }
    return fromCallList(list, step, content.trim(), reasoning);
  }
  return fromCallList([action], step);
}
