import { expect, test } from "vitest";
import { parseAction } from "../../bridge/episode/action-parser.js";

test("a {name, arguments} call", () => {
  expect(parseAction({ name: "get", arguments: { id: "1" } }, 1)).toEqual({ kind: "tool_calls", calls: [{ id: "call_1_0", name: "get", arguments: { id: "1" } }], text: "", reasoning: undefined });
});

test("an OpenAI tool_call with string arguments, and a list of them", () => {
  const a = parseAction([{ id: "c1", type: "function", function: { name: "a", arguments: '{"x":1}' } }, { name: "b", arguments: "{}" }], 3);
  expect(a).toMatchObject({ kind: "tool_calls", calls: [{ id: "c1", name: "a", arguments: { x: 1 } }, { id: "call_3_1", name: "b", arguments: {} }] });
});

test("arguments that are not a JSON object are flagged on the call, not fatal", () => {
  const a = parseAction({ name: "a", arguments: "{nope" }, 1);
  expect(a.kind).toBe("tool_calls");
  expect(a.kind === "tool_calls" && a.calls[0]!.argumentsError).toMatch(/not valid JSON/);
});

test("Qwen3/Hermes text with think and several tool calls", () => {
  const text = '<think>look it up</think>\nLet me check.\n<tool_call>\n{"name": "a", "arguments": {"k": "v"}}\n</tool_call>\n<tool_call>{"name":"b","arguments":{}}</tool_call>';
  expect(parseAction(text, 2)).toMatchObject({ kind: "tool_calls", reasoning: "look it up", text: "Let me check.", calls: [{ name: "a", arguments: { k: "v" } }, { name: "b" }] });
});

test("text-only replies, with and without think", () => {
  expect(parseAction("<think>done</think>Task Completed", 1)).toEqual({ kind: "text", text: "Task Completed", reasoning: "done" });
  expect(parseAction({ role: "assistant", content: "Hello" }, 1)).toEqual({ kind: "text", text: "Hello", reasoning: undefined });
});

test("malformed text is invalid, with a reason", () => {
  expect(parseAction("<think>never closed", 1)).toMatchObject({ kind: "invalid", message: /unclosed <think>/ });
  expect(parseAction("<tool_call>{bad json}</tool_call>", 1)).toMatchObject({ kind: "invalid", message: /not valid JSON/ });
  expect(parseAction("<tool_call>{\"name\":\"a\"}", 1)).toMatchObject({ kind: "invalid", message: /unclosed <tool_call>/ });
  expect(parseAction("   ", 1)).toMatchObject({ kind: "invalid" });
  expect(parseAction(42, 1)).toMatchObject({ kind: "invalid" });
  expect(parseAction({ arguments: {} }, 1)).toMatchObject({ kind: "invalid", message: /no function name/ });
});
