import { afterEach, expect, test } from "vitest";
import { EnvRuntime } from "../../bridge/engine/env-runtime.js";
import { parseUserReply, STOP_MARKER } from "../../bridge/episode/user-simulator.js";
import { FIXTURES } from "../helpers.js";
import { OpenAIFixture } from "../openai-fixture.js";

let fixture: OpenAIFixture | undefined;
let rt: EnvRuntime | undefined;
afterEach(async () => {
  await rt?.close();
  await fixture?.close();
});

test("parseUserReply takes the reply section; the stop marker counts only there", () => {
  expect(parseUserReply("# Thought:\nhmm\n# Reply:\nHi, I need help.")).toBe("Hi, I need help.");
  expect(parseUserReply(`# Thought:\nI will say ${STOP_MARKER} later\n# Reply:\nNot yet.`)).toBe("Not yet.");
  expect(parseUserReply(`# Thought:\ndone\n# Reply:\n${STOP_MARKER}`)).toBe(STOP_MARKER);
  expect(parseUserReply("# Thought:\nno reply section")).toBeNull();
});

test("a conversation episode: the simulated user opens, answers, stops; replies are recorded", async () => {
  fixture = await OpenAIFixture.start([
    "# Thought:\nstart\n# Reply:\nHi, how many notes do I have? I'm u3.",
    "# Thought:\nmissing format, retried",
    "# Reply:\nGreat, please add a note 'x' with body 'y'.",
    `# Thought:\nall good\n# Reply:\n${STOP_MARKER}`,
  ]);
  rt = await EnvRuntime.start({ envs: [FIXTURES], user: { baseURL: fixture.baseURL, apiKey: "test", model: "sim-model" } });
  const { episode_id, observation, info } = await rt.reset("notes-2", 11);
  expect(info.mode).toBe("conversation");
  expect(observation).toEqual({ role: "user", content: "Hi, how many notes do I have? I'm u3." });
  await rt.step(episode_id, { name: "list_notes", arguments: { user_id: "u3" } });
  const a = await rt.step(episode_id, "You have 1 note.");
  expect(a.observation.content).toBe("Great, please add a note 'x' with body 'y'.");
  await rt.step(episode_id, { name: "add_note", arguments: { user_id: "u3", title: "x", body: "y" } });
  const end = await rt.step(episode_id, "Added it.");
  expect(end).toMatchObject({ terminated: true, reward: 1, info: { end_reason: "user_stop" } });
  expect(rt.inputs(episode_id).user_replies).toEqual(["Hi, how many notes do I have? I'm u3.", "Great, please add a note 'x' with body 'y'.", STOP_MARKER]);

  // roles are inverted as in EnvScaler: the agent's turns go to the LLM as "user" messages
  const last = fixture.requests.at(-1)!;
  expect(last.model).toBe("sim-model");
  expect(last.messages[0]!.role).toBe("system");
  expect(last.messages[0]!.content).toContain("Carol");
  expect(last.messages.at(-1)).toEqual({ role: "user", content: "[Agent] Added it." });
});

test("a failing user endpoint ends the episode with user_simulator_failed", async () => {
  fixture = await OpenAIFixture.start(["# Reply:\nhello", 400]);
  rt = await EnvRuntime.start({ envs: [FIXTURES], user: { baseURL: fixture.baseURL, apiKey: "k", maxRetries: 0 } });
  const { episode_id } = await rt.reset("notes-2", 1);
  const r = await rt.step(episode_id, "What do you need?");
  expect(r).toMatchObject({ terminated: true, reward: 0, info: { error: { code: "user_simulator_failed" } } });
});

test("a user who opens with the stop marker ends the episode as user_stop, scored at the next step; the action is not run", async () => {
  fixture = await OpenAIFixture.start([`# Thought:\nnothing to do\n# Reply:\n${STOP_MARKER}`]);
  rt = await EnvRuntime.start({ envs: [FIXTURES], user: { baseURL: fixture.baseURL, apiKey: "k" } });
  const { episode_id, observation, info } = await rt.reset("notes-2", 3);
  expect(observation.content).toBe(STOP_MARKER);
  expect(info.end_reason).toBe("user_stop");
  const end = await rt.step(episode_id, { name: "add_note", arguments: { user_id: "u3", title: "x", body: "y" } });
  expect(end).toMatchObject({ terminated: true, info: { end_reason: "user_stop", tool_calls: [] } });
  expect(end.info.reward_info?.total).toBeGreaterThan(0);
  await expect(rt.step(episode_id, "hello?")).rejects.toThrow(/ended/);
});

test("a stop marker inside a longer user reply ends the episode", async () => {
  fixture = await OpenAIFixture.start(["# Reply:\nHi, list my notes, I'm u3.", `# Thought:\nok\n# Reply:\nThanks, that is all! ${STOP_MARKER}`]);
  rt = await EnvRuntime.start({ envs: [FIXTURES], user: { baseURL: fixture.baseURL, apiKey: "k" } });
  const { episode_id } = await rt.reset("notes-2", 3);
  const end = await rt.step(episode_id, "You have one note.");
  expect(end).toMatchObject({ terminated: true, info: { end_reason: "user_stop" } });
});
