// Issue 32: an action's nesting is bounded however it arrives, before anything deep is built or
// copied between threads; what cannot be handed to an engine is refused for that request only.
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { MAX_ACTION_DEPTH, jsonTextTooDeep, valueShape } from "../../bridge/core/episode/action-limits.js";
import { parseAction } from "../../bridge/core/episode/action-parser.js";
import { EnvRuntime } from "../../bridge/core/engine/env-runtime.js";
import { FIXTURES } from "../helpers.js";

const deepText = (n: number) => '{"a":'.repeat(n) + "1" + "}".repeat(n);
function deepValue(n: number): unknown {
  let v: unknown = 1;
  for (let i = 0; i < n; i++) v = { a: v };
  return v;
}

test("depth is measured without recursion, at the limit and one past it", () => {
  expect(jsonTextTooDeep(deepText(MAX_ACTION_DEPTH))).toBe(false);
  expect(jsonTextTooDeep(deepText(MAX_ACTION_DEPTH + 1))).toBe(true);
  // brackets inside strings do not count
  expect(jsonTextTooDeep(`{"a":"${"[".repeat(500)}"}`)).toBe(false);
  expect(valueShape(deepValue(MAX_ACTION_DEPTH), 1 << 20).tooDeep).toBe(false);
  expect(valueShape(deepValue(MAX_ACTION_DEPTH + 1), 1 << 20).tooDeep).toBe(true);
  expect(valueShape(deepValue(100_000), 1 << 20).tooDeep).toBe(true);
});

test("the parser refuses deep JSON in every form it reads, naming the limit", () => {
  const deep = deepText(10_000);
  const call = `{"name":"add_note","arguments":{"x":${deep}}}`;
  const asString = parseAction({ name: "add_note", arguments: `{"x":${deep}}` }, 1);
  expect(asString).toMatchObject({ kind: "tool_calls", calls: [{ name: "add_note", argumentsError: expect.stringMatching(/max_action_depth/) }] });
  for (const text of [`<tool_call>${call}</tool_call>`, "```json\n" + call + "\n```", call, `I will call it: ${call}`]) {
    const p = parseAction(text, 1);
    expect(p.kind, text.slice(0, 30)).toBe("invalid");
    expect((p as { message: string }).message).toMatch(/max_action_depth/);
  }
  expect(parseAction({ name: "add_note", arguments: deepValue(10_000) }, 1)).toMatchObject({ kind: "invalid", message: expect.stringMatching(/max_action_depth/) });
  // within the limit nothing changes
  expect(parseAction({ name: "add_note", arguments: JSON.stringify({ x: deepValue(40) }) }, 1)).toMatchObject({ kind: "tool_calls", calls: [{ name: "add_note" }] });
});

describe.each([0, 1])("EnvRuntime with %i engine workers", (workers) => {
  let rt: EnvRuntime;
  beforeAll(async () => {
    rt = await EnvRuntime.start({ envs: [FIXTURES], workers });
  });
  afterAll(async () => {
    await rt.close();
  });

  test("a deep action is refused before it reaches the engine; deep text is an observation; the episode goes on", async () => {
    const { episode_id } = await rt.reset("notes-1", 1);
    await expect(rt.step(episode_id, { name: "add_note", arguments: { x: deepValue(10_000) } })).rejects.toMatchObject({ code: "too_large", message: expect.stringMatching(/max_action_depth/) });
    const s = await rt.step(episode_id, { name: "add_note", arguments: `{"x":${deepText(10_000)}}` });
    expect(s.observation.content).toMatch(/invalid_arguments.*max_action_depth/);
    expect(s.info.step).toBe(1);
    const ok = await rt.step(episode_id, { name: "add_note", arguments: { user_id: "u2", title: "todo", body: "call mom" } });
    expect(ok.observation.content).toMatch(/"success":true/);
    await rt.closeEpisode(episode_id);
  });

  test.runIf(workers === 1)("a request that cannot be copied to the worker gets a typed error; its batch-mates run", async () => {
    const a = await rt.reset("notes-1", 2);
    const b = await rt.reset("notes-1", 3);
    // posted in the same turn: one batch to the worker, one request in it not cloneable
    const [bad, good] = await Promise.allSettled([
      rt.step(a.episode_id, { name: "add_note", arguments: { user_id: "u2", title: "x", body: "y", f: () => 1 } }),
      rt.step(b.episode_id, { name: "add_note", arguments: { user_id: "u2", title: "x", body: "y" } }),
    ]);
    expect(bad).toMatchObject({ status: "rejected", reason: { code: "bad_request", message: expect.stringMatching(/could not be handed to its engine/) } });
    expect(good).toMatchObject({ status: "fulfilled", value: { observation: { content: expect.stringMatching(/"success":true/) } } });
    // the refused episode goes on
    const after = await rt.step(a.episode_id, { name: "add_note", arguments: { user_id: "u2", title: "z", body: "y" } });
    expect(after.observation.content).toMatch(/"success":true/);
  });
});
