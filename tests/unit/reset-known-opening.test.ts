// `reset` with `known_opening` (feature reset_known_opening): a client that keeps a scenario's
// opening (introduction, rules, tools) names it by env_hash and scenario_hash and the reply leaves
// it out; any other name gets it in full; the recording always has it.
import { pino } from "pino";
import { afterAll, beforeAll, expect, test } from "vitest";
import { EnvRuntime } from "../../bridge/core/engine/env-runtime.js";
import { BridgeServer } from "../../bridge/fronts/zmq/bridge-server.js";
import { BridgeClient, BridgeError } from "../../agent/bridge-client.js";
import { RESULT_SCHEMAS } from "../../protocol/messages.js";
import { FIXTURES } from "../helpers.js";

const records: Record<string, unknown>[] = [];
let runtime: EnvRuntime;
let server: BridgeServer;
let client: BridgeClient;

beforeAll(async () => {
  runtime = await EnvRuntime.start({ envs: [FIXTURES], workers: 0, recorder: { check: () => undefined, append: (r) => void records.push(r as Record<string, unknown>) } });
  server = new BridgeServer({ runtime, endpoint: "tcp://127.0.0.1:*", logger: pino({ level: "silent" }), limits: { maxSessions: 8, maxFrameBytes: 1 << 20 } });
  await server.start();
  client = new BridgeClient(server.endpoint, { timeoutMs: 20_000 });
});
afterAll(async () => {
  client.close();
  await server.stop();
  await runtime.close();
});

const reset = async (fields: Record<string, unknown>) => RESULT_SCHEMAS.reset.parse(await client.request("reset", { scenario_id: "notes-1", seed: 3, ...fields }));

test("the opening is left out exactly when the request names this episode's", async () => {
  expect(RESULT_SCHEMAS.hello.parse(await client.request("hello")).features).toContain("reset_known_opening");
  const full = await reset({});
  const { env_hash, scenario_hash } = full.info as unknown as { env_hash: string; scenario_hash: string };
  expect(full.info.tools!.length).toBeGreaterThan(0);
  expect(full.info.opening_omitted).toBeUndefined();

  const lean = await reset({ session_id: full.session_id, known_opening: { env_hash, scenario_hash } });
  expect(lean.info.opening_omitted).toBe(true);
  for (const k of ["introduction", "rules", "tools"]) expect(lean.info).not.toHaveProperty(k);
  // everything else is there, as in the full reply
  const { introduction: _i, rules: _r, tools: _t, episode_id: _e, ...restFull } = full.info as Record<string, unknown>;
  const { opening_omitted: _o, episode_id: _e2, previous_episode: _p, ...restLean } = lean.info as Record<string, unknown>;
  expect(restLean).toEqual(restFull);

  // another scenario's hash, or another env's: the opening in full
  for (const known of [{ env_hash, scenario_hash: "0".repeat(64) }, { env_hash: "f".repeat(64), scenario_hash }]) {
    const r = await reset({ session_id: full.session_id, known_opening: known });
    expect(r.info.tools).toEqual(full.info.tools);
    expect(r.info.opening_omitted).toBeUndefined();
  }
  // the recording has every episode's opening, whatever its reply left out
  const starts = records.filter((r) => r.t === "episode_start" && r.scenario_id === "notes-1");
  expect(starts.length).toBeGreaterThanOrEqual(4);
  for (const s of starts) expect(s.tools).toEqual(full.info.tools);
});

test("a malformed known_opening is a bad_request naming it, and nothing starts", async () => {
  const before = records.length;
  for (const known of [{ env_hash: "a" }, { env_hash: "a", scenario_hash: "" }, { env_hash: "a", scenario_hash: "b", extra: 1 }, "ab"]) {
    const e = await client.request("reset", { scenario_id: "notes-1", known_opening: known }).then(() => null, (x: BridgeError) => x);
    expect(e?.code).toBe("bad_request");
    expect(e?.message).toMatch(/known_opening/);
  }
  expect(records.length).toBe(before);
});

test("a reply with the opening left out and tools too, or neither, does not validate", () => {
  const info = { episode_id: "e", env_id: "x", scenario_id: "y", seed: 1 };
  const at = (extra: Record<string, unknown>) => RESULT_SCHEMAS.reset.safeParse({ session_id: "s", observation: { role: "user", content: "t" }, info: { ...info, ...extra } }).success;
  expect(at({ tools: [] })).toBe(true);
  expect(at({ opening_omitted: true })).toBe(true);
  expect(at({})).toBe(false);
  expect(at({ tools: [], opening_omitted: true })).toBe(false);
});
