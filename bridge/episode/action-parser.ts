import { pyJsonParse } from "../../envs/bfcl/py-json.js";

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

/**
 * Accepts `{name, arguments}` or an OpenAI tool_call `{id, type, function: {name, arguments}}`.
 * `pyRaw` is the same call read from its text with Python's number types, when it came as text.
 */
function parseCall(raw: unknown, index: number, step: number, pyRaw?: unknown): ParsedCall | string {
  if (!isRecord(raw)) return `tool call ${index} is not an object`;
  const fn = isRecord(raw.function) ? raw.function : raw;
  if (typeof fn.name !== "string" || fn.name === "") return `tool call ${index} has no function name`;
  const pyFn = isRecord(pyRaw) ? (isRecord(pyRaw.function) ? pyRaw.function : pyRaw) : undefined;
  const { args, error, py } = parseArguments(fn.arguments, pyFn?.arguments);
  const id = typeof raw.id === "string" && raw.id ? raw.id : `call_${step}_${index}`;
  if (error) return { id, name: fn.name, arguments: args, argumentsError: error };
  return py ? { id, name: fn.name, arguments: args, pyArguments: py } : { id, name: fn.name, arguments: args };
}

function fromCallList(list: unknown[], step: number, text = "", reasoning?: string, pyList?: unknown[]): ParsedAction {
  const calls: ParsedCall[] = [];
  for (const [i, raw] of list.entries()) {
    const c = parseCall(raw, i, step, pyList?.[i]);
    if (typeof c === "string") return { kind: "invalid", message: c };
    calls.push(c);
  }
  if (calls.length === 0) return text ? { kind: "text", text, reasoning } : { kind: "invalid", message: "the action has no tool calls and no text" };
  return { kind: "tool_calls", calls, text, reasoning };
}

/**
 * Raw assistant text in the Qwen3/Hermes format: optional `<think>…</think>`, then text and/or any
 * number of `<tool_call>{"name": …, "arguments": …}</tool_call>` blocks.
 */
export function parseAssistantText(text: string, step: number): ParsedAction {
  let reasoning: string | undefined;
  let rest = text.replace(THINK_RE, (_, inner: string) => {
    reasoning = (reasoning ? reasoning + "\n" : "") + inner.trim();
    return "";
  });
  if (/<think>/i.test(rest)) return { kind: "invalid", message: "unclosed <think> tag" };
  rest = rest.replace(/<\/think>/gi, ""); // templates that prefill <think> leave only the close tag
  const blocks: unknown[] = [];
  const pyBlocks: unknown[] = [];
  let bad: string | undefined;
  rest = rest.replace(TOOL_CALL_RE, (_, body: string) => {
    try {
      blocks.push(JSON.parse(body));
      pyBlocks.push(pyParse(body));
    } catch (e) {
      bad ??= `a <tool_call> block is not valid JSON: ${(e as Error).message}`;
    }
    return "";
  });
  if (bad) return { kind: "invalid", message: bad };
  if (/<tool_call>/i.test(rest)) return { kind: "invalid", message: "unclosed <tool_call> tag" };
  const content = rest.trim();
  if (blocks.length) return fromCallList(blocks, step, content, reasoning, pyBlocks);
  if (!content) return { kind: "invalid", message: "the reply is empty" };
  return { kind: "text", text: content, reasoning };
}

/**
 * Normalises every action shape the env accepts: a tool call (`{name, arguments}` or OpenAI's
 * `tool_call`), a list of them, an OpenAI assistant message (`{role, content, tool_calls}`), or raw
 * assistant text with Qwen3/Hermes tags. Never throws: an unreadable action is `invalid`.
 */
export function parseAction(action: unknown, step: number): ParsedAction {
  if (typeof action === "string") return parseAssistantText(action, step);
  if (Array.isArray(action)) return fromCallList(action, step);
  if (!isRecord(action)) return { kind: "invalid", message: "an action is a tool call, a list of tool calls, an assistant message or text" };
  if ("tool_calls" in action || "role" in action || ("content" in action && !("name" in action) && !("function" in action))) {
    const content = typeof action.content === "string" ? action.content : "";
    const reasoning = typeof action.reasoning_content === "string" ? action.reasoning_content : undefined;
    const list = Array.isArray(action.tool_calls) ? action.tool_calls : [];
    if (list.length === 0) {
      if (!content.trim()) return { kind: "invalid", message: "the assistant message has neither content nor tool calls" };
      const parsed = parseAssistantText(content, step);
      return reasoning && parsed.kind !== "invalid" ? { ...parsed, reasoning } : parsed;
    }
    return fromCallList(list, step, content.trim(), reasoning);
  }
  return fromCallList([action], step);
}
