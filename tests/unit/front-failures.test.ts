import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, test, vi } from "vitest";
import { BridgeClient, BridgeError } from "../../agent/bridge-client.js";
import { EnvRuntime, RuntimeError } from "../../bridge/core/engine/env-runtime.js";
import { McpHttpServer } from "../../bridge/fronts/mcp/mcp-http-server.js";
import { serveStdio } from "../../bridge/fronts/mcp/mcp-stdio.js";
import { ScenarioPicker } from "../../bridge/fronts/mcp/scenario-picker.js";
import { BridgeServer } from "../../bridge/fronts/zmq/bridge-server.js";
import { FAILURES, runtimeCode } from "../../bridge/core/sessions/failure-table.js";
import { UiServer } from "../../bridge/fronts/ui/ui-server.js";
import { ERROR_CODES, type CoreErrorCode, type ErrorCode } from "../../protocol/error-codes.js";
import { FIXTURES } from "../helpers.js";

/**
 * Every failure through every front: each protocol error code (and each code only the runtime
 * speaks) is raised by the runtime under a live session of the ZeroMQ wire, MCP over HTTP (a tool
 * call and a control route), MCP over stdio and the UI's play API, and each front must answer
 * what bridge/core/sessions/failure-table.ts says. The "unknown …" the session service raises itself
 * are driven through real requests.
 */

const silent = pino({ level: "silent" });
/** The runtime's own codes that are not protocol codes, and what each must read as (one decision, on every front). */
const RUNTIME_ONLY: Record<string, ErrorCode> = { closed: "shutting_down", reset_needed: "episode_done", unknown_episode: "session_closed" };
const CASES: [raised: string, failure: ErrorCode][] = [...ERROR_CODES.map((c): [string, ErrorCode] => [c, c]), ...Object.entries(RUNTIME_ONLY), ["no_such_code", "internal_error"]];

let runtime: EnvRuntime;
let wire: BridgeServer;
let client: BridgeClient;
let mcp: McpHttpServer;
let mcpClient: Client;
let mcpTransport: StreamableHTTPClientTransport;
let mcpSession: string;
let ui: UiServer;
let uiEpisode: string;
let wireSession: string;

const wireCode = (p: Promise<unknown>) => p.then(() => "ok", (e: BridgeError) => e.code);
const toolErrorCode = (r: unknown) => (JSON.parse(((r as CallToolResult).content[0] as { text: string }).text) as { error: { type: string } }).error.type;

async function control(method: string, path: string): Promise<{ status: number; code: string | undefined }> {
  const r = await fetch(`${mcp.controlUrl}${path}`, { method, headers: { authorization: `Bearer ${mcp.controlToken}` } });
  return { status: r.status, code: ((await r.json()) as { error?: { code: string } }).error?.code };
}

async function uiCall(path: string, body?: unknown): Promise<{ status: number; code: string | undefined }> {
  const init = body === undefined ? {} : { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) };
  const r = await fetch(new URL(path, ui.url), init);
  return { status: r.status, code: ((await r.json()) as { error?: { code: string } }).error?.code };
}

/** Makes the runtime's `method` fail with `code` until restored. */
function inject(rt: EnvRuntime, code: string) {
  // cast: "no_such_code" stands for a code outside the closed union, which only a bug could carry
  const fail = () => Promise.reject(new RuntimeError(code as CoreErrorCode, `injected ${code}`));
  return [vi.spyOn(rt, "state").mockImplementation(fail), vi.spyOn(rt, "step").mockImplementation(fail)];
}

/** A minimal MCP client over a pair of streams, speaking to serveStdio in this process. */
class StdioPeer {
  readonly stdin = new PassThrough();
  readonly stdout = new PassThrough();
  private buffer = "";
  private next = 1;
  private readonly waiting = new Map<number, (m: { result?: unknown; error?: unknown }) => void>();
  /** Replies with `id: null`: answers to lines that were not a request it could address. */
  readonly unaddressed: { error?: unknown }[] = [];

  constructor() {
    this.stdout.on("data", (chunk: Buffer) => {
      this.buffer += chunk.toString("utf8");
      let nl: number;
      while ((nl = this.buffer.indexOf("\n")) >= 0) {
        const m = JSON.parse(this.buffer.slice(0, nl)) as { id?: number; result?: unknown; error?: unknown };
        this.buffer = this.buffer.slice(nl + 1);
        if (typeof m.id === "number") this.waiting.get(m.id)?.(m);
        else if (m.id === null) this.unaddressed.push(m);
      }
    });
  }

  request(method: string, params: unknown): Promise<{ result?: unknown; error?: unknown }> {
    const id = this.next++;
    const reply = new Promise<{ result?: unknown; error?: unknown }>((r) => this.waiting.set(id, r));
    this.stdin.write(`${JSON.stringify({ jsonrpc: "2.0", id, method, params })}\n`);
    return reply;
  }

  raw(line: string): void {
    this.stdin.write(`${line}\n`);
  }

  notify(method: string): void {
    this.stdin.write(`${JSON.stringify({ jsonrpc: "2.0", method })}\n`);
  }
}

beforeAll(async () => {
  runtime = await EnvRuntime.start({ envs: [FIXTURES], workers: 0 });
  wire = new BridgeServer({ runtime, endpoint: "tcp://127.0.0.1:*", logger: silent });
  await wire.start();
  client = new BridgeClient(wire.endpoint, { timeoutMs: 20_000 });
  wireSession = (await client.request<{ session_id: string }>("reset", { scenario_id: "notes-1", seed: 1 })).session_id;

  mcp = new McpHttpServer({ runtime, picker: new ScenarioPicker(runtime.registry, {}), logger: silent });
  const url = await mcp.start();
  mcpTransport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { "X-EnvScaler-Scenario": "notes-1" } } });
  mcpClient = new Client({ name: "front-failures", version: "0" });
  await mcpClient.connect(mcpTransport);
  mcpSession = mcpTransport.sessionId!;

  ui = await UiServer.start({ envs: [FIXTURES], trajectories: mkdtempSync(join(tmpdir(), "front-failures-")), port: 0, hardStopGraceMs: 300 });
  const started = await fetch(new URL("/api/play/start", ui.url), { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ page: "p1", scenario_id: "notes-1" }) });
  uiEpisode = ((await started.json()) as { episode_id: string }).episode_id;
}, 60_000);

afterAll(async () => {
  vi.restoreAllMocks();
  await mcpClient?.close();
  client?.close();
  await mcp?.stop();
  await wire?.stop();
  await ui?.close();
  await runtime?.close();
});

describe("the failure table", () => {
  test("the wire answers every protocol code as itself; the runtime's own codes are one decision on every front", () => {
    for (const code of ERROR_CODES) expect(FAILURES[code].wire).toBe(code);
    for (const [raised, failure] of Object.entries(RUNTIME_ONLY)) expect(runtimeCode(raised)).toBe(failure);
    // a session whose episode went away is the client's session closed under it, never our bug
    expect(FAILURES.session_closed).toEqual({ wire: "session_closed", mcp: { code: "session_closed", status: 404 }, ui: { code: "unknown_episode", status: 404 } });
    expect(runtimeCode("something_new")).toBe("internal_error");
  });
});

describe.each(CASES)("a runtime failure %s", (raised, failure) => {
  const row = FAILURES[failure];

  test(`reads as ${failure} on the ZeroMQ wire`, async () => {
    const spies = inject(runtime, raised);
    try {
      expect(await wireCode(client.request("state", { session_id: wireSession }))).toBe(row.wire);
      expect(await wireCode(client.request("step", { session_id: wireSession, action: { name: "list_notes", arguments: { user_id: "u1" } } }))).toBe(row.wire);
    } finally {
      for (const s of spies) s.mockRestore();
    }
  });

  test(`reads as MCP's ${row.mcp.code} (${row.mcp.status}) over HTTP: a tool call and a control route`, async () => {
    const spies = inject(runtime, raised);
    try {
      const r = await mcpClient.callTool({ name: "list_notes", arguments: { user_id: "u1" } });
      expect(r.isError).toBe(true);
      expect(toolErrorCode(r)).toBe(row.mcp.code);
      expect(await control("GET", `/sessions/${mcpSession}/state`)).toEqual({ status: row.mcp.status, code: row.mcp.code });
    } finally {
      for (const s of spies) s.mockRestore();
    }
  });

  test(`reads as the UI's ${row.ui.code} (${row.ui.status}) on the play API`, async () => {
    const spies = inject(ui.runtime, raised);
    try {
      expect(await uiCall(`/api/play/state?episode_id=${uiEpisode}`)).toEqual({ status: row.ui.status, code: row.ui.code });
      expect(await uiCall("/api/play/step", { episode_id: uiEpisode, action: { name: "list_notes", arguments: { user_id: "u1" } } })).toEqual({ status: row.ui.status, code: row.ui.code });
    } finally {
      for (const s of spies) s.mockRestore();
    }
  });
});

test("every runtime failure reads as MCP's code in a tool error over stdio", async () => {
  const peer = new StdioPeer();
  const served = serveStdio({ runtime, picker: new ScenarioPicker(runtime.registry, { scenario: "notes-1" }), stdin: peer.stdin, stdout: peer.stdout });
  const init = await peer.request("initialize", { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "front-failures", version: "0" } });
  expect(init.error).toBeUndefined();
  peer.notify("notifications/initialized");
  for (const [raised, failure] of CASES) {
    const spies = inject(runtime, raised);
    try {
      const r = await peer.request("tools/call", { name: "list_notes", arguments: { user_id: "u1" } });
      expect(toolErrorCode(r.result), raised).toBe(FAILURES[failure].mcp.code);
    } finally {
      for (const s of spies) s.mockRestore();
    }
  }
  peer.stdin.end();
  expect((await served).scenario_id).toBe("notes-1");
});

describe("each unknown … the session service raises reads as the table says on every front", () => {
  test("an unknown session", async () => {
    expect(await wireCode(client.request("step", { session_id: "s-0-00000000-nope", action: "hi" }))).toBe(FAILURES.unknown_session.wire);
    expect(await control("GET", "/sessions/nope/state")).toEqual({ status: FAILURES.unknown_session.mcp.status, code: FAILURES.unknown_session.mcp.code });
    expect(await uiCall("/api/play/step", { episode_id: "nope", action: "hi" })).toEqual({ status: FAILURES.unknown_session.ui.status, code: FAILURES.unknown_session.ui.code });
  });

  test("an unknown scenario", async () => {
    expect(await wireCode(client.request("reset", { scenario_id: "nope" }))).toBe(FAILURES.unknown_scenario.wire);
    const r = await mcpClient.callTool({ name: "start_episode", arguments: { scenario_id: "nope" } });
    // the session has its episode: a second start is refused before the scenario is looked at
    expect(toolErrorCode(r)).toBe("bad_request");
    const open = await fetch(mcp.url, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "application/json, text/event-stream", "x-envscaler-scenario": "nope" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "t", version: "0" } } }),
    });
    expect(open.status).toBe(FAILURES.unknown_scenario.mcp.status);
    expect(((await open.json()) as { error: { data: { code: string } } }).error.data.code).toBe(FAILURES.unknown_scenario.mcp.code);
    expect(await uiCall("/api/play/start", { page: "p1", scenario_id: "nope" })).toEqual({ status: FAILURES.unknown_scenario.ui.status, code: FAILURES.unknown_scenario.ui.code });
  });

  test("an unknown snapshot", async () => {
    expect(await wireCode(client.request("fork", { snapshot_id: "nope" }))).toBe(FAILURES.unknown_snapshot.wire);
    expect(await control("GET", "/snapshots/nope")).toEqual({ status: FAILURES.unknown_snapshot.mcp.status, code: FAILURES.unknown_snapshot.mcp.code });
    expect(await control("POST", "/snapshots/nope/fork")).toEqual({ status: FAILURES.unknown_snapshot.mcp.status, code: FAILURES.unknown_snapshot.mcp.code });
  });

  test("a closed session", async () => {
    const sid = (await client.request<{ session_id: string }>("reset", { scenario_id: "notes-1" })).session_id;
    await client.request("close", { session_id: sid });
    expect(await wireCode(client.request("state", { session_id: sid }))).toBe(FAILURES.session_closed.wire);
    const started = await fetch(new URL("/api/play/start", ui.url), { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ page: "p2", scenario_id: "notes-1" }) });
    const ep = ((await started.json()) as { episode_id: string }).episode_id;
    expect((await uiCall("/api/play/close", { episode_id: ep })).status).toBe(200);
    expect(await uiCall("/api/play/step", { episode_id: ep, action: "hi" })).toEqual({ status: FAILURES.session_closed.ui.status, code: FAILURES.session_closed.ui.code });
  });
});

test("MCP over stdio answers every line, as over HTTP: not JSON (-32700), not one JSON-RPC message (-32600), and goes on", async () => {
  const peer = new StdioPeer();
  const served = serveStdio({ runtime, picker: new ScenarioPicker(runtime.registry, { scenario: "notes-1" }), stdin: peer.stdin, stdout: peer.stdout });
  expect((await peer.request("initialize", { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "t", version: "0" } })).error).toBeUndefined();
  peer.notify("notifications/initialized");
  peer.raw("{{{{");
  peer.raw(`{"jsonrpc":"2.0","id":${"[".repeat(20_000)}${"]".repeat(20_000)},"method":"ping"}`);
  peer.raw('[{"jsonrpc":"2.0","id":3,"method":"tools/list"},{"jsonrpc":"2.0","id":4,"method":"ping"}]');
  const r = await peer.request("tools/call", { name: "list_notes", arguments: { user_id: "u1" } });
  expect((r.result as CallToolResult).isError).toBeFalsy();
  expect(peer.unaddressed.map((m) => (m.error as { code: number }).code)).toEqual([-32700, -32600, -32600]);
  peer.stdin.end();
  await served;
});
