import { join } from "node:path";
import { pino } from "pino";
import { afterAll, beforeAll, expect, test } from "vitest";
import { Dealer } from "zeromq";
import { EnvRuntime } from "../../bridge/core/engine/env-runtime.js";
import { BridgeServer } from "../../bridge/fronts/zmq/bridge-server.js";
import { decodeFrame, encodeFrame } from "../../protocol/codec.js";
import { BridgeClient, BridgeError } from "../../agent/bridge-client.js";
import { PROTOCOL_VERSION, RESULT_SCHEMAS } from "../../protocol/messages.js";
import type { StepResult } from "../../bridge/core/episode/episode.js";
import { FIXTURES } from "../helpers.js";

const HOSTILE = join(FIXTURES, "..", "hostile");
const silent = pino({ level: "silent" });
let runtime: EnvRuntime;
let server: BridgeServer;
let client: BridgeClient;

beforeAll(async () => {
  runtime = await EnvRuntime.start({ envs: [FIXTURES, HOSTILE], workers: 1, hardStopGraceMs: 300 });
  server = new BridgeServer({ runtime, endpoint: "tcp://127.0.0.1:*", logger: silent, limits: { maxSessions: 6, maxFrameBytes: 1 << 20 } });
  await server.start();
  client = new BridgeClient(server.endpoint, { timeoutMs: 20_000 });
});
afterAll(async () => {
  client.close();
  await server.stop();
  await runtime.close();
});

const code = (p: Promise<unknown>) => p.then(() => "ok", (e: BridgeError) => e.code);
const ref = [
  { name: "add_note", arguments: { user_id: "u2", title: "todo", body: "call mom" } },
  { name: "delete_note", arguments: { note_id: "n1" } },
];

test("hello, list_envs and list_scenarios answer in the documented shapes", async () => {
  const hello = RESULT_SCHEMAS.hello.parse(await client.request("hello", { client: "vitest" }));
  expect(hello).toMatchObject({ protocol_version: PROTOCOL_VERSION, replica: 0, instance: server.instance });
  const envs = RESULT_SCHEMAS.list_envs.parse(await client.request("list_envs"));
  expect(envs.envs.map((e) => e.env_id).sort()).toEqual(["hostile-v1", "notes-v1"]);
  const all = RESULT_SCHEMAS.list_scenarios.parse(await client.request("list_scenarios"));
  expect(all.scenarios.length).toBeGreaterThan(2);
  const notes = RESULT_SCHEMAS.list_scenarios.parse(await client.request("list_scenarios", { env_id: "notes-v1" }));
  expect(notes.scenarios.map((s) => s.scenario_id)).toEqual(["notes-1", "notes-2"]);
  expect(await code(client.request("list_scenarios", { env_id: "nope-v1" }))).toBe("unknown_env");
  // an empty filter is a mistake, not "no filter"
  expect(await code(client.request("list_scenarios", { env_id: "" }))).toBe("bad_request");
});

test("stats answers in the documented shape, every counter of the runtime included", async () => {
  const stats = RESULT_SCHEMAS.stats.parse(await client.request("stats"));
  expect(stats).toMatchObject({ replica: 0, hard_stops: 0, restored: 0, lost: 0, replayed_steps: 0, snapshots: 0, snapshot_bytes: 0, quarantined: [] });
  expect(stats).not.toHaveProperty("episodes"); // the wire's name for them is `sessions`
});

test("a reference solution over the wire scores 1.0; state, finish and close behave", async () => {
  const r = RESULT_SCHEMAS.reset.parse(await client.request("reset", { scenario_id: "notes-1", seed: 3 }));
  expect(r.observation.content).toMatch(/todo/);
  expect(r.info.seed).toBe(3);
  for (const a of ref) RESULT_SCHEMAS.step.parse(await client.request("step", { session_id: r.session_id, action: a }));
  const state = RESULT_SCHEMAS.state.parse(await client.request("state", { session_id: r.session_id }));
  expect(JSON.parse(state.state_json).notes.n1).toBeUndefined();
  const end = RESULT_SCHEMAS.step.parse(await client.request("step", { session_id: r.session_id, action: "Done: added Bob's note and deleted n1." }));
  expect(end).toMatchObject({ reward: 1, terminated: true });
  expect(await code(client.request("step", { session_id: r.session_id, action: "again" }))).toBe("episode_done");
  // reset reuses the session
  const again = RESULT_SCHEMAS.reset.parse(await client.request("reset", { scenario_id: "notes-1", seed: 3, session_id: r.session_id }));
  expect(again.session_id).toBe(r.session_id);
  expect(again.info.state_hash).toBe(r.info.state_hash);
  const fin = RESULT_SCHEMAS.finish.parse(await client.request("finish", { session_id: r.session_id }));
  expect(fin.terminated).toBe(true);
  expect(fin.reward).toBeLessThan(1);
  expect(await client.request("close", { session_id: r.session_id })).toEqual({ closed: true });
  expect(await client.request("close", { session_id: r.session_id })).toEqual({ closed: true });
  expect(await code(client.request("step", { session_id: r.session_id, action: "x" }))).toBe("session_closed");
  expect(await code(client.request("state", { session_id: "s-0-deadbeef-00" }))).toBe("unknown_session");
  expect(await code(client.request("close", { session_id: "never" }))).toBe("unknown_session");
});

test("agent mistakes are observations; protocol mistakes are typed errors", async () => {
  const { session_id } = await client.request<{ session_id: string }>("reset", { scenario_id: "notes-1" });
  // the client has put back the observation text the wire leaves out (protocol/step-wire.ts)
  const bad = RESULT_SCHEMAS.step.parse(await client.request("step", { session_id, action: { name: "add_note", arguments: { colour: "red" } } })) as StepResult;
  expect(bad.terminated).toBe(false);
  expect(bad.observation.content).toMatch(/invalid_arguments/);
  const unknown = RESULT_SCHEMAS.step.parse(await client.request("step", { session_id, action: { name: "rm_rf", arguments: {} } })) as StepResult;
  expect(unknown.observation.content).toMatch(/unknown_tool/);
  expect(await code(client.request("reset", { scenario_id: "nope-1" }))).toBe("unknown_scenario");
  expect(await code(client.request("step", { session_id }))).toBe("bad_request");
  expect(await code(client.request("reset", { scenario_id: "notes-1", seed: 1.5 }))).toBe("bad_request");
  expect(await code(client.request("teleport"))).toBe("unknown_op");
  await client.request("close", { session_id });
});

test("step_batch steps many sessions in one message; one failure does not fail the others", async () => {
  const a = await client.request<{ session_id: string }>("reset", { scenario_id: "notes-1", seed: 1 });
  const b = await client.request<{ session_id: string }>("reset", { scenario_id: "notes-1", seed: 2 });
  const batch = RESULT_SCHEMAS.step_batch.parse(
    await client.request("step_batch", { steps: [{ session_id: a.session_id, action: ref[0] }, { session_id: "s-0-00000000-ff", action: ref[0] }, { session_id: b.session_id, action: ref[0] }] }),
  );
  expect(batch.results.map((r) => r.ok)).toEqual([true, false, true]);
  expect(batch.results[1]).toMatchObject({ ok: false, error: { code: "unknown_session" } });
  await client.request("close", { session_id: a.session_id });
  await client.request("close", { session_id: b.session_id });
});

test("a hostile env ends only its own episode while another session keeps stepping", async () => {
  const good = await client.request<{ session_id: string }>("reset", { scenario_id: "notes-1", seed: 5 });
  const bad = await client.request<{ session_id: string }>("reset", { scenario_id: "hostile-1", seed: 5 });
  const [spin, ok] = await Promise.all([
    client.request("step", { session_id: bad.session_id, action: { name: "native_hang", arguments: {} } }),
    client.request("step", { session_id: good.session_id, action: ref[0] }),
  ]);
  expect(RESULT_SCHEMAS.step.parse(spin)).toMatchObject({ terminated: true, info: { end_reason: "env_fault", error: { code: "env_timeout" } } });
  expect(RESULT_SCHEMAS.step.parse(ok).terminated).toBe(false);
  const next = RESULT_SCHEMAS.step.parse(await client.request("step", { session_id: good.session_id, action: ref[1] }));
  expect(next.info.step).toBe(2);
  const bomb = RESULT_SCHEMAS.reset.parse(await client.request("reset", { scenario_id: "hostile-1", session_id: bad.session_id }));
  const oom = RESULT_SCHEMAS.step.parse(await client.request("step", { session_id: bomb.session_id, action: { name: "bomb", arguments: {} } }));
  // out of memory, or out of time while allocating on a busy machine: either way a typed env fault
  expect(oom).toMatchObject({ terminated: true, info: { end_reason: "env_fault" } });
  expect((oom.info as { error?: { code: string } }).error?.code).toMatch(/^env_(oom|timeout|crashed)$/);
  await client.request("close", { session_id: good.session_id });
  await client.request("close", { session_id: bad.session_id });
});

test("hostile frames get bad_request and the server keeps serving", async () => {
  const raw = new Dealer();
  raw.receiveTimeout = 5000;
  raw.connect(server.endpoint);
  const ask = async (frames: Buffer[]) => {
    await raw.send(frames);
    const reply = await raw.receive();
    return decodeFrame(reply[reply.length - 1]!) as { ok: boolean; error: { code: string }; id: unknown };
  };
  expect(await ask([Buffer.from("c1", "hex")])).toMatchObject({ ok: false, id: null, error: { code: "bad_request" } });
  expect(await ask([Buffer.from("dd7fffffff", "hex")])).toMatchObject({ error: { code: "bad_request" } });
  expect(await ask([encodeFrame({ v: PROTOCOL_VERSION, id: 1, op: "hello" }), encodeFrame({ v: PROTOCOL_VERSION, id: 2, op: "hello" })])).toMatchObject({ error: { code: "bad_request" } });
  expect(await ask(Array.from({ length: 200 }, () => Buffer.from("00", "hex")))).toMatchObject({ error: { code: "bad_request" } });
  // a REQ-style empty delimiter is accepted and mirrored
  await raw.send([Buffer.alloc(0), encodeFrame({ v: PROTOCOL_VERSION, id: 9, op: "hello" })]);
  const mirrored = await raw.receive();
  expect(mirrored.length).toBe(2);
  expect(mirrored[0]!.length).toBe(0);
  expect(decodeFrame(mirrored[1]!)).toMatchObject({ id: 9, ok: true });
  raw.close();
  // an oversized frame makes ZeroMQ drop that peer; others are served
  const big = new Dealer();
  big.connect(server.endpoint);
  await big.send(encodeFrame({ v: PROTOCOL_VERSION, id: 1, op: "hello", client: "x".repeat(2 << 20) }));
  big.close();
  expect((await client.request<{ instance: string }>("hello")).instance).toBe(server.instance);
});

test("reset in place: finish_previous scores the running episode in the same request; a failed reset leaves no episode", async () => {
  const hello = RESULT_SCHEMAS.hello.parse(await client.request("hello"));
  expect(hello.features).toEqual(expect.arrayContaining(["reset_finish_previous", "null_action"]));
  const first = RESULT_SCHEMAS.reset.parse(await client.request("reset", { scenario_id: "notes-1", seed: 3 }));
  const sid = first.session_id;
  await client.request("step", { session_id: sid, action: ref[0] });
  const second = RESULT_SCHEMAS.reset.parse(await client.request("reset", { scenario_id: "notes-1", seed: 4, session_id: sid, finish_previous: true }));
  expect(second.session_id).toBe(sid);
  expect(second.info.previous_episode).toMatchObject({ episode_id: first.info.episode_id, finished: true, terminated: true, step: 1, end_reason: "client", reward: 0.3333 });
  // a null action is an observation like any other unreadable one
  const none = RESULT_SCHEMAS.step.parse(await client.request("step", { session_id: sid, action: null }));
  expect(JSON.parse((none.observation as { content: string }).content)).toMatchObject({ error: { type: "invalid_action" } });
  // without finish_previous no previous_episode; an unknown scenario ends the old episode first
  expect(await code(client.request("reset", { scenario_id: "no-such", session_id: sid }))).toBe("unknown_scenario");
  for (const op of ["step", "state", "finish"]) expect(await code(client.request(op, { session_id: sid, ...(op === "step" ? { action: "hi" } : {}) }))).toBe("episode_done");
  const third = RESULT_SCHEMAS.reset.parse(await client.request("reset", { scenario_id: "notes-1", session_id: sid, finish_previous: true }));
  expect(third.info.previous_episode).toBeUndefined(); // the session had no episode left to finish
  expect(await client.request("close", { session_id: sid })).toEqual({ closed: true });
});

test("ids come back exactly as sent, and a close waits for the session's earlier requests", async () => {
  const raw = new Dealer();
  raw.receiveTimeout = 10_000;
  raw.connect(server.endpoint);
  const receive = async () => {
    const reply = await raw.receive();
    return { bytes: reply[reply.length - 1]!, body: decodeFrame(reply[reply.length - 1]!) as { ok: boolean; id: unknown; result: Record<string, unknown>; error?: { code: string } } };
  };
  // a 2^32 id must come back as a msgpack int (Python would read a float64 as 4294967296.0)
  await raw.send(encodeFrame({ v: PROTOCOL_VERSION, id: 2 ** 32, op: "hello" }));
  const wide = await receive();
  expect(wide.body.id).toBe(2 ** 32);
  expect(wide.bytes.includes(Buffer.from("a26964d30000000100000000", "hex"))).toBe(true); // "id": int64 2^32
  expect(wide.bytes.includes(Buffer.from("a26964cb", "hex"))).toBe(false); // "id" followed by a float64
  // 100 characters outside the BMP: a valid id (≤ 128 characters), so it is echoed, also on errors
  const emoji = "😀".repeat(100);
  await raw.send(encodeFrame({ v: PROTOCOL_VERSION, id: emoji, op: "list_scenarios", env_id: "nope-v1" }));
  expect((await receive()).body).toMatchObject({ id: emoji, ok: false, error: { code: "unknown_env" } });
  // step, step, step, close sent back to back: the steps run first (requests of one session run in arrival order)
  await raw.send(encodeFrame({ v: PROTOCOL_VERSION, id: 1, op: "reset", scenario_id: "notes-1", seed: 0 }));
  const sid = (await receive()).body.result.session_id as string;
  for (let i = 2; i <= 4; i++) await raw.send(encodeFrame({ v: PROTOCOL_VERSION, id: i, op: "step", session_id: sid, action: { name: "list_notes", arguments: { user_id: "u1" } } }));
  await raw.send(encodeFrame({ v: PROTOCOL_VERSION, id: 5, op: "close", session_id: sid }));
  const replies = [];
  for (let i = 0; i < 4; i++) replies.push((await receive()).body);
  expect(replies.map((r) => [r.id, r.ok])).toEqual([[2, true], [3, true], [4, true], [5, true]]);
  // the wire step reply, as sent: it fits the schema, and the tool output is in it once
  const wire = RESULT_SCHEMAS.step.parse(replies[0]!.result);
  expect("content" in wire.observation).toBe(false);
  expect((wire.observation as { tool_results: { content: string }[] }).tool_results[0]!.content).toContain("groceries");
  expect(JSON.stringify(replies[0]!.result).split("groceries").length - 1).toBe(1);
  await raw.send(encodeFrame({ v: PROTOCOL_VERSION, id: 6, op: "step", session_id: sid, action: "hi" }));
  expect((await receive()).body).toMatchObject({ id: 6, error: { code: "session_closed" } });
  // step, close, then a reset / step / snapshot sent right behind the close: the close takes its
  // place in the session's order, so all three after it find the session closed and nothing is
  // left running (a reset after the close once opened an episode no session owned)
  const episodes = () => runtime.stats().workers.reduce((a, b) => a + b, 0);
  // (fresh ids each round: a repeated id of the same op is answered from the retry memory)
  for (const [round, [op, extra]] of ([["reset", { scenario_id: "notes-1", seed: 1 }], ["step", { action: "hi" }], ["snapshot", {}]] as const).entries()) {
    const id = 10 * (round + 1);
    await raw.send(encodeFrame({ v: PROTOCOL_VERSION, id, op: "reset", scenario_id: "notes-1", seed: 0 }));
    const s2 = (await receive()).body.result.session_id as string;
    const before = episodes();
    await raw.send(encodeFrame({ v: PROTOCOL_VERSION, id: id + 1, op: "step", session_id: s2, action: { name: "list_notes", arguments: { user_id: "u1" } } }));
    await raw.send(encodeFrame({ v: PROTOCOL_VERSION, id: id + 2, op: "close", session_id: s2 }));
    await raw.send(encodeFrame({ v: PROTOCOL_VERSION, id: id + 3, op, session_id: s2, ...extra }));
    const got = [];
    for (let i = 0; i < 3; i++) got.push((await receive()).body);
    expect(got.map((r) => [r.id, r.ok, r.error?.code]), op).toEqual([[id + 1, true, undefined], [id + 2, true, undefined], [id + 3, false, "session_closed"]]);
    expect(episodes(), `no episode is left behind by a ${op} after the close`).toBe(before - 1);
  }
  raw.close();
});

test("the session limit gives too_many_sessions; closing frees a slot", async () => {
  const ids: string[] = [];
  for (;;) {
    const r = await client.request("reset", { scenario_id: "notes-1" }).catch((e: BridgeError) => e);
    if (r instanceof BridgeError) {
      expect(r.code).toBe("too_many_sessions");
      break;
    }
    ids.push((r as { session_id: string }).session_id);
  }
  expect(ids.length).toBe(6 - server.sessionCount + ids.length);
  await client.request("close", { session_id: ids[0] });
  const r = await client.request<{ session_id: string }>("reset", { scenario_id: "notes-1" });
  ids[0] = r.session_id;
  for (const id of ids) await client.request("close", { session_id: id });
});

test("the idle reaper closes unused sessions with a reason", async () => {
  const rt = await EnvRuntime.start({ envs: [FIXTURES] });
  const s = new BridgeServer({ runtime: rt, endpoint: "tcp://127.0.0.1:*", logger: silent, limits: { idleTimeoutS: 0.3 } });
  await s.start();
  const c = new BridgeClient(s.endpoint, { timeoutMs: 10_000 });
  try {
    const r = await c.request<{ session_id: string }>("reset", { scenario_id: "notes-1" });
    await new Promise((res) => setTimeout(res, 800));
    expect(s.sessionCount).toBe(0);
    const err = await c.request("step", { session_id: r.session_id, action: "x" }).catch((e: BridgeError) => e);
    expect(err).toBeInstanceOf(BridgeError);
    expect((err as BridgeError).code).toBe("session_closed");
    expect((err as BridgeError).message).toMatch(/idle reaper/);
    expect(rt.stats().episodes).toBe(0);
  } finally {
    c.close();
    await s.stop();
    await rt.close();
  }
});

test("stopping lets in-flight requests finish and answers later ones with shutting_down", async () => {
  const rt = await EnvRuntime.start({ envs: [FIXTURES, HOSTILE], hardStopGraceMs: 300 });
  const s = new BridgeServer({ runtime: rt, endpoint: "tcp://127.0.0.1:*", logger: silent });
  await s.start();
  const c = new BridgeClient(s.endpoint, { timeoutMs: 10_000 });
  try {
    const r = await c.request<{ session_id: string }>("reset", { scenario_id: "hostile-1" });
    const slow = c.request("step", { session_id: r.session_id, action: { name: "spin", arguments: {} } });
    await new Promise((res) => setTimeout(res, 50));
    const stopped = s.stop();
    const late = await c.request("hello").catch((e: BridgeError) => e.code);
    expect(late).toBe("shutting_down");
    expect(RESULT_SCHEMAS.step.parse(await slow).info).toMatchObject({ end_reason: "env_fault" });
    await stopped;
  } finally {
    c.close();
    await rt.close();
  }
});
