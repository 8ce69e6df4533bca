// One seed range on every front (0 <= seed < 2^32, as the wire's schema says), and no coercion:
// an outside attacker pass found MCP's X-EnvScaler-Seed taking -1 and 2^40, and the UI taking
// true as 1, [5] as 5 and "0x10" as 16.
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import { afterAll, beforeAll, expect, test } from "vitest";
import { EnvRuntime } from "../../bridge/core/engine/env-runtime.js";
import { readSeed } from "../../bridge/core/sessions/seed.js";
import { McpHttpServer } from "../../bridge/fronts/mcp/mcp-http-server.js";
import { ScenarioPicker } from "../../bridge/fronts/mcp/scenario-picker.js";
import { UiServer } from "../../bridge/fronts/ui/ui-server.js";
import { FIXTURES } from "../helpers.js";

const BAD: unknown[] = [-1, 2 ** 32, 2 ** 40, 1.5, true, false, [5], [[7]], [], "0x10", "1e3", " 12 ", "-1", {}, Number.NaN];

let runtime: EnvRuntime;
let mcp: McpHttpServer;
let mcpUrl: string;
let ui: UiServer;

beforeAll(async () => {
  runtime = await EnvRuntime.start({ envs: [FIXTURES], workers: 0 });
  mcp = new McpHttpServer({ runtime, picker: new ScenarioPicker(runtime.registry, { scenario: "notes-1" }), logger: pino({ level: "silent" }) });
  mcpUrl = await mcp.start();
  ui = await UiServer.start({ envs: [FIXTURES], trajectories: mkdtempSync(join(tmpdir(), "seed-fronts-")), port: 0 });
}, 60_000);

afterAll(async () => {
  await mcp?.stop();
  await ui?.close();
  await runtime?.close();
});

test("readSeed takes integers in range, as numbers or digit strings, and nothing else", () => {
  expect(readSeed(0)).toEqual({ seed: 0 });
  expect(readSeed(2 ** 32 - 1)).toEqual({ seed: 2 ** 32 - 1 });
  expect(readSeed("42")).toEqual({ seed: 42 });
  for (const v of BAD) expect(readSeed(v), JSON.stringify(v)).toMatchObject({ problem: expect.stringContaining("0 <= seed < 2^32") });
});

test("the UI's play start refuses every one of them with 400 bad_request, and takes a good seed", async () => {
  const start = (seed: unknown) => fetch(new URL("/api/play/start", ui.url), { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ page: "p", scenario_id: "notes-1", seed }) });
  for (const v of BAD.filter((x) => !Number.isNaN(x))) {
    const r = await start(v);
    expect(r.status, JSON.stringify(v)).toBe(400);
    expect(((await r.json()) as { error: { code: string } }).error.code).toBe("bad_request");
  }
  const ok = await start(7);
  expect(ok.status).toBe(200);
  expect(((await ok.json()) as { info: { seed: number } }).info.seed).toBe(7);
});

test("MCP's X-EnvScaler-Seed refuses out-of-range and non-digit seeds with 400, and takes a good one", async () => {
  const open = (seed: string) =>
    fetch(mcpUrl, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "application/json, text/event-stream", "x-envscaler-seed": seed },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "t", version: "0" } } }),
    });
  for (const v of ["-1", "4294967296", "99999999999", "0x10", "1e3", "1.5"]) {
    const r = await open(v);
    expect(r.status, v).toBe(400);
    expect(await r.text()).toContain("0 <= seed < 2^32");
  }
  const ok = await open("4294967295");
  expect(ok.status).toBe(200);
  await ok.body?.cancel();
});
