import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, expect, test } from "vitest";
import { EnvRuntime } from "../../bridge/core/engine/env-runtime.js";
import { GREETING, OpenAIUserSimulator, outOfRole, parseUserReply, resolveUserConfig, STOP_MARKER } from "../../bridge/core/episode/user-simulator.js";
import { userConfigFromArgs } from "../../cli/option-groups.js";
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

test("a user reply that plays the agent or echoes the greeting is re-asked once, with the reason; the detour leaves the history", async () => {
  fixture = await OpenAIFixture.start([
    `# Thought:\nhmm\n# Reply:\n${GREETING}`,
    "# Thought:\nright, I am the user\n# Reply:\nI need to list my notes, I'm u3.",
    "# Reply:\nAgent: Is there anything else I can help you with?",
    "# Reply:\nStill agent-like: how can I help you?", // the one re-ask is spent: kept as it is
  ]);
  const sim = new OpenAIUserSimulator("list notes", "you are u3", { baseURL: fixture.baseURL, apiKey: "k" });
  expect(await sim.start()).toBe("I need to list my notes, I'm u3.");
  const reask = fixture.requests[1]!.messages.at(-1)!;
  expect(reask.role).toBe("user");
  expect(reask.content).toMatch(/\[System\] your reply repeats the Agent's message\. You are the human user/);
  expect(await sim.reply("You have one note.")).toBe("Still agent-like: how can I help you?");
  expect(fixture.requests[3]!.messages.at(-1)!.content).toMatch(/written as the Agent/);
  // the history the next request carries has no detour: greeting, opening, agent turn, last reply
  expect(fixture.requests[3]!.messages.map((m) => m.role)).toEqual(["system", "user", "assistant", "user", "assistant", "user"]);
  expect(fixture.requests).toHaveLength(4);
});

test("with a cache dir, a second simulator of the same episode replays the user's finished replies without a call; another seed (salt) and unaccepted replies are not served from it", async () => {
  let n = 0;
  fixture = await OpenAIFixture.start((r) => (r.messages.at(-1)!.content.includes("again") && n++ === 0 ? "# Thought:\nonly thinking, no reply section" : `# Thought:\nt\n# Reply:\nanswer ${fixture!.requests.length}`));
  const cacheDir = mkdtempSync(join(tmpdir(), "envscaler-user-cache-"));
  const config = { baseURL: fixture.baseURL, apiKey: "k", cacheDir };
  const first = new OpenAIUserSimulator("list notes", "you are u3", config, [], "notes-2|0");
  const said = [await first.start(), await first.reply("Which notes?"), await first.reply("again?")];
  // the reply without a '# Reply:' section was re-asked and never cached
  expect(said).toEqual(["answer 1", "answer 2", "answer 4"]);
  expect(fixture.requests).toHaveLength(4);

  const resumed = new OpenAIUserSimulator("list notes", "you are u3", config, [], "notes-2|0");
  expect([await resumed.start(), await resumed.reply("Which notes?"), await resumed.reply("again?")]).toEqual(said);
  expect(fixture.requests).toHaveLength(4);
  // the conversation goes on past the cache: a new call
  expect(await resumed.reply("Anything else?")).toBe("answer 5");

  const otherSeed = new OpenAIUserSimulator("list notes", "you are u3", config, [], "notes-2|1");
  expect(await otherSeed.start()).toBe("answer 6");
  const uncached = new OpenAIUserSimulator("list notes", "you are u3", { ...config, cacheDir: undefined }, [], "notes-2|0");
  expect(await uncached.start()).toBe("answer 7");
  expect(resolveUserConfig({}, { ENVSCALER_USER_CACHE: "/x" }).cacheDir).toBe("/x");
  expect(userConfigFromArgs({ userModel: "m", userCache: "/c" }, {})).toEqual({ model: "m", cacheDir: "/c" });
});

test("a simulated user's cache folder that cannot be made fails the episode as the user's typed error, naming the folder", async () => {
  fixture = await OpenAIFixture.start(["# Thought:\nt\n# Reply:\nhello"]);
  const file = join(mkdtempSync(join(tmpdir(), "envscaler-user-cache-")), "a-file");
  writeFileSync(file, "not a folder");
  rt = await EnvRuntime.start({ envs: [FIXTURES], user: { baseURL: fixture.baseURL, apiKey: "k", cacheDir: join(file, "cache") } });
  await expect(rt.reset("notes-2", 0)).rejects.toMatchObject({ code: "user_simulator_failed", message: expect.stringContaining(join(file, "cache")) });
  expect(fixture.requests).toHaveLength(0);
});

test("outOfRole: agent-like replies are caught, ordinary user replies are not", () => {
  expect(outOfRole("[Agent] Sure, let me check.", "x")).toMatch(/as the Agent/);
  expect(outOfRole("Hi! How can I help you today?", GREETING)).toMatch(/repeats/);
  expect(outOfRole("Hello, how may I assist you?", "x")).toMatch(/offers help/);
  expect(outOfRole("Please renew book b2 for me; my id is u3.", GREETING)).toBeNull();
  expect(outOfRole("Yes, that's right.", "Is your id u3?")).toBeNull();
});

test("the simulated user's model, temperature and timeout come from the config, else the environment, else the defaults", () => {
  expect(resolveUserConfig({}, {})).toMatchObject({ model: "gpt-4.1", temperature: 0.7, timeoutMs: 60_000 });
  const env = { ENVSCALER_USER_MODEL: "qwen", ENVSCALER_USER_TEMPERATURE: "0", ENVSCALER_USER_TIMEOUT: "300", USER_OPENAI_BASE_URL: "http://u/v1" };
  expect(resolveUserConfig({}, env)).toMatchObject({ model: "qwen", temperature: 0, timeoutMs: 300_000, baseURL: "http://u/v1" });
  expect(resolveUserConfig({ model: "m", temperature: 1, timeoutMs: 5 }, env)).toMatchObject({ model: "m", temperature: 1, timeoutMs: 5 });
  expect(() => resolveUserConfig({}, { ENVSCALER_USER_TIMEOUT: "soon" })).toThrow(/ENVSCALER_USER_TIMEOUT must be a non-negative number/);
  // serve's flags: seconds become ms; nothing set and no endpoint in the environment means no simulated user
  expect(userConfigFromArgs({ userModel: "qwen", userTimeout: 300, userTemperature: 0 }, {})).toEqual({ model: "qwen", timeoutMs: 300_000, temperature: 0 });
  expect(userConfigFromArgs({}, {})).toBeNull();
  expect(userConfigFromArgs({}, { ENVSCALER_USER_MODEL: "qwen" })).toEqual({});
  expect(() => userConfigFromArgs({ userTimeout: 0 }, {})).toThrow(/--user-timeout/);
});

test("a hung user endpoint fails the episode after the configured timeout, naming the endpoint", async () => {
  fixture = await OpenAIFixture.start([{ hang: true }]);
  rt = await EnvRuntime.start({ envs: [FIXTURES], user: { baseURL: fixture.baseURL, apiKey: "k", timeoutMs: 300, maxRetries: 0, model: "slow-model" } });
  await expect(rt.reset("notes-2", 1)).rejects.toMatchObject({ code: "user_simulator_failed", message: expect.stringMatching(/timed out/i) });
  await expect(rt.reset("notes-2", 1)).rejects.toThrow(/slow-model/);
});
