// What a llama.cpp server (../shared/tools/local-llm) did to real rollouts, replayed on the fixture:
// a small model's reply cut at max_tokens inside a tool call comes back as a call whose arguments are
// not JSON, and llama.cpp then refuses every later request of the episode that carries it in the
// history (HTTP 500 "Failed to parse tool call arguments as JSON"), so the episode died as an
// endpoint error, and at temperature 0 did so again on every resume.
import { mkdtempSync, readdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, test } from "vitest";
import { ModelClient, type AgentMessage } from "../../agent/model-client.js";
import { runRollout } from "../../agent/rollout.js";
import { readTrajectories } from "../../bridge/tools/record/trajectory-reader.js";
import { createLogger } from "../../bridge/fronts/zmq/logger.js";
import { Supervisor } from "../../bridge/fronts/zmq/supervisor.js";
import { FIXTURES } from "../helpers.js";
import { OpenAIFixture, type FixtureReply, type FixtureRequest, type Scripted } from "../openai-fixture.js";

const CUT_ARGS = '{"user_id": "u2", "title": "todo", "body": "call mom and then\n\n\n';

/** llama.cpp's check of the request history (common/chat.cpp func_args_not_string). */
function refusesBadHistory(r: FixtureRequest): number | null {
  for (const m of r.messages)
    for (const c of m.tool_calls ?? []) {
      try {
        JSON.parse(c.function.arguments);
      } catch {
        return 500;
      }
    }
  return null;
}

const agent: Scripted[] = [];
let fixture: OpenAIFixture;
beforeAll(async () => {
  fixture = await OpenAIFixture.start((r) => refusesBadHistory(r) ?? agent.shift() ?? 500);
});
afterAll(() => fixture.close());

const cutCall: FixtureReply = { content: null, tool_calls: [{ id: "c1", type: "function", function: { name: "add_note", arguments: CUT_ARGS } }], finish_reason: "length" };

test("a tool call with arguments that are not JSON goes back as a JSON string (servers that parse the history accept it); the caller's messages are untouched", async () => {
  agent.push("ok");
  const model = new ModelClient({ baseURL: fixture.baseURL, apiKey: "k", model: "m", maxRetries: 0 });
  const messages: AgentMessage[] = [
    { role: "user", content: "add a note" },
    { role: "assistant", content: null, tool_calls: [cutCall.tool_calls![0]!, { id: "c2", type: "function", function: { name: "list_notes", arguments: '{"user_id": "u2"}' } }] },
    { role: "tool", tool_call_id: "c1", name: "add_note", content: '{"error": {"type": "invalid_arguments"}}' },
    { role: "tool", tool_call_id: "c2", name: "list_notes", content: "[]" },
  ];
  const before = JSON.stringify(messages);
  const reply = await model.chat(messages, [], "s");
  expect(reply.message.content).toBe("ok");
  const sent = fixture.requests.at(-1)!.messages[1]!.tool_calls!;
  expect(JSON.parse(sent[0]!.function.arguments)).toBe(CUT_ARGS); // the text the model wrote, as a JSON string
  expect(sent[1]!.function.arguments).toBe('{"user_id": "u2"}'); // valid calls go back as they were
  expect(JSON.stringify(messages)).toBe(before);
});

test("a rollout against a server that refuses unparseable call arguments in the history: the cut call is an invalid_tool_call, the episode goes on and is scored", async () => {
  const out = mkdtempSync(join(tmpdir(), "envscaler-llamacpp-"));
  const record = join(out, "trajectories");
  const supervisor = new Supervisor({ envs: [FIXTURES], endpoint: "tcp://127.0.0.1:*", replicas: 1, recordDir: record, logger: createLogger("test-llamacpp") });
  const { endpoints } = await supervisor.start();
  try {
    agent.push(cutCall, { content: null, tool_calls: [{ id: "c2", type: "function", function: { name: "add_note", arguments: '{"user_id": "u2", "title": "todo", "body": "call mom"}' } }] }, "Task Completed");
    const before = fixture.requests.length;
    const run = await runRollout({
      endpoints, scenarios: ["notes-1"], trials: 1, seed: 0, concurrency: 1, agent: { agentMode: "fc" },
      model: { baseURL: fixture.baseURL, apiKey: "k", model: "m", timeoutMs: 5000, maxRetries: 2, backoffMs: 5 },
      out, trajectoriesDir: record, settings: { benchmark: null, user: null },
    });
    expect(agent).toEqual([]);
    expect(fixture.requests.length - before).toBe(3); // no request refused, none retried
    const e = run.results.episodes[0]!;
    expect(e).toMatchObject({ steps: 3, end_reason: "text_reply", failures: ["invalid_tool_call"] });
    expect(e.reward).toBeGreaterThan(0);
    expect(run.results.failures.endpoint_error.episodes).toBe(0);
    // the trajectory keeps what the model wrote
    const traj = readdirSync(record).flatMap((f) => readTrajectories(join(record, f)).episodes).find((x) => x.start.episode_id === e.episode_id)!;
    expect(JSON.stringify(traj.steps[0]!.action)).toContain(JSON.stringify(CUT_ARGS).slice(1, -1));
  } finally {
    await supervisor.stop();
  }
});
