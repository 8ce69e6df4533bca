import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { afterAll, beforeAll, expect, test } from "vitest";
import { EnvRuntime } from "../../bridge/core/engine/env-runtime.js";
import { ClosedResults, type ClosedResult } from "../../bridge/core/sessions/closed-results.js";
import { McpHttpServer } from "../../bridge/fronts/mcp/mcp-http-server.js";
import { ScenarioPicker } from "../../bridge/fronts/mcp/scenario-picker.js";
import { createLogger } from "../../bridge/fronts/zmq/logger.js";
import { BUNDLED_ENVS } from "../../envs/bundled.js";

const HOSTILE = join(import.meta.dirname, "..", "fixtures", "hostile");
let runtime: EnvRuntime;
let server: McpHttpServer;
let url: string;

const control = async (method: string, path: string, body?: unknown) => {
  const r = await fetch(`${server.controlUrl}${path}`, { method, headers: { authorization: `Bearer ${server.controlToken}`, "content-type": "application/json" }, body: body === undefined ? undefined : JSON.stringify(body) });
  return { status: r.status, body: (await r.json()) as Record<string, unknown> };
};

async function connect(headers: Record<string, string>): Promise<{ client: Client; transport: StreamableHTTPClientTransport }> {
  const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });
  const client = new Client({ name: "mcp-results.test", version: "0" });
  await client.connect(transport);
  return { client, transport };
}

beforeAll(async () => {
  process.env.ENVSCALER_LOG_LEVEL ??= "warn";
  runtime = await EnvRuntime.start({ envs: [BUNDLED_ENVS, HOSTILE], workers: 1, hardStopGraceMs: 200 });
  server = new McpHttpServer({ runtime, picker: new ScenarioPicker(runtime.registry, {}), limits: { maxSessions: 8, maxBodyBytes: 4096 }, logger: createLogger("mcp-results.test") });
  url = await server.start();
});

afterAll(async () => {
  await server?.stop();
  await runtime?.close();
});

test("an episode's score outlives its session: reward, status and finish answer by id and by rollout tag after the client closed", async () => {
  const { client, transport } = await connect({ "X-EnvScaler-Scenario": "hostile-1", "X-EnvScaler-Rollout": "kept" });
  const sid = transport.sessionId!;
  expect((await client.callTool({ name: "spin", arguments: {} })).isError).toBe(true); // env_timeout ends the episode
  await transport.terminateSession();
  await client.close();
  expect(server.sessionCount).toBe(0);
  for (const id of ["kept", sid]) {
    const reward = await control("GET", `/sessions/${id}/reward`);
    expect(reward.status, JSON.stringify(reward.body)).toBe(200);
    expect(reward.body).toMatchObject({ session_id: sid, rollout: "kept", scenario_id: "hostile-1", reward: 0, end_reason: "env_fault", error: { code: "env_timeout" }, closed: "closed by the client (HTTP DELETE)" });
  }
  expect(await control("GET", "/sessions/kept")).toMatchObject({ status: 200, body: { session_id: sid, ended: true, connected: false } });
  expect(await control("POST", "/sessions/kept/finish")).toMatchObject({ status: 200, body: { reward: 0, end_reason: "env_fault" } });
  // what needs the live episode is still refused, typed
  expect(await control("POST", "/sessions/kept/finish", { message: "late" })).toMatchObject({ status: 404, body: { error: { code: "session_closed" } } });
  expect(await control("GET", "/sessions/kept/state")).toMatchObject({ status: 404, body: { error: { code: "session_closed" } } });
  expect((await control("GET", "/stats")).body.results_kept).toBeGreaterThanOrEqual(1);
});

test("a session closed before its episode ended has no score, and says so", async () => {
  const { client, transport } = await connect({ "X-EnvScaler-Scenario": "library-1", "X-EnvScaler-Rollout": "unended" });
  await transport.terminateSession();
  await client.close();
  const reward = await control("GET", "/sessions/unended/reward");
  expect(reward).toMatchObject({ status: 404, body: { error: { code: "session_closed" } } });
  expect(String((reward.body.error as { message: string }).message)).toMatch(/closed before its episode ended.*no score/);
  expect(await control("GET", "/sessions/unended")).toMatchObject({ status: 200, body: { ended: false, connected: false } });
});

test("`refused` counts refusals only: a normal client's session and its probes leave it alone, an oversized body and a bad token count", async () => {
  const before = (await control("GET", "/stats")).body.refused as number;
  const { client, transport } = await connect({ "X-EnvScaler-Scenario": "library-1" });
  await client.listTools();
  // a newer client's probe before initialize, answered with an error by design
  const probe = await fetch(url, { method: "POST", headers: { "content-type": "application/json", accept: "application/json, text/event-stream" }, body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "server/discover" }) });
  expect(probe.status).toBe(400);
  await transport.terminateSession();
  await client.close();
  expect((await control("GET", "/stats")).body.refused).toBe(before);
  const big = await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ pad: "x".repeat(5000) }) });
  expect(big.status).toBe(413);
  const badToken = await fetch(`${server.controlUrl}/stats`, { headers: { authorization: "Bearer nope" } });
  expect(badToken.status).toBe(401);
  expect((await control("GET", "/stats")).body.refused).toBe(before + 2);
});

test("closed results are bounded in count and in time", () => {
  const kept = new ClosedResults({ maxCount: 2, ttlS: 10 });
  const r = (id: string, at: number): ClosedResult => ({ session_id: id, rollout: `r-${id}`, scenario_id: "s", seed: 0, episode_id: null, steps: 0, score: null, closed: "x", closed_at: at });
  kept.add(r("a", 0));
  kept.add(r("b", 1000));
  kept.add(r("c", 2000));
  expect(kept.get("a", 2000)).toBeNull(); // the oldest went when the third came
  expect(kept.get("r-b", 2000)?.session_id).toBe("b");
  expect(kept.get("c", 11_500)?.session_id).toBe("c");
  expect(kept.get("b", 11_500)).toBeNull(); // 10 s after its close
  expect(kept.size).toBe(1);
});
