// The cross-front table (issue 32): every hostile action below goes through every front (ZeroMQ,
// MCP over HTTP, MCP over stdio, the UI's API) against one shared runtime with an engine worker
// thread (where a deep value used to crash the process in structured clone); each must get the
// same typed outcome, and afterwards the same session goes on, a co-tenant session on the same
// front goes on exactly, and the server is alive. Cases × fronts: a new front is one more driver.
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { EnvRuntime } from "../../bridge/core/engine/env-runtime.js";
import { BridgeServer } from "../../bridge/fronts/zmq/bridge-server.js";
import { McpHttpServer } from "../../bridge/fronts/mcp/mcp-http-server.js";
import { ScenarioPicker } from "../../bridge/fronts/mcp/scenario-picker.js";
import { UiServer } from "../../bridge/fronts/ui/ui-server.js";
import { createLogger } from "../../bridge/fronts/zmq/logger.js";
import { FIXTURES } from "../helpers.js";
import { deepJson, deepMsgpack, mcpHttpFront, mcpStdioFront, uiFront, zmqFront, type FrontDriver, type Outcome, type TableAction } from "../front-table.js";
import { cpSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const DEEP = deepJson(10_000);
const call = (argsBody: string) => `{"name":"add_note","arguments":{"user_id":"u2","title":"t","body":${argsBody}}}`;

interface Case {
  name: string;
  action: TableAction;
  /** The outcome every front must give; `on` overrides it for a front that refuses earlier (documented in docs/protocol.md §limits). */
  /** `code` null: the call runs (a tool's own output). */
  want: { code: string | null; message: RegExp; refused: boolean };
  on?: Record<string, { code: string | null; message: RegExp; refused: boolean }>;
}

const CASES: Case[] = [
  {
    name: "arguments nested 10,000 deep as an object",
    action: { kind: "object", name: "add_note", argsJson: `{"x":${DEEP}}`, argsMsgpack: Buffer.concat([Buffer.from([0x81, 0xa1, 0x78]), deepMsgpack(10_000)]) },
    want: { code: "too_large", message: /max_action_depth/, refused: true },
    // the wire's frame scan refuses the frame before it is decoded (its max_depth, the same 64)
    on: { zeromq: { code: "bad_request", message: /deep|depth|nest/i, refused: true } },
  },
  {
    name: "arguments nested 10,000 deep sent as a JSON string",
    action: { kind: "string_args", name: "add_note", argsText: `{"x":${DEEP}}` },
    want: { code: "invalid_arguments", message: /max_action_depth/, refused: false },
  },
  {
    name: "raw text with a <tool_call> nested 10,000 deep",
    action: { kind: "text", text: `<tool_call>${call(DEEP)}</tool_call>` },
    want: { code: "invalid_action", message: /max_action_depth/, refused: false },
  },
  {
    name: "raw text with a fenced call nested 10,000 deep",
    action: { kind: "text", text: "```json\n" + call(DEEP) + "\n```" },
    want: { code: "invalid_action", message: /max_action_depth/, refused: false },
  },
  {
    name: "a bare JSON reply nested 10,000 deep",
    action: { kind: "text", text: call(DEEP) },
    want: { code: "invalid_action", message: /max_action_depth/, refused: false },
  },
  {
    // found trying fresh inputs: the step ran, but its reply went out with bytes that are not UTF-8
    // and the client refused it, so the request never got an answer it could read
    name: "a lone surrogate written as an escape in string arguments",
    action: { kind: "string_args", name: "add_note", argsText: '{"user_id":"u2","title":"lone \\ud800","body":"b"}' },
    want: { code: null, message: /"success":true/, refused: false },
  },
  {
    name: "raw text that is an array nested 20,000 deep",
    action: { kind: "text", text: "[".repeat(20_000) + "]".repeat(20_000) },
    want: { code: "invalid_action", message: /max_action_depth/, refused: false },
  },
  {
    name: "arguments 65 deep as a JSON string (just over the limit)",
    action: { kind: "string_args", name: "add_note", argsText: deepJson(65) },
    want: { code: "invalid_arguments", message: /max_action_depth/, refused: false },
  },
];

let titles = 0;
/** A call that runs and changes the state: a note with a title of its own (the store refuses duplicates). */
const good = (): TableAction => ({ kind: "object", name: "add_note", argsJson: `{"user_id":"u2","title":"t${titles++}","body":"call mom"}` });

function codeOf(o: Outcome): string | null {
  return o.kind === "error" ? o.code : o.type;
}

let runtime: EnvRuntime;
let zmq: BridgeServer;
let mcp: McpHttpServer;
let ui: UiServer;
const fronts: FrontDriver[] = [];

/** The notes fixture with room for every case's steps (its own max_steps is 8). */
function roomyNotes(): string {
  const dir = mkdtempSync(join(tmpdir(), "front-limits-envs-"));
  cpSync(join(FIXTURES, "notes"), join(dir, "notes"), { recursive: true });
  const manifest = JSON.parse(readFileSync(join(dir, "notes", "manifest.json"), "utf8")) as Record<string, unknown>;
  writeFileSync(join(dir, "notes", "manifest.json"), JSON.stringify({ ...manifest, max_steps: 200 }));
  return dir;
}

beforeAll(async () => {
  process.env.ENVSCALER_LOG_LEVEL ??= "warn";
  const envs = roomyNotes();
  // one engine worker thread: requests cross to it by structured clone, where the crash was
  runtime = await EnvRuntime.start({ envs: [envs], workers: 1 });
  zmq = new BridgeServer({ runtime, endpoint: "tcp://127.0.0.1:*", logger: pino({ level: "silent" }) });
  await zmq.start();
  mcp = new McpHttpServer({ runtime, picker: new ScenarioPicker(runtime.registry, {}), logger: createLogger("front-limits.test") });
  const mcpUrl = await mcp.start();
  // the UI owns its runtime (one engine worker thread, as `envscaler ui` runs)
  ui = await UiServer.start({ envs: [envs], trajectories: mkdtempSync(join(tmpdir(), "front-limits-")), port: 0 });
  fronts.push(zmqFront(zmq.endpoint), mcpHttpFront(mcpUrl), mcpStdioFront(runtime), uiFront(ui.url));
}, 60_000);

afterAll(async () => {
  await zmq?.stop();
  await mcp?.stop();
  await ui?.close();
  await runtime?.close();
});

describe.each(["zeromq", "mcp-http", "mcp-stdio", "ui"])("front %s", (frontName) => {
  test("every hostile action gets its typed outcome; the session, a co-tenant and the server go on", async () => {
    const front = fronts.find((f) => f.name === frontName)!;
    const tenant = await fronts.find((f) => f.name === (front.tenantVia ?? front.name))!.open("notes-1", 7);
    const first = await tenant.step(good());
    expect(codeOf(first), JSON.stringify(first)).toBeNull();
    const s = await front.open("notes-1", 8);
    try {
      for (const c of CASES) {
        if (!front.carries(c.action)) continue;
        const want = c.on?.[front.name] ?? c.want;
        const got = await s.step(c.action);
        expect({ case: c.name, code: codeOf(got) }).toEqual({ case: c.name, code: want.code });
        expect(got.message, c.name).toMatch(want.message);
        // MCP answers a refused request as a tool error (its way to tell the model); the others as a typed error
        if (front.name === "zeromq" || front.name === "ui") expect(got.kind, c.name).toBe(want.refused ? "error" : "observation");
        // no host path or stack in any answer
        expect(got.message, c.name).not.toMatch(/\/work\/|\/tmp\/| {4}at /);
        // the same session goes on: a good call runs (the note store answers with the new note's id)
        const after = await s.step(good());
        expect(codeOf(after), `${c.name}: ${JSON.stringify(after)}`).toBeNull();
        expect(after.message, c.name).toMatch(/"success":true/);
      }
      // the co-tenant continues exactly: its next call is the second note it adds
      const again = await tenant.step(good());
      expect(codeOf(again), JSON.stringify(again)).toBeNull();
      expect(again.message).toMatch(/"success":true/);
      expect(again.message).not.toBe(first.message);
    } finally {
      await s.close();
      await tenant.close();
    }
  }, 120_000);
});
