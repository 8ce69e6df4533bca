// The cross-front table's fronts (tests/unit/front-limits.test.ts): the same hostile action driven
// through ZeroMQ, MCP over HTTP, MCP over stdio and the UI's HTTP API, each outcome brought to one
// shape. Actions are given as JSON text, because the values under test (nested 10,000 deep) cannot
// go through JSON.stringify or msgpackr's encoder: every front embeds the text in its own request
// bytes. A new front (the planned session service) is one more FrontDriver.
import { PassThrough } from "node:stream";
import { Dealer } from "zeromq";
import { BridgeClient, BridgeError } from "../agent/bridge-client.js";
import { encodeFrame, decodeFrame } from "../protocol/codec.js";
import { PROTOCOL_VERSION } from "../protocol/messages.js";
import { expandStep } from "../protocol/step-wire.js";
import type { EnvRuntime } from "../bridge/core/engine/env-runtime.js";
import { serveStdio } from "../bridge/fronts/mcp/mcp-stdio.js";
import { ScenarioPicker } from "../bridge/fronts/mcp/scenario-picker.js";

/** An action of the table: a tool call whose arguments are JSON text (sent as an object), arguments sent as a JSON string, or the model's raw text. */
export type TableAction = { kind: "object"; name: string; argsJson: string; /** The arguments as msgpack, when msgpackr cannot encode them (too deep). */ argsMsgpack?: Buffer } | { kind: "string_args"; name: string; argsText: string } | { kind: "text"; text: string };

/** What one front answered: a typed error for the request, or an observation (an error the agent reads, or a tool's output). */
export type Outcome = { kind: "error"; code: string; message: string } | { kind: "observation"; type: string | null; message: string };

export interface FrontSession {
  step(a: TableAction): Promise<Outcome>;
  close(): Promise<void>;
}

export interface FrontDriver {
  name: string;
  /** Whether the front can carry this kind of action at all (MCP's arguments are always an object). */
  carries(a: TableAction): boolean;
  open(scenario: string, seed: number): Promise<FrontSession>;
  /** The front whose sessions share this one's runtime, for a co-tenant (MCP over stdio is one session per process). */
  tenantVia?: string;
}

/** An observation's error type (`{"error": {"type": …}}`), or null for a tool's plain output. */
export function observed(content: string): Outcome {
  try {
    const v = JSON.parse(content) as { error?: { type?: string; message?: string } };
    if (v && typeof v === "object" && v.error && typeof v.error.type === "string") return { kind: "observation", type: v.error.type, message: v.error.message ?? "" };
  } catch {
    /* plain text */
  }
  return { kind: "observation", type: null, message: content };
}

/** `{"a":{"a":…1…}}` nested `n` deep, as text. */
export function deepJson(n: number): string {
  return '{"a":'.repeat(n) + "1" + "}".repeat(n);
}

/** The same value as msgpack bytes: fixmap {a: …} nested `n` deep, built without recursion. */
export function deepMsgpack(n: number): Buffer {
  const head = Buffer.from([0x81, 0xa1, 0x61]);
  return Buffer.concat([...Array.from({ length: n }, () => head), Buffer.from([0x01])]);
}

const HOLE = "\u0000hole\u0000";

/** A frame with the bytes of `inner` where the string HOLE was: a request whose action holds a value msgpackr cannot encode. */
function spliced(message: Record<string, unknown>, inner: Buffer): Buffer {
  const frame = encodeFrame(message);
  const marker = Buffer.concat([Buffer.from([0xa0 | Buffer.byteLength(HOLE)]), Buffer.from(HOLE)]);
  const at = frame.indexOf(marker);
  if (at < 0) throw new Error("hole not found");
  return Buffer.concat([frame.subarray(0, at), inner, frame.subarray(at + marker.length)]);
}

export function zmqFront(endpoint: string): FrontDriver {
  return {
    name: "zeromq",
    carries: () => true,
    async open(scenario, seed) {
      const client = new BridgeClient(endpoint, { timeoutMs: 20_000 });
      const raw = new Dealer({ receiveTimeout: 20_000 });
      raw.connect(endpoint);
      const r = await client.request<{ session_id: string }>("reset", { scenario_id: scenario, seed });
      const sid = r.session_id;
      let nextId = 1_000_000;
      const viaClient = async (action: unknown): Promise<Outcome> => {
        try {
          const s = await client.request<{ observation: { content: string } }>("step", { session_id: sid, action });
          return observed(s.observation.content);
        } catch (e) {
          if (e instanceof BridgeError) return { kind: "error", code: e.code, message: e.message };
          throw e;
        }
      };
      return {
        async step(a) {
          if (a.kind === "string_args") return viaClient({ name: a.name, arguments: a.argsText });
          if (a.kind === "text") return viaClient(a.text);
          // the object goes as msgpack bytes spliced in (the deep value cannot be encoded by msgpackr)
          const id = nextId++;
          const argsValue = a.argsMsgpack ?? encodeFrame(JSON.parse(a.argsJson));
          await raw.send(spliced({ v: PROTOCOL_VERSION, id, op: "step", session_id: sid, action: { name: a.name, arguments: HOLE } }, argsValue));
          const [bytes] = await raw.receive();
          const m = decodeFrame(bytes!) as { ok: boolean; error?: { code: string; message: string }; result?: { observation: { content: string } } };
          return m.ok ? observed(expandStep(m.result!).observation.content) : { kind: "error", code: m.error!.code, message: m.error!.message };
        },
        async close() {
          await client.request("close", { session_id: sid }).catch(() => undefined);
          client.close();
          raw.close();
        },
      };
    },
  };
}

/** A JSON-RPC tools/call body; arguments spliced in as text. */
function toolsCall(id: number, a: TableAction): string {
  if (a.kind === "text") return `{"jsonrpc":"2.0","id":${id},"method":"tools/call","params":{"name":"message_user","arguments":{"message":${JSON.stringify(a.text)}}}}`;
  if (a.kind === "object") return `{"jsonrpc":"2.0","id":${id},"method":"tools/call","params":{"name":${JSON.stringify(a.name)},"arguments":${a.argsJson}}}`;
  throw new Error("MCP arguments are an object");
}

function mcpOutcome(m: { result?: { content: { text: string }[]; isError?: boolean }; error?: { message: string; data?: { code?: string } } }): Outcome {
  if (m.error) return { kind: "error", code: m.error.data?.code ?? "jsonrpc", message: m.error.message };
  const text = m.result!.content[0]!.text;
  const o = observed(text);
  // a tool error the server raised itself (not the env's observation) carries a protocol code as its type
  return o;
}

const INIT = { jsonrpc: "2.0", id: 0, method: "initialize", params: { protocolVersion: "2025-03-26", capabilities: {}, clientInfo: { name: "front-table", version: "0" } } };

export function mcpHttpFront(url: string): FrontDriver {
  return {
    name: "mcp-http",
    // a call on MCP is a tool name and an arguments object: no JSON-string arguments, no raw text
    // (message_user exists only where a user replies, and refuses <tool_call> tags)
    carries: (a) => a.kind === "object",
    async open(scenario, seed) {
      const headers = { "content-type": "application/json", accept: "application/json, text/event-stream", "x-envscaler-scenario": scenario, "x-envscaler-seed": String(seed) };
      const init = await fetch(url, { method: "POST", headers, body: JSON.stringify(INIT) });
      const sid = init.headers.get("mcp-session-id");
      if (!init.ok || !sid) throw new Error(`initialize: ${init.status} ${await init.text()}`);
      await init.text();
      const withSid = { ...headers, "mcp-session-id": sid, "mcp-protocol-version": "2025-03-26" };
      await (await fetch(url, { method: "POST", headers: withSid, body: JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" }) })).text();
      let id = 1;
      return {
        async step(a) {
          const res = await fetch(url, { method: "POST", headers: withSid, body: toolsCall(id++, a) });
          const text = await res.text();
          if (!text) return { kind: "error", code: `http_${res.status}`, message: "" };
          return mcpOutcome(JSON.parse(text) as never);
        },
        async close() {
          await fetch(url, { method: "DELETE", headers: withSid }).then((r) => r.text()).catch(() => undefined);
        },
      };
    },
  };
}

/** MCP over stdio, in this process: serveStdio on a pair of pipes, JSON-RPC lines written and read. */
export function mcpStdioFront(runtime: EnvRuntime): FrontDriver {
  return {
    name: "mcp-stdio",
    carries: (a) => a.kind === "object",
    tenantVia: "mcp-http",
    async open(scenario, seed) {
      const stdin = new PassThrough();
      const stdout = new PassThrough();
      const waiting = new Map<number, (m: never) => void>();
      let buffered = "";
      stdout.on("data", (chunk: Buffer) => {
        buffered += chunk.toString("utf8");
        for (let nl = buffered.indexOf("\n"); nl >= 0; nl = buffered.indexOf("\n")) {
          const line = buffered.slice(0, nl);
          buffered = buffered.slice(nl + 1);
          const m = JSON.parse(line) as { id?: number };
          if (typeof m.id === "number") waiting.get(m.id)?.(m as never);
        }
      });
      const send = (id: number, line: string) =>
        new Promise<never>((resolve) => {
          waiting.set(id, resolve);
          stdin.write(`${line}\n`);
        });
      const served = serveStdio({ runtime, picker: new ScenarioPicker(runtime.registry, { scenario }), seed, stdin, stdout });
      await send(0, JSON.stringify(INIT));
      stdin.write(`${JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" })}\n`);
      let id = 1;
      return {
        async step(a) {
          const n = id++;
          return mcpOutcome(await send(n, toolsCall(n, a)));
        },
        async close() {
          stdin.end();
          await served;
        },
      };
    },
  };
}

export function uiFront(base: string): FrontDriver {
  const post = async (path: string, body: string) => {
    const res = await fetch(new URL(path, base), { method: "POST", headers: { "content-type": "application/json" }, body });
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  };
  return {
    name: "ui",
    carries: () => true,
    async open(scenario, seed) {
      const page = `table-${Math.random().toString(36).slice(2)}`;
      const r = await post("/api/play/start", JSON.stringify({ page, scenario_id: scenario, seed }));
      if (r.status !== 200) throw new Error(`start: ${r.status} ${JSON.stringify(r.body)}`);
      const ep = r.body.episode_id as string;
      return {
        async step(a) {
          const action = a.kind === "text" ? JSON.stringify(a.text) : a.kind === "string_args" ? `{"name":${JSON.stringify(a.name)},"arguments":${JSON.stringify(a.argsText)}}` : `{"name":${JSON.stringify(a.name)},"arguments":${a.argsJson}}`;
          const res = await post("/api/play/step", `{"episode_id":${JSON.stringify(ep)},"action":${action}}`);
          if (res.status !== 200) {
            const e = res.body.error as { code: string; message: string };
            return { kind: "error", code: e.code, message: e.message };
          }
          return observed((res.body.result as { observation: { content: string } }).observation.content);
        },
        async close() {
          await post("/api/play/close", JSON.stringify({ episode_id: ep })).catch(() => undefined);
        },
      };
    },
  };
}
