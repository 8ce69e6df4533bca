// A bounded soak: hostile and benign sessions interleaved on one replica (the real server and a
// real client over ZeroMQ, one engine worker so every hostile call shares it with benign ones).
// The benign episodes must finish with the right reward while hostile ones loop, exhaust memory,
// flood output, hang a native builtin (the watchdog replaces the worker), send oversized,
// malformed and over-limit requests, retry, and close mid-fault; nothing may hang, nothing may be
// internal_error, and the replica's memory stays bounded.
import { join } from "node:path";
import { pino } from "pino";
import { afterAll, beforeAll, expect, test } from "vitest";
import { Dealer } from "zeromq";
import { EnvRuntime } from "../../bridge/core/engine/env-runtime.js";
import { BridgeServer } from "../../bridge/fronts/zmq/bridge-server.js";
import { BridgeClient, BridgeError } from "../../agent/bridge-client.js";
import { decodeFrame, encodeFrame } from "../../protocol/codec.js";
import { PROTOCOL_VERSION } from "../../protocol/messages.js";
import { FIXTURES } from "../helpers.js";

const HOSTILE = join(FIXTURES, "..", "hostile");
let runtime: EnvRuntime;
let server: BridgeServer;
let client: BridgeClient;

beforeAll(async () => {
  // quarantine is tested on its own (limits.test.ts); here the hostile scenario must keep running
  runtime = await EnvRuntime.start({ envs: [FIXTURES, HOSTILE], workers: 1, hardStopGraceMs: 300, maxActionBytes: 64 << 10, quarantineAfter: 1000, maxRestartsPerMinute: 1000 });
  server = new BridgeServer({ runtime, endpoint: "tcp://127.0.0.1:*", logger: pino({ level: "silent" }), limits: { maxSessions: 64, maxFrameBytes: 4 << 20 } });
  await server.start();
  // a hang anywhere shows up as this client's timeout, well inside the test's own
  client = new BridgeClient(server.endpoint, { timeoutMs: 30_000 });
});
afterAll(async () => {
  client.close();
  await server.stop();
  await runtime.close();
});

const REFERENCE = [
  { name: "add_note", arguments: { user_id: "u2", title: "todo", body: "call mom" } },
  { name: "delete_note", arguments: { note_id: "n1" } },
];
const FINAL = "Done: Bob has his 'todo' note and Ann's groceries note is deleted.";

async function benign(seed: number): Promise<number> {
  const { session_id } = await client.request<{ session_id: string }>("reset", { scenario_id: "notes-1", seed });
  for (const a of REFERENCE) await client.request("step", { session_id, action: a });
  const end = await client.request<{ reward: number }>("step", { session_id, action: FINAL });
  await client.request("close", { session_id });
  return end.reward;
}

const codeOf = (e: unknown): string => (e instanceof BridgeError ? e.code : `thrown: ${String(e)}`);

/** One hostile session: refused requests first (the episode goes on), then a misbehaving tool. */
async function hostile(i: number): Promise<{ refused: string[]; fault: string }> {
  const tool = ["spin", "bomb", "big_output", "deep_json", "cyclic", "recurse"][i % 6]!;
  const refused: string[] = [];
  const { session_id } = await client.request<{ session_id: string }>("reset", { scenario_id: "hostile-1", seed: i });
  const stepError = async (action: unknown) => {
    const r = await client.request<{ terminated: boolean; observation: { content: string } }>("step", { session_id, action });
    expect(r.terminated).toBe(false);
    refused.push((JSON.parse(r.observation.content) as { error: { type: string } }).error.type);
  };
  await stepError(42);
  await stepError({ name: "ping", arguments: { x: Number.NaN } });
  await stepError(Array.from({ length: 65 }, () => ({ name: "ping", arguments: {} })));
  await stepError({ name: "no_such_tool", arguments: {} });
  await client.request("step", { session_id, action: { name: "ping", arguments: { pad: "z".repeat(100_000) } } }).catch((e) => refused.push(codeOf(e)));
  await client.request("step", { session_id: "s-no-such-session", action: "hi" }).catch((e) => refused.push(codeOf(e)));
  // snapshots up to the episode's limit are fine; the one past it is refused
  const snaps: string[] = [];
  for (let k = 0; k < 32; k++) snaps.push(((await client.request<{ snapshot_id: string }>("snapshot", { session_id }))).snapshot_id);
  await client.request("snapshot", { session_id }).catch((e) => refused.push(codeOf(e)));
  await client.request("drop_snapshot", { snapshot_id: snaps[0] });
  let fault: string;
  if (i % 2 === 0) {
    // the misbehaving step and a close racing it: the close must be answered whatever the step does
    const step = client.request("step", { session_id, action: { name: tool, arguments: {} } });
    const close = client.request("close", { session_id });
    fault = await step.then((r) => (r as { info: { error?: { code: string } } }).info.error?.code ?? "ok", codeOf);
    await close;
  } else {
    const r = await client.request<{ info: { error?: { code: string } } }>("step", { session_id, action: { name: tool, arguments: {} } });
    fault = r.info.error?.code ?? "ok";
    await client.request("close", { session_id });
  }
  return { refused, fault };
}

/** Garbage and replayed frames from a raw socket: each gets an answer, and a replayed id is not run twice. */
async function rawFrames(): Promise<void> {
  const raw = new Dealer();
  raw.receiveTimeout = 30_000;
  raw.connect(server.endpoint);
  try {
    const ask = async (frame: Buffer) => {
      await raw.send(frame);
      const reply = await raw.receive();
      return decodeFrame(reply[reply.length - 1]!) as { ok: boolean; error?: { code: string }; result?: { session_id?: string; info?: { step: number } } };
    };
    expect(await ask(Buffer.from("c1", "hex"))).toMatchObject({ ok: false, error: { code: "bad_request" } });
    expect(await ask(encodeFrame({ v: PROTOCOL_VERSION, id: 1, op: "no_such_op" }))).toMatchObject({ ok: false });
    const reset = await ask(encodeFrame({ v: PROTOCOL_VERSION, id: 2, op: "reset", scenario_id: "notes-1", seed: 7 }));
    const session_id = reset.result!.session_id!;
    const step = encodeFrame({ v: PROTOCOL_VERSION, id: 3, op: "step", session_id, action: REFERENCE[0] });
    const first = await ask(step);
    const again = await ask(step); // a client's retry after a timeout: the cached reply, not a second step
    expect(again).toEqual(first);
    expect(first.result!.info!.step).toBe(1);
    expect(await ask(encodeFrame({ v: PROTOCOL_VERSION, id: 4, op: "close", session_id }))).toMatchObject({ ok: true });
  } finally {
    raw.close();
  }
}

test("benign sessions finish with reward 1.0 among hostile ones; nothing hangs or is internal_error; memory stays bounded", { timeout: 120_000 }, async () => {
  const rssBefore = process.memoryUsage().rss;
  const rounds = 2;
  const rewards: number[] = [];
  const hostiles: { refused: string[]; fault: string }[] = [];
  for (let round = 0; round < rounds; round++) {
    const work: Promise<unknown>[] = [rawFrames()];
    for (let i = 0; i < 6; i++) {
      work.push(benign(round * 100 + i).then((r) => rewards.push(r)));
      work.push(hostile(round * 6 + i).then((h) => hostiles.push(h)));
    }
    await Promise.all(work);
  }
  expect(rewards).toEqual(Array(rounds * 6).fill(1));
  expect(hostiles).toHaveLength(rounds * 6);
  for (const h of hostiles) {
    expect(h.refused).toEqual(["invalid_action", "invalid_arguments", "invalid_action", "unknown_tool", "too_large", "unknown_session", "too_large"]);
    // each misbehaving tool ends its own episode with a typed env fault, or is a tool error the agent reads
    expect(["env_timeout", "env_oom", "env_output_invalid", "tool_exception", "ok"]).toContain(h.fault);
  }
  const stats = await client.request<{ sessions: number; snapshots: number; hard_stops: number }>("stats");
  expect(stats.sessions).toBe(0);
  expect(stats.snapshots).toBe(0); // a closed episode's snapshots go with it
  // the native hangs (deep_json among them) were stopped at their deadlines by the sandbox's fuel
  // checks, inside their own sandboxes: the watchdog never had to replace the worker
  expect(stats.hard_stops).toBe(0);
  // every hostile sandbox was dropped; what is left is bounded (a bomb may take its own 256 MiB cap while it runs)
  const grownMb = (process.memoryUsage().rss - rssBefore) / (1 << 20);
  expect(grownMb).toBeLessThan(1024);
});

test("requests queued behind native hangs are all answered when the watchdog replaces the worker", { timeout: 60_000 }, async () => {
  const neighbour = await client.request<{ session_id: string }>("reset", { scenario_id: "notes-1", seed: 1 });
  const closedNeighbour = await client.request<{ session_id: string }>("reset", { scenario_id: "notes-1", seed: 2 });
  const { session_id } = await client.request<{ session_id: string }>("reset", { scenario_id: "hostile-1", seed: 3 });
  // the native hang first, then (queued behind it on the one worker) a neighbour's step, another's
  // close, a snapshot drop and the hanging episode's own close
  const snap = await client.request<{ snapshot_id: string }>("snapshot", { session_id: neighbour.session_id });
  const second = await client.request<{ session_id: string }>("reset", { scenario_id: "hostile-1", seed: 4 });
  const hang = client.request("step", { session_id, action: { name: "deep_json", arguments: {} } });
  // re-posted to the replacement worker by the recovery, this one hangs that worker too
  const hang2 = client.request("step", { session_id: second.session_id, action: { name: "deep_json", arguments: {} } });
  const step = client.request("step", { session_id: neighbour.session_id, action: REFERENCE[0] });
  const close = client.request("close", { session_id: closedNeighbour.session_id });
  const drop = client.request("drop_snapshot", { snapshot_id: snap.snapshot_id });
  const closeHung = client.request("close", { session_id });
  expect(((await hang) as { info: { error?: { code: string } } }).info.error?.code).toBe("env_timeout");
  expect(((await hang2) as { info: { error?: { code: string } } }).info.error?.code).toBe("env_timeout");
  // the neighbour was restored on the new worker and its step ran there, once
  expect(((await step) as { info: { step: number } }).info.step).toBe(1);
  expect(await close).toEqual({ closed: true });
  expect(await drop).toMatchObject({ dropped: true });
  expect(await closeHung).toEqual({ closed: true });
  const end = await client.request<{ info: { step: number } }>("step", { session_id: neighbour.session_id, action: REFERENCE[1] });
  expect(end.info.step).toBe(2);
  await client.request("close", { session_id: neighbour.session_id });
  await client.request("close", { session_id: second.session_id });
});
