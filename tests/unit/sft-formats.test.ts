import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { beforeAll, expect, test } from "vitest";
import { EnvRuntime } from "../../bridge/core/engine/env-runtime.js";
import { exportSft, exportSummary, filterProblem, NO_USER_PREFIX, NO_USER_REASON, originalFilter, toAlpaca, toChat, toShareGpt, type AlpacaSample, type ShareGptRecord } from "../../bridge/tools/record/sft-export.js";
import { readTrajectories, type RecordedEpisode } from "../../bridge/tools/record/trajectory-reader.js";
import { TrajectoryWriter } from "../../bridge/tools/record/trajectory-writer.js";
import { FIXTURES } from "../helpers.js";
import { OpenAIFixture } from "../openai-fixture.js";

const run = promisify(execFile);
const CLI = join(import.meta.dirname, "..", "..", "cli", "main.ts");
const tc = (name: string, args: object) => `<tool_call>\n${JSON.stringify({ name, arguments: args })}\n</tool_call>`;
const ADD = { user_id: "u2", title: "todo", body: "call mom" };

let file = "";
let eps: Record<string, RecordedEpisode> = {};

/** Five episodes that each fail (or pass) a different part of the original's filter. */
beforeAll(async () => {
  file = join(mkdtempSync(join(tmpdir(), "envscaler-sft-")), "t.jsonl");
  const user = await OpenAIFixture.start(["# Reply:\nHow many notes do I have? I'm u3.", "# Reply:\nAdd 'x' with body 'y'.", "# Reply:\nIs it saved?", "# Reply:\n###STOP###"]);
  const writer = new TrajectoryWriter(file);
  const rt = await EnvRuntime.start({ envs: [FIXTURES], recorder: writer, user: { baseURL: user.baseURL, apiKey: "x", model: "m", maxRetries: 0 } });
  try {
    const play = async (scenario: string, id: string, actions: unknown[]) => {
      const r = await rt.reset(scenario, 1, id);
      for (const a of actions) await rt.step(r.episode_id, a);
      await rt.closeEpisode(r.episode_id);
    };
    await play("notes-1", "think-task", [`<think>add first</think>\n${tc("add_note", ADD)}`, `<think>then delete</think>\n${tc("delete_note", { note_id: "n1" })}`, "<think>all done</think>\n\nTask Completed"]);
    await play("notes-1", "no-think", [tc("add_note", ADD), tc("delete_note", { note_id: "n1" }), "Task Completed"]);
    await play("notes-1", "gave-up", [`<think>look</think>\n${tc("list_notes", { user_id: "u2" })}`, `<think>hmm</think>\n${tc("add_note", ADD)}`, "<think>cannot</think>\n\nTask Failed"]);
    await play("notes-1", "short", [`<think>both at once</think>\n${tc("add_note", ADD)}\n${tc("delete_note", { note_id: "n1" })}`, "<think>done</think>\n\nTask Completed"]);
    await play("notes-2", "conversation", [
      `<think>look up</think>\n${tc("list_notes", { user_id: "u3" })}`,
      "<think>answer</think>\n\nYou have 1 note.",
      { role: "assistant", content: null, reasoning_content: "add it", tool_calls: [{ id: "c1", type: "function", function: { name: "add_note", arguments: '{"user_id":"u3","title":"x","body":"y"}' } }] },
      "<think>tell</think>\n\nAdded 'x'.",
      "<think>confirm</think>\n\nYes, it is saved.",
    ]);
    // the same conversation on a runtime with no simulated user: the agent's first reply ends it
    const alone = await EnvRuntime.start({ envs: [FIXTURES], recorder: writer });
    try {
      const r = await alone.reset("notes-2", 1, "no-user");
      await alone.step(r.episode_id, `<think>look up</think>\n${tc("list_notes", { user_id: "u3" })}`);
      const end = await alone.step(r.episode_id, "<think>answer</think>\n\nYou have 1 note.");
      expect(end).toMatchObject({ terminated: true, info: { end_reason: "no_user" }, observation: { role: "user" } });
      expect(end.observation.content.startsWith(NO_USER_PREFIX)).toBe(true);
      await alone.closeEpisode(r.episode_id);
    } finally {
      await alone.close();
    }
  } finally {
    await rt.close();
    writer.close();
    await user.close();
  }
  eps = Object.fromEntries(readTrajectories(file).episodes.map((e) => [e.start.episode_id, e]));
});

test("the original's filter: turns within bounds per mode, <think> on every turn, ended done (Task Completed / ###STOP###), min reward", () => {
  const why = (id: string, f = originalFilter(eps[id]!)) => filterProblem(eps[id]!, f);
  expect(why("think-task")).toBeNull();
  expect(why("conversation")).toBeNull();
  expect(why("no-think")).toMatch(/without <think>/);
  expect(why("gave-up")).toMatch(/did not end done/);
  expect(why("short")).toMatch(/2 turns < 3/);
  expect(why("conversation", { ...originalFilter(eps.conversation!), minTurns: 6 })).toMatch(/5 turns < 6/);
  expect(why("gave-up", { minReward: 1 })).toMatch(/reward 0/);
  expect(exportSft(Object.values(eps), "chat", originalFilter).records.map((r) => (r as { episode_id: string }).episode_id)).toEqual(["think-task", "conversation"]);
});

test("placeholder user turns are never exported: such episodes are left out, counted by reason, and the summary adds up", () => {
  // an older bridge's recording: the placeholder came back as a user turn and the episode went on
  const legacy = structuredClone(eps.conversation!);
  legacy.start.episode_id = "legacy-no-user";
  const textStep = legacy.steps.find((st) => st.observation.role === "user" && !st.terminated)!;
  textStep.observation = { role: "user", content: "(no simulated user is attached; the message was recorded)" };
  const all = [...Object.values(eps), legacy];
  expect(filterProblem(eps["no-user"]!, {})).toBe(NO_USER_REASON);
  expect(filterProblem(legacy, {})).toBe(NO_USER_REASON);
  for (const format of ["chat", "alpaca", "sharegpt"] as const) {
    const x = exportSft(all, format, {});
    const text = JSON.stringify(x.records);
    expect(text).not.toContain(NO_USER_PREFIX.slice(1));
    expect(x.kept + x.dropped.length).toBe(all.length);
    expect(x.dropped.filter((d) => d.why === NO_USER_REASON).map((d) => d.episode_id).sort()).toEqual(["legacy-no-user", "no-user"]);
  }
  const x = exportSft(all, "chat", originalFilter);
  // 7 episodes: think-task and conversation pass the original's filter; 5 are left out for 4 reasons
  expect([x.kept, x.dropped.length, x.records.length]).toEqual([2, 5, 2]);
  expect(exportSummary(x, "out.jsonl")).toBe(
    `7 episodes read: 2 exported as 2 records → out.jsonl; 5 left out (an assistant turn without <think> ×1, did not end done (text_reply) ×1, N turns < N ×1, ${NO_USER_REASON} ×2)`,
  );
});

test("alpaca with history: one sample per assistant turn, <think> kept in the output and removed from the history, tools in the system", () => {
  const samples = toAlpaca(toChat(eps["think-task"]!));
  expect(samples).toHaveLength(3);
  expect(samples[0]).toMatchObject({ input: "", history: [] });
  expect(samples[0]!.instruction).toMatch(/^Add a note titled 'todo'/);
  expect(samples[0]!.output).toBe(`<think>\nadd first\n</think>\n\n${tc("add_note", ADD)}`);
  expect(samples[1]!.instruction).toMatch(/^<tool_response>\n\{.*\}\n<\/tool_response>$/s);
  expect(samples[1]!.history).toEqual([[samples[0]!.instruction, tc("add_note", ADD)]]);
  expect(samples[2]!.output).toBe("<think>\nall done\n</think>\n\nTask Completed");
  expect(samples[2]!.history).toHaveLength(2);
  for (const s of samples) {
    expect(s.output).toMatch(/^<think>/);
    expect(JSON.stringify(s.history)).not.toContain("<think>");
    expect(s.system).toContain("<tools>\n");
    expect(s.system).toContain('"name":"add_note"');
  }
  // a conversation: the user's replies are the instructions; reasoning_content from an FC message becomes <think>
  const conv = toAlpaca(toChat(eps.conversation!));
  expect(conv.map((s) => s.instruction.slice(0, 20))).toEqual(["How many notes do I ", "<tool_response>\n{\"su", "Add 'x' with body 'y", "<tool_response>\n{\"su", "Is it saved?"]);
  expect(conv[2]!.output).toMatch(/^<think>\nadd it\n<\/think>\n\n<tool_call>\n\{"name":"add_note"/);
});

test("ShareGPT: function_call (a list for parallel calls) and observation turns, reasoning as a leading <think>, tools as a JSON string", () => {
  const r = toShareGpt(toChat(eps["think-task"]!));
  expect(r.conversations.map((c) => c.from)).toEqual(["human", "function_call", "observation", "function_call", "observation", "gpt"]);
  const call = r.conversations[1]!.value;
  expect(call).toMatch(/^<think>\nadd first\n<\/think>\n\n/);
  expect(JSON.parse(call.replace(/^<think>[\s\S]*?<\/think>\s*/, ""))).toEqual({ name: "add_note", arguments: ADD });
  expect(r.conversations[5]!.value).toBe("<think>\nall done\n</think>\n\nTask Completed");
  expect(JSON.parse(r.tools).map((t: { name: string }) => t.name)).toContain("add_note");
  const parallel = toShareGpt(toChat(eps.short!));
  expect(JSON.parse(parallel.conversations[1]!.value.replace(/^<think>[\s\S]*?<\/think>\s*/, ""))).toHaveLength(2);
  expect(JSON.parse(parallel.conversations[2]!.value)).toHaveLength(2);
});

test("envscaler export writes the three formats with the filters", async () => {
  const dir = mkdtempSync(join(tmpdir(), "envscaler-sft-cli-"));
  const lines = (p: string) => readFileSync(p, "utf8").trim().split("\n").map((l) => JSON.parse(l));
  const cli = (args: string[]) => run(process.execPath, ["--import", "tsx", CLI, "export", ...args]);
  const out = await cli(["alpaca", file, "--original-filter", "-o", join(dir, "a.jsonl")]);
  expect(out.stdout).toMatch(/^6 episodes read: 2 exported as 8 records → .*; 4 left out \(.*no simulated user.* ×1\)/);
  const alpaca = lines(join(dir, "a.jsonl")) as AlpacaSample[];
  expect(new Set(alpaca.map((s) => s.episode_id))).toEqual(new Set(["think-task", "conversation"]));
  await cli(["sharegpt", file, "--require-think", "--min-reward", "1", "-o", join(dir, "s.jsonl")]);
  expect((lines(join(dir, "s.jsonl")) as ShareGptRecord[]).map((r) => r.episode_id)).toEqual(["think-task", "short", "conversation"]);
  await cli(["chat", file, "--require-done", "--max-turns", "2", "--system-prompt", "agent", "-o", join(dir, "c.jsonl")]);
  const chat = lines(join(dir, "c.jsonl"));
  expect(chat.map((r: { episode_id: string }) => r.episode_id)).toEqual(["short"]);
  expect(chat[0].messages[0].content).toMatch(/reply with only 'Task Completed'[\s\S]*# Environment Information/);
});
