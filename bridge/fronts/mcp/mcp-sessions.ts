import type { Server } from "@modelcontextprotocol/sdk/server/index.js";
import type { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import type { EnvRuntime } from "../../core/engine/env-runtime.js";
import { SessionService, type Session } from "../../core/sessions/session-service.js";
import type { InFlightGate } from "./in-flight-gate.js";
import { McpHttpError } from "./mcp-error.js";
import { McpEpisode, type EpisodeScore } from "./mcp-episode.js";
import type { McpLimits } from "./mcp-limits.js";

/** How many closed session ids (and rollout tags) are remembered, so a late request hears `session_closed` and why. */
const CLOSED_MEMORY = 16_384;

/** MCP's own part of a session: its episode's MCP face and, once a client connected, its SDK server and transport. */
export interface McpSession {
  episode: McpEpisode;
  server: Server | null;
  transport: StreamableHTTPServerTransport | null;
  /** A fork no MCP client has connected to yet (it connects with the X-EnvScaler-Fork header). */
  pending: boolean;
  /** A pending fork whose client is in its handshake: no other client may take it, and it is not idle. */
  connecting: boolean;
}

/** What the control routes see of one session. */
export type ControlSession = Session<McpSession>;

/**
 * The sessions of `envscaler mcp` on the session service: `--max-sessions` counting forks not yet
 * connected and opens under way, `--max-queued-per-session`, closed ids and rollout tags
 * remembered with why, and each closed session's result kept for the trainer.
 */
export class McpSessions extends SessionService<McpSession, EpisodeScore> {
  constructor(
    private readonly runtime: EnvRuntime,
    private readonly gate: InFlightGate,
    limits: McpLimits,
  ) {
    super({
      runtime,
      maxSessions: limits.maxSessions,
      maxQueued: limits.maxQueuedPerSession,
      closedMemory: CLOSED_MEMORY,
      keepResults: true,
      words: {
        where: "",
        closed: (why) => `is closed: ${why}`,
        refuse: (_scope, _open, max) => new McpHttpError("too_many_sessions", `${max} sessions are open (the limit, --max-sessions, counting forks not yet connected); close one or retry later`),
      },
    });
  }

  /** A session not yet added, with its (not yet started) episode. */
  fresh(id: string): ControlSession {
    const s = this.make(id, "", { episode: null as unknown as McpEpisode, server: null, transport: null, pending: false, connecting: false });
    s.extra.episode = new McpEpisode(s, this.runtime, this.gate);
    return s;
  }

  /** The sessions a client is connected to (not the forks waiting for one). */
  connected(): ControlSession[] {
    return this.all().filter((s) => !s.extra.pending);
  }
}
