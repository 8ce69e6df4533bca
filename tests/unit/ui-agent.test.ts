// A model playing a scenario from the playground, through the agent loop `envscaler rollout` uses,
// streamed as server-sent events; against the local OpenAI fixture with scripted replies.
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { ModelAgentPlayer } from "../../agent/ui-agent-player.js";
import type { AgentPlayer } from "../../bridge/fronts/ui/agent-player.js";
import { UiServer } from "../../bridge/fronts/ui/ui-server.js";
import { FIXTURES } from "../helpers.js";
import { OpenAIFixture, type Scripted } from "../openai-fixture.js";

type Json = Record<string, any>;
let ui: UiServer;
const fixtures: OpenAIFixture[] = [];

async function call(path: string, body?: unknown): Promise<{ status: number; body: Json }> {
  const res = await fetch(new URL(path, ui.url), body === undefined ? {} : { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
  return { status: res.status, body: (await res.json()) as Json };
}
const post = async (path: string, body: unknown) => {
  const r = await call(path, body);
  if (r.status !== 200) throw new Error(`${path}: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body;
};

/** The run's event stream read to its end (the server ends it after the `end` event), with each event's id. */
async function events(runId: string, headers: Record<string, string> = {}): Promise<{ id: number; e: Json }[]> {
  const res = await fetch(new URL(`/api/agent/events?run_id=${runId}`, ui.url), { headers });
  expect(res.headers.get("content-type")).toMatch(/^text\/event-stream/);
  const text = await res.text();
  return text
    .split("\n\n")
    .filter((b) => b.trim())
    .map((b) => {
      const lines = b.split("\n");
      return { id: Number(lines.find((l) => l.startsWith("id: "))!.slice(4)), e: JSON.parse(lines.find((l) => l.startsWith("data: "))!.slice(6)) as Json };
    });
}

async function model(script: Scripted[]): Promise<OpenAIFixture> {
  const f = await OpenAIFixture.start(script);
  fixtures.push(f);
  return f;
}

const ADD = { id: "call_1", type: "function" as const, function: { name: "add_note", arguments: JSON.stringify({ user_id: "u2", title: "todo", body: "call mom" }) } };
// a model served without a tool-call parser writes its call as fenced JSON in the text
const FENCED = 'Now the old note.\n```json\n{"name": "delete_note", "arguments": {"note_id": "n1"}}\n```';

beforeAll(async () => {
  ui = await UiServer.start({ envs: [FIXTURES], trajectories: join(mkdtempSync(join(tmpdir(), "envscaler-ui-agent-")), "none"), port: 0, agentPlayer: new ModelAgentPlayer() });
});

afterAll(async () => {
  await ui?.close();
  for (const f of fixtures) await f.close();
});

describe("a model plays from the UI", () => {
  test("fc mode: a tool call, a fenced-JSON call in the text, the closing reply; every turn streamed with its diff and live score", async () => {
    const m = await model([{ tool_calls: [ADD] }, FENCED, "Task Completed"]);
    const { run_id } = await post("/api/agent/start", { page: "a", scenario_id: "notes-1", seed: 3, base_url: m.baseURL, model: "fixture-model", agent_mode: "fc", timeout_s: 30 });
    expect(run_id).toMatch(/^run-/);
    const evs = await events(run_id);
    expect(evs.map((x) => x.id)).toEqual(evs.map((_, i) => i));
    const types = evs.map((x) => x.e.type);
    expect(types).toEqual(["start", "thinking", "model", "step", "thinking", "model", "step", "thinking", "model", "step", "end"]);
    const [start, , , s1, , , s2, , , s3, end] = evs.map((x) => x.e) as [Json, Json, Json, Json, Json, Json, Json, Json, Json, Json, Json];
    expect(start).toMatchObject({ info: { scenario_id: "notes-1", seed: 3 }, score: { how: "copy", reward: 0 }, undo: { steps: [] } });
    // the model's turns as the loop sent them: the assistant message (fc mode), with the structured call
    expect(s1.action).toMatchObject({ role: "assistant", tool_calls: [{ function: { name: "add_note" } }] });
    expect(s1.result.info.diff).toEqual(expect.arrayContaining([expect.objectContaining({ op: "add", path: expect.stringMatching(/^\/notes\//) })]));
    expect(s1.score.reward_info.checks.map((c: Json) => c.passed)).toEqual([true, false, false]);
    expect(s2.action.content).toBe(FENCED);
    expect(s2.result.info.tool_calls[0]).toMatchObject({ name: "delete_note" });
    expect(s2.score).toMatchObject({ reward: 1, how: "copy" });
    expect(s3.result).toMatchObject({ terminated: true, reward: 1, info: { end_reason: "text_reply" } });
    expect(end).toMatchObject({ type: "end", stopped: false, outcome: { reward: 1, success: true, end_reason: "text_reply", steps: 3, failures: [], model_calls: 3 } });

    // what the endpoint was sent: the rollout's system prompt and tools, then each result answering its call
    expect(m.requests[0]!.model).toBe("fixture-model");
    expect(m.requests[0]!.tools).toHaveLength(ui.runtime.registry.scenario("notes-1")!.bundle.manifest.tools.length);
    expect(m.requests[0]!.messages[0]!.content).toMatch(/# Environment Information/);
    expect(m.requests[1]!.messages.at(-1)).toMatchObject({ role: "tool", tool_call_id: "call_1" });
    expect(m.requests[2]!.messages.at(-1)!.content).toMatch(/<tool_response>/);

    // the model's episode is a play episode of the page: undo the closing reply and play on by hand
    const u = await post("/api/play/undo", { episode_id: start.episode_id });
    expect(u).toMatchObject({ step: 2, score: { reward: 1 } });
    expect((await post("/api/play/step", { episode_id: start.episode_id, action: "Task Completed" })).result.terminated).toBe(true);

    // a page that reconnects gets the events after the last one it saw (EventSource sends Last-Event-ID)
    const rest = await events(run_id, { "last-event-id": "8" });
    expect(rest.map((x) => [x.id, x.e.type])).toEqual([[9, "step"], [10, "end"]]);
    await post("/api/play/close-page", { page: "a" });
  });

  test("prompt mode: the tools go in the system prompt and the model writes <tool_call> text", async () => {
    const m = await model(['<tool_call>{"name": "delete_note", "arguments": {"note_id": "n1"}}</tool_call>', "Task Completed"]);
    const { run_id } = await post("/api/agent/start", { page: "a", scenario_id: "notes-1", seed: 4, base_url: m.baseURL, model: "m", agent_mode: "prompt", timeout_s: 30 });
    const evs = (await events(run_id)).map((x) => x.e);
    expect(m.requests[0]!.tools).toBeUndefined();
    expect(m.requests[0]!.messages[0]!.content).toMatch(/<tools>/);
    expect(evs.find((e) => e.type === "step")!.result.info.diff).toEqual([expect.objectContaining({ op: "remove", path: "/notes/n1" })]);
    expect(evs.at(-1)).toMatchObject({ type: "end", outcome: { end_reason: "text_reply", steps: 2 } });
    await post("/api/play/close-page", { page: "a" });
  });

  test("a hung endpoint: the call times out, the page is told endpoint_error, and the episode is scored as it stands", async () => {
    const m = await model([{ hang: true }]);
    const { run_id } = await post("/api/agent/start", { page: "h", scenario_id: "notes-1", seed: 1, base_url: m.baseURL, model: "m", agent_mode: "fc", timeout_s: 1, max_retries: 0 });
    const evs = (await events(run_id)).map((x) => x.e);
    expect(evs.map((e) => e.type)).toEqual(["start", "thinking", "step", "end"]);
    expect(evs[2]).toMatchObject({ finish: true, result: { terminated: true, info: { end_reason: "client" } } });
    expect(evs[3]).toMatchObject({ stopped: false, outcome: { success: false, failures: [{ kind: "endpoint_error", step: 1, message: expect.stringMatching(/timed out/i), attempts: 1 }] } });
    // the finish can be undone: the episode opens again for a person to play
    expect((await post("/api/play/undo", { episode_id: evs[0]!.episode_id })).step).toBe(0);
    await post("/api/play/close-page", { page: "h" });
  });

  test("stop: the call in flight is cancelled and the episode stays open to play on by hand", async () => {
    const m = await model([{ tool_calls: [ADD] }, { hang: true }]);
    const { run_id } = await post("/api/agent/start", { page: "s", scenario_id: "notes-1", seed: 2, base_url: m.baseURL, model: "m", agent_mode: "fc", timeout_s: 300 });
    for (let i = 0; i < 1200 && m.requests.length < 2; i++) await new Promise((r) => setTimeout(r, 25));
    expect(m.requests).toHaveLength(2);
    const stream = events(run_id);
    expect(await post("/api/agent/stop", { run_id })).toEqual({ stopped: true });
    const evs = (await stream).map((x) => x.e);
    expect(evs.map((e) => e.type)).toEqual(["start", "thinking", "model", "step", "thinking", "end"]);
    expect(evs.at(-1)).toMatchObject({ stopped: true, outcome: { steps: 1, failures: [] } });
    const id = evs[0]!.episode_id;
    const on = await post("/api/play/step", { episode_id: id, action: { name: "delete_note", arguments: { note_id: "n1" } } });
    expect(on.result.info.step).toBe(2);
    expect(on.score.reward).toBe(1);
    expect(await post("/api/agent/stop", { run_id })).toEqual({ stopped: false });
    await post("/api/play/close-page", { page: "s" });
  });

  test("hand steps are refused while a model plays the episode", async () => {
    const m = await model([{ hang: true }]);
    const { run_id } = await post("/api/agent/start", { page: "b", scenario_id: "notes-1", seed: 2, base_url: m.baseURL, model: "m", agent_mode: "fc", timeout_s: 300 });
    for (let i = 0; i < 1200 && m.requests.length < 1; i++) await new Promise((r) => setTimeout(r, 25));
    const res = await fetch(new URL(`/api/agent/events?run_id=${run_id}`, ui.url));
    const reader = res.body!.getReader();
    const first = new TextDecoder().decode((await reader.read()).value);
    await reader.cancel();
    const start = JSON.parse(first.split("\n").find((l) => l.startsWith("data: "))!.slice(6)) as Json;
    expect(start.type).toBe("start");
    for (const [path, body] of [["/api/play/step", { action: "hi" }], ["/api/play/undo", {}], ["/api/play/branch", {}], ["/api/play/finish", {}]] as const) {
      expect(await call(path, { episode_id: start.episode_id, ...body }), path).toMatchObject({ status: 409, body: { error: { code: "episode_busy" } } });
    }
    await post("/api/agent/stop", { run_id });
    expect((await post("/api/play/branch", { episode_id: start.episode_id })).step).toBe(0);
    // closing the page stops its runs and closes their episodes
    expect((await post("/api/play/close-page", { page: "b" })).closed).toBe(2);
  });

  test("bad input is a typed 4xx, before anything runs", async () => {
    const ok = { page: "x", scenario_id: "notes-1", base_url: "http://127.0.0.1:9/v1", model: "m", agent_mode: "fc" };
    const bad = async (patch: Json) => (await call("/api/agent/start", { ...ok, ...patch })).body.error;
    expect(await bad({ base_url: "ftp://example.com" })).toMatchObject({ code: "bad_request", message: expect.stringMatching(/base_url/) });
    expect(await bad({ base_url: "not a url" })).toMatchObject({ code: "bad_request" });
    expect(await bad({ agent_mode: "telepathy" })).toMatchObject({ code: "bad_request", message: expect.stringMatching(/agent_mode/) });
    expect(await bad({ model: "" })).toMatchObject({ code: "bad_request", message: "model must be a non-empty string" });
    expect(await bad({ timeout_s: 0 })).toMatchObject({ code: "bad_request", message: expect.stringMatching(/timeout_s/) });
    expect(await bad({ max_steps: 1.5 })).toMatchObject({ code: "bad_request", message: expect.stringMatching(/max_steps/) });
    expect(await bad({ seed: -1 })).toMatchObject({ code: "bad_request" });
    expect(await call("/api/agent/start", { ...ok, scenario_id: "nope" })).toMatchObject({ status: 404, body: { error: { code: "unknown_scenario" } } });
    expect(await call("/api/agent/events?run_id=run-nope")).toMatchObject({ status: 404, body: { error: { code: "unknown_run" } } });
    expect(await call("/api/agent/stop", { run_id: "run-nope" })).toMatchObject({ status: 404, body: { error: { code: "unknown_run" } } });
    expect(ui.play.count()).toBe(0);
  });

  test("an endpoint that refuses the connection ends the run with endpoint_error; the app goes on", async () => {
    const { run_id } = await post("/api/agent/start", { page: "r", scenario_id: "notes-1", seed: 1, base_url: "http://127.0.0.1:9/v1", model: "m", agent_mode: "fc", timeout_s: 5, max_retries: 0 });
    const end = (await events(run_id)).at(-1)!.e;
    expect(end.outcome.failures).toEqual([expect.objectContaining({ kind: "endpoint_error", message: expect.stringMatching(/connection/i) })]);
    expect((await call("/api/info")).body.agent.running).toBe(0);
    await post("/api/play/close-page", { page: "r" });
  });
  test("a conversation: the model talks to the simulated user through the loop, live-scored, until the user stops", async () => {
    const user = await model(["# Reply:\nHi, how many notes do I have? I'm u3.", "# Reply:\nThanks! ###STOP###"]);
    const add = { id: "c1", type: "function" as const, function: { name: "add_note", arguments: JSON.stringify({ user_id: "u3", title: "x", body: "y" }) } };
    const m = await model([{ tool_calls: [add] }, "You have 1 note; I added 'x' for you."]);
    const conv = await UiServer.start({ envs: [FIXTURES], trajectories: join(mkdtempSync(join(tmpdir(), "envscaler-ui-agent-")), "none"), port: 0, agentPlayer: new ModelAgentPlayer(), user: { baseURL: user.baseURL, apiKey: "x", model: "u", maxRetries: 0 } });
    const prev = ui;
    ui = conv;
    try {
      const { run_id } = await post("/api/agent/start", { page: "c", scenario_id: "notes-2", seed: 1, base_url: m.baseURL, model: "m", agent_mode: "fc", timeout_s: 30 });
      const evs = (await events(run_id)).map((x) => x.e);
      expect(evs[0]!.observation.content).toBe("Hi, how many notes do I have? I'm u3.");
      const steps = evs.filter((e) => e.type === "step");
      expect(steps[0]!.score.reward_info.checks.map((c: Json) => c.passed)).toEqual([true, false]);
      expect(steps[1]!.result).toMatchObject({ terminated: true, reward: 1, info: { end_reason: "user_stop" } });
      expect(evs.at(-1)).toMatchObject({ type: "end", outcome: { reward: 1, success: true, end_reason: "user_stop", steps: 2, failures: [] } });
      // the model read the user's opening words; the user was asked once per agent reply (and once to open)
      expect(m.requests[0]!.messages[1]).toMatchObject({ role: "user", content: "Hi, how many notes do I have? I'm u3." });
      expect(user.requests).toHaveLength(2);
    } finally {
      ui = prev;
      await conv.close();
    }
  });
});

describe("the UI plays agents only through the AgentPlayer it is given", () => {
  test("any player can play the page's episode (here a scripted one, no model): its steps stream and its outcome ends the run", async () => {
    const seen: string[] = [];
    const scripted: AgentPlayer = {
      async play(episode, game, hooks) {
        seen.push(`${game.scenario_id}@${game.seed}`);
        const r = (await episode("reset", { scenario_id: game.scenario_id, seed: game.seed })) as { session_id: string };
        hooks.onThinking(1);
        hooks.onReply(1, { latency_ms: 0, attempts: 1, usage: { prompt_tokens: 0, completion_tokens: 0 } });
        await episode("step", { action: "Task Completed" });
        return { episode_id: r.session_id, reward: 0.5, success: false, end_reason: "scripted", steps: 1, failures: [], usage: { prompt_tokens: 0, completion_tokens: 0 }, model_calls: 0, model_ms: 0, wall_ms: 0 };
      },
    };
    const own = await UiServer.start({ envs: [FIXTURES], trajectories: join(mkdtempSync(join(tmpdir(), "envscaler-ui-agent-")), "none"), port: 0, agentPlayer: scripted });
    try {
      const res = await fetch(new URL("/api/agent/start", own.url), { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ page: "p", scenario_id: "notes-1", seed: 9, base_url: "http://127.0.0.1:9/v1", model: "none", timeout_s: 5 }) });
      const { run_id } = (await res.json()) as { run_id: string };
      const text = await (await fetch(new URL(`/api/agent/events?run_id=${run_id}`, own.url))).text();
      const evs = text.split("\n\n").filter((b) => b.trim()).map((b) => JSON.parse(b.split("\n").find((l) => l.startsWith("data: "))!.slice(6)) as Json);
      expect(seen).toEqual(["notes-1@9"]);
      expect(evs.map((e) => e.type)).toEqual(["start", "thinking", "model", "step", "end"]);
      expect(evs.at(-1)).toMatchObject({ stopped: false, outcome: { reward: 0.5, end_reason: "scripted" } });
    } finally {
      await own.close();
    }
  });

  test("a UI started without a player refuses the agent form with a typed error", async () => {
    const bare = await UiServer.start({ envs: [FIXTURES], trajectories: join(mkdtempSync(join(tmpdir(), "envscaler-ui-agent-")), "none"), port: 0 });
    try {
      const res = await fetch(new URL("/api/agent/start", bare.url), { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ page: "p", scenario_id: "notes-1", base_url: "http://127.0.0.1:9/v1", model: "none" }) });
      expect(res.status).toBe(501);
      expect(await res.json()).toMatchObject({ error: { code: "no_agent" } });
    } finally {
      await bare.close();
    }
  });
});
