import { cpSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { CallToolResultSchema, ErrorCode, McpError, ToolListChangedNotificationSchema, type CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { EnvRuntime } from "../../bridge/core/engine/env-runtime.js";
import { InFlightGate } from "../../bridge/fronts/mcp/in-flight-gate.js";
import { McpHttpServer } from "../../bridge/fronts/mcp/mcp-http-server.js";
import { isLoopback, RequestGuard } from "../../bridge/fronts/mcp/request-guard.js";
import { ScenarioPicker } from "../../bridge/fronts/mcp/scenario-picker.js";
import { createLogger } from "../../bridge/fronts/zmq/logger.js";
import { BUNDLED_ENVS } from "../../envs/bundled.js";

const HOSTILE = join(import.meta.dirname, "..", "fixtures", "hostile");
const CLI = join(import.meta.dirname, "..", "..", "cli", "main.ts");
const LIBRARY_1 = (JSON.parse(readFileSync(join(BUNDLED_ENVS, "library", "scenarios.json"), "utf8")) as { id: string; reference_actions: { name: string; arguments: Record<string, unknown> }[] }[])[0]!;

const textOf = (r: unknown) => ((r as CallToolResult).content[0] as { text: string }).text;

async function connect(url: string, headers: Record<string, string>): Promise<{ client: Client; transport: StreamableHTTPClientTransport }> {
  const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });
  const client = new Client({ name: "mcp.test", version: "0" });
  await client.connect(transport);
  return { client, transport };
}

/**
 * A multi-turn task (BFCL's shape) made from the notes fixture: list Ann's notes, then, in a second
 * turn that adds the held-out `roll` tool, roll a number.
 */
function multiTurnEnvs(): string {
  const dir = join(mkdtempSync(join(tmpdir(), "mcp-turns-")), "notes");
  cpSync(join(import.meta.dirname, "..", "fixtures", "envs", "notes"), dir, { recursive: true });
  const scenario = { id: "notes-turns", env_id: "notes-v1", task: "List Ann's (u1) notes.", user_turns: [{ content: "Now roll a number.", add_tools: ["roll"] }], checks: [] };
  writeFileSync(join(dir, "scenarios.json"), JSON.stringify([scenario]));
  return dirname(dir);
}

describe("a multi-turn task over MCP", () => {
  test("message_user ends a turn and brings the next request; held-out tools appear with a tools/list_changed notification", async () => {
    const runtime = await EnvRuntime.start({ envs: [multiTurnEnvs()], workers: 1 });
    const server = new McpHttpServer({ runtime, picker: new ScenarioPicker(runtime.registry, {}), limits: { maxSessions: 4 }, logger: createLogger("mcp.test") });
    const url = await server.start();
    try {
      const { client, transport } = await connect(url, { "X-EnvScaler-Scenario": "notes-turns" });
      let changed = 0;
      client.setNotificationHandler(ToolListChangedNotificationSchema, () => {
        changed++;
      });
      const names = async () => (await client.listTools()).tools.map((t) => t.name).sort();
      expect(await names()).toEqual(["add_note", "delete_note", "escalate", "explode", "list_notes", "message_user"]);
      expect(client.getInstructions()).toMatch(/2 requests from the user/);
      expect((await client.callTool({ name: "list_notes", arguments: { user_id: "u1" } })).isError).toBeFalsy();
      const next = await client.callTool({ name: "message_user", arguments: { message: "Ann has one note: groceries." } });
      expect(textOf(next)).toBe("Now roll a number.");
      expect((next._meta as Record<string, unknown>)["envscaler/episode_ended"]).toBeUndefined();
      for (let i = 0; i < 50 && changed === 0; i++) await new Promise((r) => setTimeout(r, 20));
      expect(changed).toBe(1);
      expect(await names()).toContain("roll");
      const roll = await client.callTool({ name: "roll", arguments: {} });
      expect(roll.isError, textOf(roll)).toBeFalsy();
      const end = await client.callTool({ name: "message_user", arguments: { message: "Rolled." } });
      expect(textOf(end)).toBe("Task finished");
      expect((end._meta as Record<string, unknown>)["envscaler/episode_ended"]).toBe("text_reply");
      await transport.terminateSession();
      await client.close();
    } finally {
      await server.stop();
      await runtime.close();
    }
  });
});

describe("envscaler mcp in-process, TS SDK clients", () => {
  let runtime: EnvRuntime;
  let server: McpHttpServer;
  let url: string;
  const control = async (method: string, path: string, body?: unknown) => {
    const r = await fetch(`${server.controlUrl}${path}`, { method, headers: { authorization: `Bearer ${server.controlToken}`, "content-type": "application/json" }, body: body === undefined ? undefined : JSON.stringify(body) });
    return { status: r.status, body: (await r.json()) as Record<string, unknown> };
  };

  beforeAll(async () => {
    process.env.ENVSCALER_LOG_LEVEL ??= "warn";
    runtime = await EnvRuntime.start({ envs: [BUNDLED_ENVS, HOSTILE], workers: 2, hardStopGraceMs: 200 });
    server = new McpHttpServer({ runtime, picker: new ScenarioPicker(runtime.registry, {}), limits: { maxSessions: 600 }, logger: createLogger("mcp.test") });
    url = await server.start();
  });

  afterAll(async () => {
    await server?.stop();
    await runtime?.close();
  });

  test("500 concurrent MCP sessions each play tool calls in parallel without errors, then free every episode", async () => {
    const N = 500;
    const sessions = await Promise.all(Array.from({ length: N }, (_, i) => connect(url, { "X-EnvScaler-Scenario": "library-1", "X-EnvScaler-Seed": String(i), "X-EnvScaler-Rollout": `load-${i}` })));
    expect(runtime.stats().episodes).toBe(N);
    const calls = LIBRARY_1.reference_actions.slice(0, 3);
    for (const call of calls) {
      // one call per session at a time, every session at once
      const results = await Promise.all(sessions.map((s) => s.client.callTool(call)));
      for (const r of results) {
        expect(r.isError, textOf(r)).toBeFalsy();
        expect((JSON.parse(textOf(r)) as { success: boolean }).success).toBe(true);
      }
    }
    const sample = await control("GET", "/sessions/load-123");
    expect(sample.body).toMatchObject({ scenario_id: "library-1", seed: 123, steps: calls.length, ended: false });
    await Promise.all(sessions.map(async (s) => {
      await s.transport.terminateSession();
      await s.client.close();
    }));
    expect(server.sessionCount).toBe(0);
    expect(runtime.stats().episodes).toBe(0);
  }, 300_000);

  test("an initialize the server refuses itself (unknown scenario, bad seed) answers with the request's id and the typed code", async () => {
    for (const [headers, code] of [[{ "X-EnvScaler-Scenario": "nope-1" }, "unknown_scenario"], [{ "X-EnvScaler-Scenario": "library-1", "X-EnvScaler-Seed": "abc" }, "bad_request"]] as const) {
      const init = { jsonrpc: "2.0", id: 7, method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "raw", version: "0" } } };
      const r = await fetch(url, { method: "POST", headers: { "content-type": "application/json", accept: "application/json, text/event-stream", ...headers }, body: JSON.stringify(init) });
      const body = (await r.json()) as { id: unknown; error: { data: { code: string } } };
      expect(body.id).toBe(7);
      expect(body.error.data.code).toBe(code);
    }
  });

  test("a malformed tools/call (arguments not an object) is a typed invalid-params error, and the session goes on", async () => {
    const { client, transport } = await connect(url, { "X-EnvScaler-Scenario": "library-1", "X-EnvScaler-Rollout": "malformed" });
    const bad = await client.request({ method: "tools/call", params: { name: "get_book", arguments: [1, 2] } }, CallToolResultSchema).catch((e: unknown) => e);
    expect(bad).toBeInstanceOf(McpError);
    expect((bad as McpError).code).toBe(ErrorCode.InvalidParams);
    expect((bad as McpError).message).toMatch(/Invalid tools\/call request/);
    const ok = await client.callTool({ name: LIBRARY_1.reference_actions[0]!.name, arguments: LIBRARY_1.reference_actions[0]!.arguments });
    expect(ok.isError, textOf(ok)).toBeFalsy();
    await transport.terminateSession();
    await client.close();
  });

  test("an env fault ends the episode with a tool error naming its typed code; the trainer reads it too", async () => {
    const { client, transport } = await connect(url, { "X-EnvScaler-Scenario": "hostile-1", "X-EnvScaler-Rollout": "fault" });
    const ok = await client.callTool({ name: "ping", arguments: {} });
    expect(ok.isError).toBeFalsy();
    const spin = await client.callTool({ name: "spin", arguments: {} });
    expect(spin.isError).toBe(true);
    expect(JSON.parse(textOf(spin))).toMatchObject({ error: { type: "env_timeout" } });
    expect((spin._meta as Record<string, unknown>)["envscaler/episode_ended"]).toBe("env_fault");
    const after = await client.callTool({ name: "ping", arguments: {} });
    expect(JSON.parse(textOf(after))).toMatchObject({ error: { type: "episode_done" } });
    const reward = await control("GET", "/sessions/fault/reward");
    expect(reward.status).toBe(200);
    expect(reward.body).toMatchObject({ reward: 0, end_reason: "env_fault", error: { code: "env_timeout" } });
    await transport.terminateSession();
    await client.close();
  });

  test("limits answer with typed errors: an oversized body, bad control paths, unknown snapshots", async () => {
    const big = await fetch(url, { method: "POST", headers: { "content-type": "application/json", accept: "application/json, text/event-stream" }, body: JSON.stringify({ pad: "x".repeat(server.limits.maxBodyBytes) }) });
    expect(big.status).toBe(413);
    expect(((await big.json()) as { error: { data: { code: string } } }).error.data.code).toBe("payload_too_large");
    const { client, transport } = await connect(url, { "X-EnvScaler-Scenario": "library-1", "X-EnvScaler-Rollout": "forky" });
    const badPath = await control("GET", "/sessions/%E0%A4%A/state");
    expect(badPath.status).toBe(400);
    expect(badPath.body).toMatchObject({ error: { code: "bad_request" } });
    const fromNothing = await control("POST", "/snapshots/snap-never-taken/fork");
    expect(fromNothing.status).toBe(404);
    expect(fromNothing.body).toMatchObject({ error: { code: "unknown_snapshot" } });
    const restoreNothing = await control("POST", "/sessions/forky/restore", { snapshot_id: "snap-never-taken" });
    expect(restoreNothing).toMatchObject({ status: 404, body: { error: { code: "unknown_snapshot" } } });
    expect(await control("POST", "/sessions/forky/restore", {})).toMatchObject({ status: 400, body: { error: { code: "bad_request" } } });
    // a body that is not an object is refused, never read as "no fields" (a finish with [1,2] once ended the episode)
    for (const [route, body] of [["finish", [1, 2]], ["finish", 5], ["restore", ["snap"]], ["fork", "x"]] as const) {
      expect(await control("POST", `/sessions/forky/${route}`, body), `${route} ${JSON.stringify(body)}`).toMatchObject({ status: 400, body: { error: { code: "bad_request", message: expect.stringContaining("JSON object") } } });
    }
    expect(await control("DELETE", "/snapshots/snap-never-taken")).toMatchObject({ status: 200, body: { dropped: false } });
    // a fork waits for its client; MCP traffic on its id before the client's initialize is refused, typed
    const fork = await control("POST", "/sessions/forky/fork", { rollout: "forky-2" });
    expect(fork).toMatchObject({ status: 200, body: { rollout: "forky-2", scenario_id: "library-1", step: 0, forked_from: { rollout: "forky", step: 0 } } });
    const early = await fetch(url, { method: "POST", headers: { "content-type": "application/json", accept: "application/json, text/event-stream", "mcp-session-id": fork.body.session_id as string }, body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }) });
    expect(early.status).toBe(400);
    expect(((await early.json()) as { error: { data: { code: string } } }).error.data.code).toBe("bad_request");
    expect(await control("POST", "/sessions/forky/fork", { rollout: "forky-2" })).toMatchObject({ status: 409, body: { error: { code: "rollout_in_use" } } });
    expect(await control("DELETE", "/sessions/forky-2")).toMatchObject({ status: 200, body: { closed: true } });
    await transport.terminateSession();
    await client.close();
  });
});

test("the in-flight gate refuses one call over its limit with `overloaded`, before running it", async () => {
  const gate = new InFlightGate(1);
  let release!: () => void;
  const first = gate.run(() => new Promise<void>((r) => (release = r)));
  let ran = false;
  await expect(gate.run(() => Promise.resolve(void (ran = true)))).rejects.toMatchObject({ code: "overloaded" });
  expect(ran).toBe(false);
  release();
  await first;
  await expect(gate.run(() => Promise.resolve(1))).resolves.toBe(1);
});

test("loopback is 127/8, ::1 and localhost; any other bind needs a token", () => {
  for (const h of ["127.0.0.1", "127.0.0.2", "::1", "[::1]", "localhost", "::ffff:127.0.0.1"]) expect(isLoopback(h), h).toBe(true);
  for (const h of ["0.0.0.0", "::", "10.0.0.5", "192.168.1.2", "example.com", "128.0.0.1"]) expect(isLoopback(h), h).toBe(false);
  expect(() => new RequestGuard({ host: "0.0.0.0", token: null, allowedOrigins: [], allowedHosts: [] })).toThrow(/without a bearer token/);
  expect(() => new RequestGuard({ host: "0.0.0.0", token: "t", allowedOrigins: [], allowedHosts: [] })).not.toThrow();
});

test("envscaler mcp --stdio: one episode for a local client, scored when it disconnects", async () => {
  const dir = mkdtempSync(join(tmpdir(), "mcp-stdio-"));
  const resultFile = join(dir, "result.json");
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: ["--import", "tsx", CLI, "mcp", "--stdio", "--envs", BUNDLED_ENVS, "--scenario", "library-1", "--seed", "5", "--no-record", "--result-file", resultFile],
    stderr: "pipe",
    env: { ...process.env, ENVSCALER_LOG_LEVEL: "warn" },
  });
  const client = new Client({ name: "mcp.test", version: "0" });
  await client.connect(transport);
  expect(client.getInstructions()).toContain("Maria Rossi");
  for (const a of LIBRARY_1.reference_actions) expect((await client.callTool(a)).isError).toBeFalsy();
  await client.close();
  for (let i = 0; i < 200; i++) {
    try {
      readFileSync(resultFile, "utf8");
      break;
    } catch {
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  const outcome = JSON.parse(readFileSync(resultFile, "utf8")) as { scenario_id: string; seed: number; score: { reward: number } };
  expect(outcome).toMatchObject({ scenario_id: "library-1", seed: 5, score: { reward: 1 } });
}, 60_000);
