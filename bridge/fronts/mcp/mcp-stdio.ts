import type { Readable, Writable } from "node:stream";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import type { EnvRuntime } from "../../core/engine/env-runtime.js";
import { SessionService, type SessionWords } from "../../core/sessions/session-service.js";
import { InFlightGate } from "./in-flight-gate.js";
import { McpEpisode, type EpisodeScore } from "./mcp-episode.js";
import { createMcpServer } from "./mcp-surface.js";
import type { ScenarioPicker } from "./scenario-picker.js";

export interface StdioOptions {
  runtime: EnvRuntime;
  picker: ScenarioPicker;
  seed?: number;
  stdin?: Readable;
  stdout?: Writable;
}

export interface StdioOutcome {
  scenario_id: string | null;
  seed: number | null;
  /** Null when no episode was started. */
  score: EpisodeScore | null;
}

/** Never said: the one session of stdio is open as long as the process serves. */
const STDIO_WORDS: SessionWords = { where: "", closed: (why) => why, refuse: () => new Error("stdio serves one session") };

/**
 * One episode over stdio, for a local MCP client that starts this process (an IDE, an agent
 * harness): the session is the process. When the client closes stdin the episode is finished
 * and scored, and the outcome returned (the CLI prints it to stderr and --result-file).
 */
export async function serveStdio(options: StdioOptions): Promise<StdioOutcome> {
  const stdin = options.stdin ?? process.stdin;
  // the session is the process: one session of a one-session service
  const sessions = new SessionService({ runtime: options.runtime, maxSessions: 1, maxQueued: 1024, closedMemory: 0, words: STDIO_WORDS });
  const episode = new McpEpisode(sessions.open("stdio", "", null), options.runtime, new InFlightGate(Number.MAX_SAFE_INTEGER));
  const implicit = options.picker.implicit;
  if (implicit !== undefined) await episode.start(implicit, options.seed);
  const server = createMcpServer(episode, options.picker);
  const closed = new Promise<void>((resolve) => (server.onclose = resolve));
  const onEnd = () => void server.close();
  stdin.once("end", onEnd);
  stdin.once("close", onEnd);
  const stdout = options.stdout ?? process.stdout;
  const transport = new StdioServerTransport(stdin, stdout);
  // The SDK's stdio transport reports a line it cannot read (not JSON, not a JSON-RPC message, a
  // batch) to onerror and answers nothing, so the client waits forever; every request gets a reply
  // here, as over HTTP: -32700 for text that is not JSON, -32600 for JSON that is no request.
  transport.onerror = (error) => {
    const parse = error instanceof SyntaxError;
    const reply = { jsonrpc: "2.0", id: null, error: { code: parse ? -32700 : -32600, message: parse ? "Parse error: the line is not JSON" : "Invalid Request: the line is not one JSON-RPC message (batches are not taken)" } };
    stdout.write(`${JSON.stringify(reply)}\n`);
  };
  await server.connect(transport);
  await closed;
  let score: EpisodeScore | null = null;
  try {
    if (episode.started) score = await episode.finish();
  } finally {
    await episode.close();
  }
  return { scenario_id: episode.started?.scenario_id ?? null, seed: episode.started?.seed ?? null, score };
}
