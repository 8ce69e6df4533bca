import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { ModelClient } from "../../agent/model-client.js";
import { passHatK } from "../../bridge/tools/record/pass-hat-k.js";
import { BridgeNotRunning, checkReachable } from "../../agent/reachability.js";
import { runRollout, type RolloutOptions, type RolloutRun } from "../../agent/rollout.js";
import { selectScenarios } from "../../agent/select-scenarios.js";
import { readSystemPromptFile, systemPrompt } from "../../agent/system-prompt.js";
import { readTrajectories } from "../../bridge/tools/record/trajectory-reader.js";
import { createLogger } from "../../bridge/fronts/zmq/logger.js";
import { Supervisor } from "../../bridge/fronts/zmq/supervisor.js";
import { rolloutWith, type RolloutArgs } from "../../cli/commands/rollout.js";
import { FIXTURES } from "../helpers.js";
import { OpenAIFixture, type FixtureReply, type FixtureRequest, type Scripted } from "../openai-fixture.js";

const tmp = () => mkdtempSync(join(tmpdir(), "envscaler-rollout-"));
const call = (id: string, name: string, args: unknown): NonNullable<FixtureReply["tool_calls"]>[number] => ({ id, type: "function", function: { name, arguments: typeof args === "string" ? args : JSON.stringify(args) } });
const calls = (...c: NonNullable<FixtureReply["tool_calls"]>): FixtureReply => ({ content: null, tool_calls: c, usage: { prompt_tokens: 100, completion_tokens: 10 } });

/** The simulated user (model "user-sim"): asks once, then stops once the agent has answered. */
function userSim(r: FixtureRequest): string {
  const answered = r.messages.filter((m) => m.role === "assistant").length;
  return answered === 0 ? "# Thought:\nI want my count.\n# Reply:\nI am Carol (u3). How many notes do I have? Please add note x with body y." : "# Thought:\nDone.\n# Reply:\n###STOP###";
}

/** The agent's replies in order (runs with concurrency 1 are sequential), the user simulator by model name. */
function scripted(agent: Scripted[]): (r: FixtureRequest) => Scripted {
  return (r) => (r.model === "user-sim" ? userSim(r) : (agent.shift() ?? 500));
}

describe("envscaler rollout against a bridge and the fixture endpoint", () => {
  let supervisor: Supervisor;
  let endpoints: string[];
  let fixture: OpenAIFixture | null = null;
  const record = join(tmp(), "trajectories");
  const agentScript: Scripted[] = [];

  beforeAll(async () => {
    fixture = await OpenAIFixture.start((r) => scripted(agentScript)(r));
    supervisor = new Supervisor({ envs: [FIXTURES], endpoint: "tcp://127.0.0.1:*", replicas: 1, user: { baseURL: fixture.baseURL, apiKey: "k", model: "user-sim" }, recordDir: record, logger: createLogger("test-rollout") });
    endpoints = (await supervisor.start()).endpoints;
  });
  afterAll(async () => {
    await supervisor?.stop();
    await fixture?.close();
  });

  const options = (out: string, over: Partial<RolloutOptions> = {}): RolloutOptions => ({
    endpoints,
    scenarios: ["notes-1", "notes-2"],
    trials: 2,
    seed: 5,
    concurrency: 1,
    agent: { agentMode: "fc" },
    model: { baseURL: fixture!.baseURL, apiKey: "k", model: "agent", backoffMs: 5, timeoutMs: 5000, maxRetries: 3 },
    out,
    trajectoriesDir: record,
    settings: { benchmark: null, user: { model: "user-sim", base_url: fixture!.baseURL } },
    ...over,
  });

  test("fc mode: every tool call in order, bad calls and unreadable replies are observations, 429/500 retried; rewards, pass^k and failures add up", async () => {
    const good = { ...calls(call("a", "add_note", { user_id: "u2", title: "todo", body: "call mom" }), call("b", "delete_note", { note_id: "n1" })), reasoning_content: "both at once" };
    agentScript.push(
      // notes-1 trial 0: malformed JSON arguments, an unknown tool, then both calls at once (parallel), then done
      calls(call("m", "add_note", '{"user_id": "u2", "title": ')),
      calls(call("u", "fly_away", {})),
      good,
      "Task Completed",
      // notes-1 trial 1: a 429 and a 500 (retried), one call, then a premature end
      429,
      500,
      calls(call("a", "add_note", { user_id: "u2", title: "todo", body: "call mom" })),
      "Task Completed",
      // notes-2 trial 0 (conversation): look up, add, answer; the user stops
      calls(call("l", "list_notes", { user_id: "u3" }), call("x", "add_note", { user_id: "u3", title: "x", body: "y" })),
      "You have 1 note. I added 'x'.",
      // notes-2 trial 1: an unclosed <tool_call> the env cannot read, then the same
      "<tool_call>{\"name\": \"list_notes\", ",
      calls(call("l", "list_notes", { user_id: "u3" }), call("x", "add_note", { user_id: "u3", title: "x", body: "y" })),
      "You have 1 note. I added 'x'.",
    );
    const before = fixture!.requests.length;
    const out = tmp();
    const run = await runRollout(options(out));
    expect(agentScript).toEqual([]);
    const r = run.results;
    const byKey = Object.fromEntries(r.episodes.map((e) => [e.key, e]));
    expect(Object.keys(byKey).sort()).toEqual(["notes-1#0", "notes-1#1", "notes-2#0", "notes-2#1"]);
    expect(byKey["notes-1#0"]).toMatchObject({ reward: 1, success: true, steps: 4, end_reason: "text_reply", failures: ["invalid_tool_call"], seed: 5 });
    expect(byKey["notes-1#1"]).toMatchObject({ success: false, end_reason: "text_reply", steps: 2, seed: 6 });
    expect(byKey["notes-1#1"]!.reward).toBeCloseTo(1 / 3);
    expect(byKey["notes-2#0"]).toMatchObject({ reward: 1, success: true, end_reason: "user_stop", failures: [] });
    expect(byKey["notes-2#1"]).toMatchObject({ reward: 1, success: true, end_reason: "user_stop", failures: ["unparseable_output"] });
    expect(r.failures.invalid_tool_call).toEqual({ episodes: 1, occurrences: 2, keys: ["notes-1#0"] });
    expect(r.failures.unparseable_output.keys).toEqual(["notes-2#1"]);
    expect(r.totals.success_rate).toBe(0.75);
    expect(r.totals.pass_hat_k).toEqual({ 1: 0.75, 2: 0.5 });
    expect(r.per_env).toEqual([expect.objectContaining({ env_id: "notes-v1", episodes: 4 })]);
    expect(r.per_scenario.map((s) => [s.scenario_id, s.successes, s.trials])).toEqual([["notes-1", 1, 2], ["notes-2", 2, 2]]);
    expect(r.totals.mean_prompt_tokens).toBeGreaterThan(0);
    expect(r.totals.model_retries).toBe(2); // the 429 and the 500

    // the agent's requests: tools sent (fc), the model's calls echoed back with one tool message per id, in order
    const agentReqs = fixture!.requests.slice(before).filter((q) => q.model === "agent");
    expect(agentReqs).toHaveLength(13); // 11 replies + the 429 and the 500
    expect(agentReqs[0]!.tools).toHaveLength(6);
    expect(agentReqs[0]!.messages[0]!.content).toMatch(/respond with only 'Task Completed'|reply with only 'Task Completed'/);
    const third = agentReqs[3]!.messages; // after the parallel calls
    const tail = third.slice(-3);
    expect(tail.map((m) => m.role)).toEqual(["assistant", "tool", "tool"]);
    expect(tail.slice(1).map((m) => m.tool_call_id)).toEqual(["a", "b"]);
    expect(tail[0]).not.toHaveProperty("reasoning_content"); // kept in the record, not sent back
    expect(third.find((m) => m.tool_call_id === "u")!.content).toMatch(/unknown_tool/);
    expect(third.find((m) => m.tool_call_id === "m")!.content).toMatch(/invalid_arguments/);

    // the rollout's own record: raw messages, usage, latency per turn; the bridge's trajectory has the same episode
    const mine = readFileSync(join(out, "episodes.jsonl"), "utf8").trim().split("\n").map((l) => JSON.parse(l.slice(9)));
    const ep = mine.find((e) => e.key === "notes-1#0");
    expect(ep.turns).toHaveLength(4);
    expect(ep.turns[0]).toMatchObject({ prompt_tokens: 100, completion_tokens: 10, attempts: 1, cached: false });
    expect(ep.messages.at(-1)).toMatchObject({ role: "assistant", content: "Task Completed" });
    expect(ep.messages.find((m: { reasoning_content?: string }) => m.reasoning_content)).toMatchObject({ reasoning_content: "both at once" });
    expect(mine.find((e) => e.key === "notes-1#1").turns[0].attempts).toBe(3);
    const recorded = readdirSync(record).flatMap((f) => readTrajectories(join(record, f)).episodes);
    const traj = recorded.find((e) => e.start.episode_id === ep.episode_id)!;
    expect(traj.steps.map((s) => s.tool_calls.map((c) => c.name))).toEqual([["add_note"], ["fly_away"], ["add_note", "delete_note"], []]);
    expect(existsSync(join(out, run.results.episodes[0]!.page!))).toBe(true);
  });

  test("prompt mode: tools in the system prompt, <tool_call> text with <think> kept, results as <tool_response>; a text-only reply ends a task", async () => {
    agentScript.push(
      '<think>Bob needs a note.</think>\n<tool_call>\n{"name": "add_note", "arguments": {"user_id": "u2", "title": "todo", "body": "call mom"}}\n</tool_call>\n<tool_call>\n{"name": "delete_note", "arguments": {"note_id": "n1"}}\n</tool_call>',
      "<think>Both done.</think>\n\nTask Completed",
    );
    const before = fixture!.requests.length;
    const out = tmp();
    const run = await runRollout(options(out, { scenarios: ["notes-1"], trials: 1, agent: { agentMode: "prompt" } }));
    expect(run.results.episodes[0]).toMatchObject({ reward: 1, success: true, steps: 2, failures: [] });
    const reqs = fixture!.requests.slice(before);
    expect(reqs[0]!.tools).toBeUndefined();
    expect(reqs[0]!.messages[0]!.content).toContain("<tools>");
    expect(reqs[0]!.messages[0]!.content).toContain('{"type":"function","function":{"name":"add_note"');
    expect(reqs[1]!.messages.at(-1)).toMatchObject({ role: "user" });
    expect(reqs[1]!.messages.at(-1)!.content.match(/<tool_response>/g)).toHaveLength(2);
    const recorded = readdirSync(record).flatMap((f) => readTrajectories(join(record, f)).episodes);
    const traj = recorded.find((e) => e.start.episode_id === run.results.episodes[0]!.episode_id)!;
    expect(traj.steps[1]!.action).toBe("<think>Both done.</think>\n\nTask Completed");
  });

  test("a hung endpoint and one that always fails end their episodes as endpoint errors (scored, counted, played again on resume), never the run", async () => {
    agentScript.push({ hang: true }, { hang: true }, 500, 500);
    const out = tmp();
    const o = options(out, { scenarios: ["notes-1"], trials: 2, model: { baseURL: fixture!.baseURL, apiKey: "k", model: "agent", backoffMs: 5, timeoutMs: 400, maxRetries: 1 } });
    const run = await runRollout(o);
    expect(run.results.episodes.map((e) => [e.key, e.failures, e.success])).toEqual([
      ["notes-1#0", ["endpoint_error"], false],
      ["notes-1#1", ["endpoint_error"], false],
    ]);
    expect(run.results.failures.endpoint_error.episodes).toBe(2);
    expect(run.results.totals.model_retries).toBe(2); // one retry each (maxRetries 1)
    // the next run plays them again (infrastructure failures are not finished episodes)
    // an endpoint's failure names the endpoint and model (a run may talk to an agent and a user endpoint)
    agentScript.push(500);
    const client = new ModelClient({ baseURL: fixture!.baseURL, apiKey: "k", model: "agent", maxRetries: 0 });
    await expect(client.chat([{ role: "user", content: "hi" }], undefined, "s")).rejects.toThrow(`${fixture!.baseURL} (model agent): `);
    agentScript.push("Task Completed", "Task Completed");
    const again = await runRollout(o);
    expect(again.played).toBe(2);
    expect(again.results.failures.endpoint_error.episodes).toBe(0);
    expect(again.results.episodes.every((e) => e.end_reason === "text_reply")).toBe(true);
  });

  test("the step cap ends an episode that never stops, as a max_steps failure", async () => {
    for (let i = 0; i < 3; i++) agentScript.push(calls(call(`r${i}`, "list_notes", { user_id: "u1" })));
    const run = await runRollout(options(tmp(), { scenarios: ["notes-1"], trials: 1, agent: { agentMode: "fc", maxSteps: 3 } }));
    expect(run.results.episodes[0]).toMatchObject({ steps: 3, end_reason: "client", failures: ["max_steps"] });
    expect(agentScript).toEqual([]);
  });

  test("many episodes in flight over trials: distinct seeds, all recorded, every model call answered once", async () => {
    // a stateless agent (order is not fixed with concurrency): act on the first turn, then finish
    const stateless = await OpenAIFixture.start((r) => (r.messages.some((m) => m.role === "tool") ? "Task Completed" : calls(call("a", "add_note", { user_id: "u2", title: "todo", body: "call mom" }), call("b", "delete_note", { note_id: "n1" }))));
    try {
      const out = tmp();
      const run = await runRollout(options(out, { scenarios: ["notes-1"], trials: 6, concurrency: 4, model: { baseURL: stateless.baseURL, model: "agent", apiKey: "k" } }));
      expect(run.results.episodes.map((e) => e.seed)).toEqual([5, 6, 7, 8, 9, 10]);
      expect(run.results.totals.pass_hat_k["6"]).toBe(1);
      expect(stateless.requests).toHaveLength(12);
      // a second run finds everything done and calls nothing
      const again = await runRollout(options(out, { scenarios: ["notes-1"], trials: 6, concurrency: 4, model: { baseURL: stateless.baseURL, model: "agent", apiKey: "k" } }));
      expect([again.played, again.skipped, stateless.requests.length]).toEqual([0, 6, 12]);
      // with the episode log gone, every episode is played again, and every model call comes from the cache
      rmSync(join(out, "episodes.jsonl"));
      const replayed = await runRollout(options(out, { scenarios: ["notes-1"], trials: 6, concurrency: 4, model: { baseURL: stateless.baseURL, model: "agent", apiKey: "k" } }));
      expect([replayed.played, stateless.requests.length]).toEqual([6, 12]);
      expect(replayed.results.episodes.map((e) => [e.reward, e.steps])).toEqual(run.results.episodes.map((e) => [e.reward, e.steps]));
      expect(replayed.results.totals.model_calls).toBe(0);
    } finally {
      await stateless.close();
    }
  });
});

/** One episode of notes-2 (a conversation) through runRollout, on a bridge whose simulated user is `respond`'s "user-sim" model. */
async function playNotes2(respond: (r: FixtureRequest) => Scripted): Promise<RolloutRun> {
  const fixture = await OpenAIFixture.start(respond);
  const supervisor = new Supervisor({ envs: [FIXTURES], endpoint: "tcp://127.0.0.1:*", replicas: 1, user: { baseURL: fixture.baseURL, apiKey: "k", model: "user-sim", maxRetries: 0 }, recordDir: null, logger: createLogger("test-rollout-notes2") });
  try {
    const { endpoints } = await supervisor.start();
    return await runRollout({
      endpoints, scenarios: ["notes-2"], trials: 1, seed: 1, concurrency: 1, agent: { agentMode: "fc" },
      model: { baseURL: fixture.baseURL, apiKey: "k", model: "agent", backoffMs: 5, timeoutMs: 5000, maxRetries: 0 },
      out: tmp(), settings: { benchmark: null, user: { model: "user-sim", base_url: fixture.baseURL } },
    });
  } finally {
    await supervisor.stop();
    await fixture.close();
  }
}

test("a simulated user that stops in its opening message: the episode is scored at once, the agent is never asked", async () => {
  const agentCalls: FixtureRequest[] = [];
  const run = await playNotes2((r) => (r.model === "user-sim" ? "# Thought:\nNothing to do.\n# Reply:\n###STOP###" : (agentCalls.push(r), "Task Completed")));
  expect(agentCalls).toHaveLength(0);
  expect(run.results.episodes).toHaveLength(1);
  expect(run.results.episodes[0]).toMatchObject({ scenario_id: "notes-2", env_id: "notes-v1", end_reason: "user_stop", steps: 0, failures: [] });
});

test("an episode whose reset fails (the simulated user's endpoint is down) is reported under its env", async () => {
  const run = await playNotes2((r) => (r.model === "user-sim" ? 500 : "Task Completed"));
  expect(run.results.episodes[0]).toMatchObject({ scenario_id: "notes-2", env_id: "notes-v1", episode_id: null, failures: ["user_simulator_failed"] });
});

test("pass^k is tau-bench's: C(c,k)/C(n,k) averaged over tasks", () => {
  expect(passHatK([{ n: 4, c: 2 }], 1)).toBe(0.5);
  expect(passHatK([{ n: 4, c: 2 }], 2)).toBeCloseTo(1 / 6);
  expect(passHatK([{ n: 4, c: 4 }, { n: 4, c: 3 }], 3)).toBeCloseTo((1 + 1 / 4) / 2);
  expect(passHatK([{ n: 2, c: 2 }], 3)).toBeNull();
});

test("--scenarios takes ids, globs and env ids; a pattern that matches nothing is an error", () => {
  const all = [
    { scenario_id: "lib-1", env_id: "library-v1", mode: "task" as const, max_steps: 5 },
    { scenario_id: "lib-2", env_id: "library-v1", mode: "task" as const, max_steps: 5 },
    { scenario_id: "bank-1", env_id: "bank-v1", mode: "task" as const, max_steps: 5 },
  ];
  expect(selectScenarios(all, ["lib-*"]).map((s) => s.scenario_id)).toEqual(["lib-1", "lib-2"]);
  expect(selectScenarios(all, ["bank-v1", "lib-2"]).map((s) => s.scenario_id)).toEqual(["lib-2", "bank-1"]);
  expect(() => selectScenarios(all, ["nope*"])).toThrow(/matches no scenario/);
});

test("--connection-file joins a running bridge (CurveZMQ keys from the file) and spreads episodes over its replicas", async () => {
  const dir = tmp();
  const fixture = await OpenAIFixture.start(() => "Task Completed");
  const connectionFile = join(dir, "bridge.json");
  const supervisor = new Supervisor({ envs: [FIXTURES], endpoint: "tcp://127.0.0.1:*", replicas: 2, curve: true, connectionFile, recordDir: join(dir, "served"), logger: createLogger("test-rollout-join") });
  await supervisor.start();
  try {
    const args = { connectionFile, scenarios: ["notes-1"], trials: 4, seed: 0, concurrency: 4, agentMode: "fc", model: "agent", baseUrl: fixture.baseURL, apiKey: "k", timeout: 10, retries: 0, backoff: 10, out: join(dir, "run"), envs: [], replicas: 1, workers: 1, progress: false } as RolloutArgs;
    const run = await rolloutWith(args);
    expect(run.results.episodes.map((e) => e.end_reason)).toEqual(["text_reply", "text_reply", "text_reply", "text_reply"]);
    // the joined bridge recorded them (in its own folder, one file per replica); the rollout started no bridge of its own
    const served = readdirSync(join(dir, "served")).flatMap((f) => readTrajectories(join(dir, "served", f)).episodes.map((e) => e.start.episode_id));
    expect(served.sort()).toEqual(run.results.episodes.map((e) => e.episode_id).sort());
    expect(readdirSync(join(dir, "served"))).toHaveLength(2);
    expect(existsSync(join(dir, "run", "trajectories"))).toBe(false);
  } finally {
    await supervisor.stop();
    await fixture.close();
  }
});

test("--connection-file of a bridge that is no longer running fails at once, naming the file and the endpoint; a bound endpoint passes the check", async () => {
  const dir = tmp();
  // a port that was just free: nothing listens there now
  const probe = createServer();
  await new Promise<void>((r) => probe.listen(0, "127.0.0.1", r));
  const port = (probe.address() as AddressInfo).port;
  await new Promise<void>((r) => probe.close(() => r()));
  const connectionFile = join(dir, "stale.json");
  writeFileSync(connectionFile, JSON.stringify({ endpoints: [`tcp://127.0.0.1:${port}`], pid: 1 }));
  const args = { connectionFile, scenarios: ["notes-1"], trials: 1, seed: 0, concurrency: 1, agentMode: "fc", model: "agent", baseUrl: "http://127.0.0.1:9/v1", apiKey: "k", timeout: 10, retries: 0, backoff: 10, out: join(dir, "run"), envs: [], replicas: 1, workers: 1, progress: false } as RolloutArgs;
  await expect(rolloutWith(args)).rejects.toThrow(`${connectionFile}: cannot reach the bridge: connection to tcp://127.0.0.1:${port} refused; is a bridge running at tcp://127.0.0.1:${port}?`);
  await expect(checkReachable(`ipc://${join(dir, "no-such.sock")}`)).rejects.toThrow(BridgeNotRunning);
  await expect(checkReachable("tcp://*:*")).resolves.toBeUndefined(); // a bind address: left to ZeroMQ
  const listening = createServer();
  await new Promise<void>((r) => listening.listen(0, "127.0.0.1", r));
  try {
    await expect(checkReachable(`tcp://127.0.0.1:${(listening.address() as AddressInfo).port}`)).resolves.toBeUndefined();
  } finally {
    await new Promise<void>((r) => listening.close(() => r()));
  }
});

test("system prompts: the default per scenario mode, the env after it, tools only in prompt mode; a file overrides the instructions", () => {
  const base = { introduction: "A notes app.", rules: ["Titles are unique."], tools: [{ type: "function", function: { name: "add_note" } }] };
  const task = systemPrompt({ mode: "task", agentMode: "fc", ...base });
  expect(task).toMatch(/^You are an agent that completes the task[\s\S]*reply with only 'Task Completed'[\s\S]*The following is an introduction to the current environment:\n# Environment Information\n\n## Brief Introduction:\nA notes app\.\n\n## Environment Rules \/ Constraints:\n- Titles are unique\.$/);
  expect(task).not.toContain("<tools>");
  const conv = systemPrompt({ mode: "conversation", agentMode: "prompt", ...base });
  expect(conv).toMatch(/ask the user for it[\s\S]*# Tools[\s\S]*<tools>\n\{"type":"function","function":\{"name":"add_note"\}\}\n<\/tools>[\s\S]*<tool_call>/);
  const dir = tmp();
  writeFileSync(join(dir, "p.json"), JSON.stringify({ conversation: "Be brief." }));
  writeFileSync(join(dir, "p.txt"), "Solve it.\n");
  const json = readSystemPromptFile(join(dir, "p.json"));
  expect(systemPrompt({ mode: "conversation", agentMode: "fc", ...base, override: json })).toMatch(/^Be brief\.\n\nThe following is an introduction/);
  expect(systemPrompt({ mode: "task", agentMode: "fc", ...base, override: json })).toBe(task);
  expect(systemPrompt({ mode: "task", agentMode: "fc", ...base, override: readSystemPromptFile(join(dir, "p.txt")) })).toMatch(/^Solve it\.\n\nThe following/);
  writeFileSync(join(dir, "bad.json"), "{}");
  expect(() => readSystemPromptFile(join(dir, "bad.json"))).toThrow(/expected \{"task"/);
});
