import { createServer, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

/**
 * A local OpenAI-compatible chat endpoint with scripted replies, for tests. Each POST to
 * /v1/chat/completions takes the next scripted reply (a string is the message content; a number is
 * an HTTP error status) and records the request body.
 */
export interface FixtureRequest {
  messages: { role: string; content: string; tool_calls?: { id: string; function: { name: string; arguments: string } }[]; tool_call_id?: string }[];
  model: string;
  temperature?: number;
  max_tokens?: number;
  tools?: unknown[];
  [k: string]: unknown;
}

/**
 * A full reply: an assistant message with tool calls (and optional reasoning), usage, a real
 * failure shape (`finish_reason: "length"`: a reply cut at the token cap), or `hang` (the endpoint
 * accepts the request and never answers, like a stuck server).
 */
export interface FixtureReply {
  content?: string | null;
  tool_calls?: { id: string; type: "function"; function: { name: string; arguments: string } }[];
  reasoning_content?: string;
  usage?: { prompt_tokens: number; completion_tokens: number };
  finish_reason?: "stop" | "length" | "tool_calls";
  hang?: boolean;
  /** Answer only after this long (a slow model). @unit ms */
  delayMs?: number;
}
/** The name the synth tests use for a reply object. */
export type ScriptedReply = FixtureReply;

/** A reply: message content, an HTTP error status, or a full reply. */
export type Scripted = string | number | FixtureReply;

/** Picks the reply to a request (for concurrent callers, where order is not fixed). */
export type Responder = (request: FixtureRequest) => Scripted;

export class OpenAIFixture {
  readonly requests: FixtureRequest[] = [];
  private readonly hung: ServerResponse[] = [];
  private constructor(
    private readonly server: Server,
    private readonly script: Scripted[] | Responder,
  ) {}

  static async start(script: Scripted[] | Responder): Promise<OpenAIFixture> {
    const server = createServer();
    const fixture = new OpenAIFixture(server, typeof script === "function" ? script : [...script]);
    server.on("request", (req, res) => {
      let body = "";
      req.on("data", (c) => (body += c));
      req.on("end", () => {
        if (req.method !== "POST" || !req.url?.endsWith("/chat/completions")) {
          res.writeHead(404).end();
          return;
        }
        const request = JSON.parse(body) as FixtureRequest;
        fixture.requests.push(request);
        const next = typeof fixture.script === "function" ? fixture.script(request) : fixture.script.shift();
        if (typeof next === "object" && next.hang) {
          fixture.hung.push(res); // answered never; close() ends it
          return;
        }
        if (next === undefined || typeof next === "number") {
          res.writeHead(typeof next === "number" ? next : 500, { "content-type": "application/json" }).end(JSON.stringify({ error: { message: "scripted failure" } }));
          return;
        }
        const reply: FixtureReply = typeof next === "string" ? { content: next } : next;
        const usage = reply.usage ?? { prompt_tokens: 1, completion_tokens: 1 };
        const message = { role: "assistant", content: reply.content ?? (reply.tool_calls ? null : ""), ...(reply.tool_calls ? { tool_calls: reply.tool_calls } : {}), ...(reply.reasoning_content ? { reasoning_content: reply.reasoning_content } : {}) };
        const payload = JSON.stringify({
          id: `chatcmpl-${fixture.requests.length}`,
          object: "chat.completion",
          created: 0,
          model: "fixture",
          choices: [{ index: 0, finish_reason: reply.finish_reason ?? (reply.tool_calls ? "tool_calls" : "stop"), message }],
          usage: { ...usage, total_tokens: usage.prompt_tokens + usage.completion_tokens },
        });
        const send = () => res.writeHead(200, { "content-type": "application/json" }).end(payload);
        if (reply.delayMs) setTimeout(send, reply.delayMs);
        else send();
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    return fixture;
  }

  get baseURL(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/v1`;
  }

  close(): Promise<void> {
    for (const res of this.hung.splice(0)) res.destroy();
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    this.server.closeAllConnections(); // hung requests included
    return closed;
  }
}
