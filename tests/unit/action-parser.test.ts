import { expect, test } from "vitest";
import { parseAction } from "../../bridge/core/episode/action-parser.js";

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

// The shapes below are what real models wrote (Qwen2.5-Coder 0.5B/1.5B on llama.cpp, issue 14),
// plus the other common formats small models use. Each must become a tool call, never a reply.
const calls = (a: ReturnType<typeof parseAction>) => (a.kind === "tool_calls" ? a.calls.map((c) => ({ name: c.name, arguments: c.arguments, ...(c.argumentsError ? { argumentsError: c.argumentsError } : {}) })) : a);

test("fenced JSON calls, with and without the json tag, on one line or several, with prose around", () => {
  const want = [{ name: "search_books", arguments: { title: "Dune" } }];
  expect(calls(parseAction('```json\n{"name": "search_books", "arguments": {"title": "Dune"}}\n```', 1))).toEqual(want);
  expect(calls(parseAction('```json {"name": "search_books", "arguments": {"title": "Dune"}}```', 1))).toEqual(want);
  expect(calls(parseAction('```\n{"name": "search_books", "arguments": {"title": "Dune"}}\n```', 1))).toEqual(want);
  const withProse = parseAction('I will look the book up.\n```json\n{\n  "name": "search_books",\n  "arguments": {\n    "title": "Dune"\n  }\n}\n```', 1);
  expect(withProse).toMatchObject({ kind: "tool_calls", text: "I will look the book up." });
  expect(calls(withProse)).toEqual(want);
  // two fences are two calls, in order
  expect(calls(parseAction('```json\n{"name": "a", "arguments": {}}\n```\nthen\n```json\n{"name": "b", "arguments": {"x": 1}}\n```', 1))).toEqual([
    { name: "a", arguments: {} },
    { name: "b", arguments: { x: 1 } },
  ]);
});

test("bare JSON calls, JSON lists of calls, and a call after a sentence", () => {
  expect(calls(parseAction('{"name": "get_user", "arguments": {"user_id": "u1"}}', 1))).toEqual([{ name: "get_user", arguments: { user_id: "u1" } }]);
  expect(calls(parseAction('[{"name": "a", "arguments": {"k": 1}}, {"name": "b", "arguments": {}}]', 1))).toEqual([
    { name: "a", arguments: { k: 1 } },
    { name: "b", arguments: {} },
  ]);
  expect(calls(parseAction('```json\n[{"name": "a", "arguments": {}}, {"name": "b", "arguments": {}}]\n```', 1))).toEqual([
    { name: "a", arguments: {} },
    { name: "b", arguments: {} },
  ]);
  const inProse = parseAction('Sure, let me check that. {"name": "get_user", "arguments": {"user_id": "u1"}} One moment.', 1);
  expect(inProse).toMatchObject({ kind: "tool_calls", text: "Sure, let me check that.  One moment." });
  expect(calls(inProse)).toEqual([{ name: "get_user", arguments: { user_id: "u1" } }]);
  expect(calls(parseAction('{"tool_calls": [{"type": "function", "function": {"name": "a", "arguments": "{\\"k\\": 2}"}}]}', 1))).toEqual([{ name: "a", arguments: { k: 2 } }]);
});

test("key variants real models emit: tool/tool_name/function, parameters/args/input, arguments as a JSON string", () => {
  const want = [{ name: "get_weather", arguments: { city: "Tokyo" } }];
  expect(calls(parseAction('{"tool": "get_weather", "arguments": {"city": "Tokyo"}}', 1))).toEqual(want);
  expect(calls(parseAction('{"name": "get_weather", "parameters": {"city": "Tokyo"}}', 1))).toEqual(want);
  expect(calls(parseAction('{"tool_name": "get_weather", "args": {"city": "Tokyo"}}', 1))).toEqual(want);
  expect(calls(parseAction('{"function": "get_weather", "input": {"city": "Tokyo"}}', 1))).toEqual(want);
  expect(calls(parseAction('{"name": "get_weather", "arguments": "{\\"city\\": \\"Tokyo\\"}"}', 1))).toEqual(want);
  expect(calls(parseAction('{"function_call": {"name": "get_weather", "arguments": "{\\"city\\":\\"Tokyo\\"}"}}', 1))).toEqual(want);
  expect(calls(parseAction('{"action": "get_weather", "action_input": {"city": "Tokyo"}}', 1))).toEqual(want);
  // the same variants as structured actions (not text)
  expect(calls(parseAction({ name: "get_weather", parameters: { city: "Tokyo" } }, 1))).toEqual(want);
  expect(calls(parseAction({ tool: "get_weather", arguments: '{"city": "Tokyo"}' }, 1))).toEqual(want);
  // an assistant message whose content holds the fenced call (llama.cpp without a tool parser)
  expect(calls(parseAction({ role: "assistant", content: '```json\n{"name": "get_weather", "arguments": {"city": "Tokyo"}}\n```' }, 1))).toEqual(want);
});

test("<tool_call> with and without <think>, with a fenced body, and OpenAI tool_calls", () => {
  expect(calls(parseAction('<think>\nI need the weather.\n</think>\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>', 1))).toEqual([{ name: "get_weather", arguments: { city: "Paris" } }]);
  expect(calls(parseAction('<tool_call>\n```json\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n```\n</tool_call>', 1))).toEqual([{ name: "get_weather", arguments: { city: "Paris" } }]);
  expect(calls(parseAction('<think>plan</think>```json\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n```', 1))).toEqual([{ name: "get_weather", arguments: { city: "Paris" } }]);
  // llama.cpp's reply with its tool parser on: empty content, tool_calls with pretty-printed arguments
  const msg = { role: "assistant", content: "", tool_calls: [{ id: "call_x", type: "function", function: { name: "get_weather", arguments: '{\n  "city": "Paris"\n}' } }] };
  expect(parseAction(msg, 1)).toMatchObject({ kind: "tool_calls", calls: [{ id: "call_x", name: "get_weather", arguments: { city: "Paris" } }] });
});

test("text that looks like a failed tool call is invalid (with the format hint), never a reply", () => {
  const cases: [string, RegExp][] = [
    ['```json\n{"name": "search_books", "arguments": {"title": "Dune"}\n```', /```json block is not valid JSON/],
    ['```json\n{"name": "search_books", "arguments": {"title": "Du', /not closed/], // cut at the token cap
    ['```json\n{"answer": 42}\n```', /holds JSON that is not a tool call/],
    ['{"answer": 42}', /JSON but not a tool call/],
    ['{"name": "search_books", "arguments": {"title": "Dune"}', /never closes/],
    ["{'name': 'search_books', 'arguments': {}}", /not valid JSON/],
    ['Let me search. {"name": "search_books", "arguments": {"title": }}', /not valid JSON/],
    ["<tool_call>{bad json}</tool_call>", /<tool_call> block is not valid JSON/],
    ['{"name": "search_books"}</tool_call>', /unclosed <tool_call>/],
    // calls written as code (Python / BFCL style): the model meant a call, so it can correct the format
    ['get_book(book_id="B001")', /function call written as code \(get_book\(book_id="B001"\)\), not as JSON/],
    ['[get_book(book_id="B001"), get_member(member_id="M013")]', /function call written as code/],
    ['```python\nlibrary.get_book(book_id="B001")\n```', /function call written as code \(library\.get_book/],
  ];
  for (const [text, reason] of cases) {
    const a = parseAction(text, 1);
    expect(a, text).toMatchObject({ kind: "invalid", message: reason });
    expect(a.kind === "invalid" && a.message, text).toContain('{"name": "<tool>", "arguments": {...}}');
  }
});

test("plain natural-language replies stay text, including ones that quote data or code", () => {
  for (const text of [
    "Your book is due on Friday.",
    'The record says {"name": "Ann", "age": 3}, is that you?',
    "Run this:\n```python\nprint({'a': 1})\n```",
    "Use the format {name} {surname} please.",
    "Call get_book(book_id) with the id, then tell me.",
    "Done (the loan is returned).",
  ]) expect(parseAction(text, 1), text).toEqual({ kind: "text", text, reasoning: undefined });
});
