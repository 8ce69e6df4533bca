// `reset` with finish_previous: "later": the running episode ends at once, the reply does not wait
// for its scoring, the engine scores it once idle (or at once when episode_result asks), and the
// score and its record are those finish_previous: true gives.
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, test, vi } from "vitest";
import * as checker from "../../bridge/core/episode/checker.js";
import { EngineHost } from "../../bridge/core/engine/engine-host.js";
import type { EngineOp, EngineReply, RequestOf } from "../../bridge/core/engine/messages.js";
import { EnvRuntime } from "../../bridge/core/engine/env-runtime.js";
import { EnvRegistry } from "../../envs/format/registry.js";
import { BridgeServer } from "../../bridge/fronts/zmq/bridge-server.js";
import { BridgeClient, BridgeError } from "../../agent/bridge-client.js";
import { RESULT_SCHEMAS } from "../../protocol/messages.js";
import { FIXTURES } from "../helpers.js";

const silent = pino({ level: "silent" });
/** An engine request without its watchdog slot (the tests post every one with slot 1). */
type Unslotted = { [O in EngineOp]: Omit<RequestOf<O>, "slot"> }[EngineOp];
const code = (p: Promise<unknown>) => p.then(() => "ok", (e: BridgeError) => e.code);
const addNote = { name: "add_note", arguments: { user_id: "u2", title: "todo", body: "call mom" } };

describe.each([
  { workers: 0, scorerThread: false },
  { workers: 1, scorerThread: false },
  { workers: 0, scorerThread: true },
  { workers: 1, scorerThread: true },
])("workers: $workers, scorer thread: $scorerThread", ({ workers, scorerThread }) => {
  const records: Record<string, unknown>[] = [];
  let runtime: EnvRuntime;
  let server: BridgeServer;
  let client: BridgeClient;

  beforeAll(async () => {
    runtime = await EnvRuntime.start({ envs: [FIXTURES], workers, scorerThread, recorder: { check: () => undefined, append: (r) => void records.push(r as Record<string, unknown>) } });
    server = new BridgeServer({ runtime, endpoint: "tcp://127.0.0.1:*", logger: silent, limits: { maxSessions: 8, maxFrameBytes: 1 << 20 } });
    await server.start();
    client = new BridgeClient(server.endpoint, { timeoutMs: 20_000 });
  });
  afterAll(async () => {
    client.close();
    await server.stop();
    await runtime.close();
  });

  /** A session whose episode of notes-1 took one step; its episode id and that step's state hash. */
  async function played(seed: number): Promise<{ sid: string; episode: string; hash: string }> {
    const r = RESULT_SCHEMAS.reset.parse(await client.request("reset", { scenario_id: "notes-1", seed }));
    const s = RESULT_SCHEMAS.step.parse(await client.request("step", { session_id: r.session_id, action: addNote }));
    return { sid: r.session_id, episode: r.info.episode_id, hash: s.info.state_hash };
  }

  test("the reply says the episode ended, without its score; episode_result gives the score finish_previous: true gives", async () => {
    const hello = RESULT_SCHEMAS.hello.parse(await client.request("hello"));
    expect(hello.features).toContain("reset_finish_previous_later");
    expect(hello.ops).toContain("episode_result");

    const inLine = await played(5);
    const now = RESULT_SCHEMAS.reset.parse(await client.request("reset", { scenario_id: "notes-1", seed: 6, session_id: inLine.sid, finish_previous: true }));
    const later = await played(5);
    const reply = RESULT_SCHEMAS.reset.parse(await client.request("reset", { scenario_id: "notes-1", seed: 6, session_id: later.sid, finish_previous: "later" }));
    expect(reply.info.previous_episode).toEqual({ episode_id: later.episode, finished: true, pending: true, step: 1, state_hash: later.hash });
    // the new episode plays on while (or before) the old one is scored
    expect(await code(client.request("step", { session_id: later.sid, action: addNote }))).toBe("ok");

    const result = RESULT_SCHEMAS.episode_result.parse(await client.request("episode_result", { episode_id: later.episode }));
    const { episode_id: _a, ...scored } = result;
    const { episode_id: _b, ...expected } = now.info.previous_episode!;
    expect(scored).toEqual(expected);
    expect(result).toMatchObject({ finished: true, reward: 0.3333, end_reason: "client", terminated: true, step: 1, state_hash: later.hash });
    // asked again: the kept score
    expect(await client.request("episode_result", { episode_id: later.episode })).toEqual(result);
    // recorded as finish_previous: true records it
    const end = (id: string) => records.find((r) => r.t === "episode_end" && r.episode_id === id) as { how: string; result: { reward: number; reward_info: unknown } } | undefined;
    expect(end(later.episode)).toMatchObject({ how: "finish", result: { reward: 0.3333 } });
    expect(end(later.episode)!.result.reward_info).toEqual(end(inLine.episode)!.result.reward_info);
  });

  test("scored when idle without anyone asking: its end is recorded by itself", async () => {
    const p = await played(9);
    await client.request("reset", { scenario_id: "notes-1", session_id: p.sid, finish_previous: "later" });
    const deadline = Date.now() + 20_000;
    while (!records.some((r) => r.t === "episode_end" && r.episode_id === p.episode) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    expect(records.find((r) => r.t === "episode_end" && r.episode_id === p.episode)).toMatchObject({ how: "finish", result: { reward: 0.3333 } });
  });

  test("an episode that had ended, a session with no episode, and an unknown episode", async () => {
    const r = RESULT_SCHEMAS.reset.parse(await client.request("reset", { scenario_id: "notes-1", seed: 1 }));
    await client.request("finish", { session_id: r.session_id });
    const again = RESULT_SCHEMAS.reset.parse(await client.request("reset", { scenario_id: "notes-1", session_id: r.session_id, finish_previous: "later" }));
    expect(again.info.previous_episode).toEqual({ episode_id: r.info.episode_id, finished: false });
    expect(await code(client.request("episode_result", { episode_id: r.info.episode_id }))).toBe("bad_request");
    expect(await code(client.request("reset", { scenario_id: "no-such", session_id: r.session_id, finish_previous: "later" }))).toBe("unknown_scenario");
    const third = RESULT_SCHEMAS.reset.parse(await client.request("reset", { scenario_id: "notes-1", session_id: r.session_id, finish_previous: "later" }));
    expect(third.info.previous_episode).toBeUndefined();
    expect(await code(client.request("episode_result", { episode_id: "never" }))).toBe("bad_request");
    expect(await code(client.request("reset", { scenario_id: "notes-1", session_id: r.session_id, finish_previous: "soon" }))).toBe("bad_request");
  });
});

test("past maxPendingScores finishLaterWhenRoom waits for room: it settles once a score arrives", async () => {
  const rt = await EnvRuntime.start({ envs: [FIXTURES], workers: 0, maxPendingScores: 1, keptScores: 1 });
  try {
    const a = await rt.reset("notes-1", 1);
    const b = await rt.reset("notes-1", 2);
    expect(await rt.finishLaterWhenRoom(a.episode_id)).toEqual({ step: 0, state_hash: a.info.state_hash });
    expect(await rt.finishLaterWhenRoom(a.episode_id)).toBeNull(); // ended
    expect(await rt.finishLaterWhenRoom("no-such")).toBeNull();
    let room = false;
    const waiting = rt.finishLaterWhenRoom(b.episode_id).then((end) => ((room = true), end));
    await new Promise((r) => setImmediate(r));
    expect(room).toBe(false);
    expect((await rt.result(a.episode_id)).info.end_reason).toBe("client");
    expect(await waiting).toEqual({ step: 0, state_hash: b.info.state_hash });
    await rt.result(b.episode_id);
    // keptScores: 1, so a's score has given way to b's
    await expect(rt.result(a.episode_id)).rejects.toMatchObject({ code: "bad_request", message: expect.stringContaining("kept_scores") });
    expect(() => rt.finishLater("no-such")).toThrow();
  } finally {
    await rt.close();
  }
});

test("many resets waiting for score room over the wire all end their episodes later, none scored in line (one arriving score lets one through)", async () => {
  const rt = await EnvRuntime.start({ envs: [FIXTURES], workers: 0, scorerThread: true, maxPendingScores: 1 });
  const server = new BridgeServer({ runtime: rt, endpoint: "tcp://127.0.0.1:*", logger: silent, limits: { maxSessions: 16, maxFrameBytes: 1 << 20 } });
  await server.start();
  const client = new BridgeClient(server.endpoint, { timeoutMs: 20_000 });
  try {
    const sessions = await Promise.all(Array.from({ length: 8 }, async (_, i) => {
      const r = RESULT_SCHEMAS.reset.parse(await client.request("reset", { scenario_id: "notes-1", seed: i }));
      await client.request("step", { session_id: r.session_id, action: addNote });
      return r;
    }));
    const again = await Promise.all(sessions.map((r) => client.request("reset", { scenario_id: "notes-1", session_id: r.session_id, finish_previous: "later" })));
    // each previous episode ended pending (its score later), none with a score of its own: before,
    // the resets one arriving score released all saw the room and all but one scored in line
    expect(again.map((r) => RESULT_SCHEMAS.reset.parse(r).info.previous_episode)).toEqual(sessions.map((r) => expect.objectContaining({ episode_id: r.info.episode_id, finished: true, pending: true, step: 1 })));
    for (const r of sessions) expect(RESULT_SCHEMAS.episode_result.parse(await client.request("episode_result", { episode_id: r.info.episode_id }))).toMatchObject({ reward: 0.3333 });
  } finally {
    client.close();
    await server.stop();
    await rt.close();
  }
});

test("an idle score yields to requests between its checks; an urgent one runs straight through", async () => {
  const replies: EngineReply[] = [];
  const host = new EngineHost({ registry: EnvRegistry.load([FIXTURES]), reply: (r) => void replies.push(r) });
  const post = (req: Unslotted) => host.accept({ slot: 1, ...req });
  const turn = () => new Promise((r) => setImmediate(r));
  const answered = async (id: number) => {
    while (!replies.some((r) => r.id === id)) await turn();
  };
  try {
    post({ id: 1, op: "reset", episode: "a", scenario_id: "notes-1", seed: 1, user: null });
    post({ id: 2, op: "reset", episode: "b", scenario_id: "notes-1", seed: 2, user: null });
    await answered(2);
    post({ id: 3, op: "finish_later", episode: "a" });
    post({ id: 4, op: "score", episode: "a", urgent: false });
    // the end is answered in this turn (microtasks only); the score waits for a later one
    for (let i = 0; i < 50 && !replies.some((r) => r.id === 3); i++) await Promise.resolve();
    expect(replies.map((r) => r.id)).toContain(3);
    expect(replies.map((r) => r.id)).not.toContain(4);
    // two turns: the scoring has started (notes-1 has two JS checks) and paused after the first;
    // a step posted now is answered before the scoring ends
    await turn();
    await turn();
    post({ id: 5, op: "step", episode: "b", action: addNote });
    await answered(4);
    expect(replies.map((r) => r.id).slice(2)).toEqual([3, 5, 4]);
    expect(replies.find((r) => r.id === 4)).toMatchObject({ ok: true, value: { info: { end_reason: "client" } } });
    // urgent: scored within the turn it was asked in, and an idle request for it gets the same result
    post({ id: 6, op: "finish_later", episode: "b" });
    post({ id: 7, op: "score", episode: "b", urgent: false });
    post({ id: 8, op: "score", episode: "b", urgent: true });
    for (let i = 0; i < 50 && !replies.some((r) => r.id === 8); i++) await Promise.resolve();
    const [r7, r8] = [7, 8].map((id) => replies.find((r) => r.id === id));
    expect(r8).toMatchObject({ ok: true, value: { reward: expect.any(Number) } });
    expect(r7).toEqual({ ...r8, id: 7 });
    // nothing pending any more: refused
    post({ id: 9, op: "score", episode: "b", urgent: true });
    await answered(9);
    expect(replies.find((r) => r.id === 9)).toMatchObject({ ok: false, error: { code: "unknown_episode" } });
  } finally {
    host.close();
  }
});

test("on a scorer thread: the same score as in the engine's own thread, and the engine's thread does not run the checks", async () => {
  const scoreOn = async (scorerEnvs: string[] | null) => {
    const replies: EngineReply[] = [];
    const host = new EngineHost({ registry: EnvRegistry.load([FIXTURES]), reply: (r) => void replies.push(r), scorerEnvs });
    const post = (req: Unslotted) => host.accept({ slot: 1, ...req });
    try {
      post({ id: 1, op: "reset", episode: "a", scenario_id: "notes-1", seed: 4, user: null });
      post({ id: 2, op: "step", episode: "a", action: addNote });
      post({ id: 3, op: "finish_later", episode: "a" });
      post({ id: 4, op: "score", episode: "a", urgent: false });
      for (let i = 0; i < 2000 && !replies.some((r) => r.id === 4); i++) await new Promise((r) => setTimeout(r, 5));
      return replies.find((r) => r.id === 4);
    } finally {
      host.close();
    }
  };
  const inThread = await scoreOn(null);
  const runChecks = vi.spyOn(checker, "runChecks");
  const offThread = await scoreOn([FIXTURES]);
  expect(runChecks).not.toHaveBeenCalled(); // this thread ran no check: the scorer's did
  runChecks.mockRestore();
  expect(offThread).toMatchObject({ ok: true, value: { reward: 0.3333 } });
  expect(offThread).toEqual(inThread);
});
