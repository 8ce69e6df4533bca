import { readSeed } from "../../core/sessions/seed.js";
import { ClientAborted, timeoutOptions } from "./http-timeouts.js";
import { randomBytes, randomUUID } from "node:crypto";
import { createServer, type IncomingMessage, type Server as HttpServer, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { isInitializeRequest } from "@modelcontextprotocol/sdk/types.js";
import type { Logger } from "pino";
import type { EnvRuntime } from "../../core/engine/env-runtime.js";
import { requireSnapshot, unknownSnapshot } from "../../core/sessions/unknowns.js";
import { controlRoute, type ControlContext, type ForkSource } from "./control-routes.js";
import { parseJson, readBody, sendJson } from "./http-io.js";
import { InFlightGate } from "./in-flight-gate.js";
import { jsonRpcError, McpHttpError, statusOf, typedError } from "./mcp-error.js";
import type { EpisodeStarted } from "./mcp-episode.js";
import { DEFAULT_MCP_LIMITS, type McpLimits } from "./mcp-limits.js";
import { McpSessions, type ControlSession } from "./mcp-sessions.js";
import { createMcpServer } from "./mcp-surface.js";
import { RequestGuard } from "./request-guard.js";
import type { ScenarioPicker } from "./scenario-picker.js";

export const MCP_PATH = "/mcp";
export const SCENARIO_HEADER = "x-envscaler-scenario";
export const SEED_HEADER = "x-envscaler-seed";
export const ROLLOUT_HEADER = "x-envscaler-rollout";
/** On `initialize`: connect to a fork the trainer made (its session id or rollout tag). */
export const FORK_HEADER = "x-envscaler-fork";

/**
 * The codes that count as `refused` in /control/stats: requests a guard or a limit turned away.
 * Not every error: a client's probe before `initialize` (a newer client's server/discover, a GET
 * without a session) is answered with an error by design, and a tool error is an observation.
 */
const REFUSALS = new Set(["unauthorized", "forbidden_origin", "forbidden_host", "payload_too_large", "too_many_sessions", "overloaded", "shutting_down"]);

/** How long an idle kept-alive connection stays open. @unit ms */
const KEEP_ALIVE_MS = 65_000;

export interface McpHttpServerOptions {
  runtime: EnvRuntime;
  picker: ScenarioPicker;
  /** @default 127.0.0.1 */
  host?: string;
  /** 0 picks a free port. @default 0 */
  port?: number;
  /** Bearer token of the MCP endpoint; required unless `host` is loopback. */
  token?: string | null;
  /** Bearer token of the control routes; generated when not given (read it from `controlToken`). */
  controlToken?: string | null;
  allowedOrigins?: string[];
  allowedHosts?: string[];
  /** Seed of sessions that name none (X-EnvScaler-Seed); random per session when unset. */
  seed?: number;
  limits?: Partial<McpLimits>;
  logger: Logger;
}

/**
 * `envscaler mcp` over Streamable HTTP: each MCP session owns one episode of the shared EnvRuntime
 * (one SDK Server and transport per session). The session's scenario is fixed when it opens
 * (X-EnvScaler-Scenario / -Seed headers) or by its start_episode tool; the trainer reads the
 * reward on the control routes; closing the session (DELETE, the control route, the idle reaper)
 * ends the episode and frees its sandbox. Does not own the runtime.
 */
export class McpHttpServer {
  readonly limits: McpLimits;
  readonly controlToken: string;
  private readonly http: HttpServer;
  private readonly guard: RequestGuard;
  private readonly gate: InFlightGate;
  /** Every session, connected or a fork waiting for its client; the ids and rollout tags of closed ones with why; their results. */
  private readonly sessions: McpSessions;
  private stopping = false;
  private readonly counters = { opened: 0, reaped: 0, refused: 0, forked: 0 };
  url = "";

  constructor(private readonly options: McpHttpServerOptions) {
    this.limits = { ...DEFAULT_MCP_LIMITS, ...options.limits };
    this.guard = new RequestGuard({ host: options.host ?? "127.0.0.1", token: options.token ?? null, allowedOrigins: options.allowedOrigins ?? [], allowedHosts: options.allowedHosts ?? [] });
    this.controlToken = options.controlToken || randomBytes(24).toString("base64url");
    this.gate = new InFlightGate(this.limits.maxInFlight);
    this.sessions = new McpSessions(options.runtime, this.gate, this.limits);
    // explicit, documented bounds on how long a request may take to arrive (see http-timeouts.ts);
    // the headers' bound stays above keepAliveTimeout (below)
    this.http = createServer(timeoutOptions(this.limits.requestTimeoutMs, KEEP_ALIVE_MS + 5_000), (req, res) => {
      this.handle(req, res).catch((e: unknown) => {
        // a reply that could not be written (the peer went away): nothing to answer
        this.options.logger.debug({ err: e }, "reply failed");
        res.destroy();
      });
    });
    // Node's 5 s default races clients that reuse a kept-alive socket just as the server drops it
    // ("other side closed" on a POST, which clients do not retry); a busy client with hundreds of
    // sessions loses that race. Clients time out first when the server waits longer.
    this.http.keepAliveTimeout = KEEP_ALIVE_MS;
  }

  /** Binds and serves; resolves with the MCP endpoint's URL. */
  async start(): Promise<string> {
    const host = this.options.host ?? "127.0.0.1";
    await new Promise<void>((resolve, reject) => {
      this.http.once("error", reject);
      this.http.listen(this.options.port ?? 0, host, () => resolve());
    });
    const { port } = this.http.address() as AddressInfo;
    this.url = `http://${host.includes(":") ? `[${host}]` : host}:${port}${MCP_PATH}`;
    // a fork whose client is connecting is in its handshake, not idle
    this.sessions.startReaper(this.limits.idleTimeoutS * 1000, (s) => this.reap(s), { kept: (s) => s.extra.connecting });
    return this.url;
  }

  get controlUrl(): string {
    return this.url.replace(new RegExp(`${MCP_PATH}$`), "/control");
  }

  get sessionCount(): number {
    return this.sessions.connected().length;
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    // the request target as sent; "/mcp?x" is still the MCP endpoint
    const path = (req.url ?? "/").split("?")[0]!;
    const isMcp = path === MCP_PATH;
    // the JSON-RPC id of the request, once its body is read: an error we answer ourselves echoes it
    const rpc: { id: string | number | null } = { id: null };
    try {
      this.guard.checkOrigin(req);
      if (isMcp) return await this.handleMcp(req, res, rpc);
      if (path.startsWith("/control/")) {
        RequestGuard.checkBearer(req, this.controlToken);
        const body = req.method === "POST" ? parseJson(await readBody(req, this.limits.maxBodyBytes)) : undefined;
        return sendJson(res, 200, await controlRoute(this.control, req, path.split("/").slice(2).filter(Boolean), body));
      }
      if (path === "/healthz") return sendJson(res, 200, { ok: !this.stopping });
      throw new McpHttpError("not_found", `nothing at ${path}; MCP is at ${MCP_PATH}, the trainer's routes under /control/`);
    } catch (e) {
      if (e instanceof ClientAborted) {
        // the client went away mid-upload: its business, nothing to answer, not an error of ours
        this.options.logger.info({ path }, "client aborted the request");
        return void res.destroy();
      }
      const { code, message } = typedError(e);
      if (code === "internal_error") this.options.logger.error({ err: e, path }, "request failed");
      if (REFUSALS.has(code)) this.counters.refused++;
      const headers: Record<string, string> = code === "unauthorized" ? { "www-authenticate": "Bearer" } : {};
      if (req.readableEnded === false && code === "payload_too_large") headers.connection = "close";
      sendJson(res, statusOf(code), isMcp ? jsonRpcError(code, message, rpc.id) : { error: { code, message } }, headers);
    }
  }

  private async handleMcp(req: IncomingMessage, res: ServerResponse, rpc: { id: string | number | null }): Promise<void> {
    this.guard.checkToken(req);
    if (this.stopping) throw new McpHttpError("shutting_down", "the server is shutting down");
    const body = req.method === "POST" ? parseJson(await readBody(req, this.limits.maxBodyBytes)) : undefined;
    const id = body !== null && typeof body === "object" && !Array.isArray(body) ? (body as { id?: unknown }).id : undefined;
    if (typeof id === "string" || typeof id === "number") rpc.id = id;
    const sid = req.headers["mcp-session-id"];
    if (typeof sid === "string") {
      const entry = this.sessions.get(sid);
      const transport = entry.extra.transport;
      if (!transport) throw new McpHttpError("bad_request", `session ${sid} is a fork no client has connected to yet: start it with an initialize request carrying ${FORK_HEADER}: ${sid}`);
      // the transport's own traffic (a GET stream, a notification) counts as use too
      this.sessions.use(entry.id);
      return transport.handleRequest(req, res, body);
    }
    if (req.method === "POST" && isInitializeRequest(body)) return this.openSession(req, res, body);
    // e.g. a newer client's server/discover probe: answered as an error, so it falls back to initialize
    throw new McpHttpError("bad_request", "no Mcp-Session-Id header: a session starts with an initialize request");
  }

  private async openSession(req: IncomingMessage, res: ServerResponse, body: unknown): Promise<void> {
    const header = (name: string) => {
      const v = req.headers[name];
      return typeof v === "string" && v.trim() !== "" ? v.trim() : undefined;
    };
    const forkId = header(FORK_HEADER);
    if (forkId !== undefined) return this.connectFork(req, res, body, forkId, header(ROLLOUT_HEADER));
    this.sessions.admit("");
    const requested = header(SCENARIO_HEADER);
    const scenario = requested !== undefined ? this.options.picker.check(requested) : this.options.picker.implicit;
    const seedText = header(SEED_HEADER);
    const read = seedText !== undefined ? readSeed(seedText) : null;
    if (read && "problem" in read) throw new McpHttpError("bad_request", `${SEED_HEADER}: ${read.problem}`);
    const seed = read ? read.seed : this.options.seed;
    const rollout = header(ROLLOUT_HEADER) ?? null;
    if (rollout !== null && this.sessions.holds(rollout)) throw new McpHttpError("rollout_in_use", `rollout ${rollout} already has a live session`);

    const s = this.sessions.fresh(randomUUID());
    if (rollout !== null) this.sessions.tag(s, rollout);
    const episode = s.extra.episode;
    let registered = false;
    try {
      await this.sessions.reserving("", async () => {
        // reset before answering initialize, so the first tools/list already lists the env's tools
        if (scenario !== undefined) await episode.start(scenario, seed);
        registered = await this.connect(req, res, body, s);
      });
    } finally {
      if (!registered) {
        this.sessions.untag(s);
        await episode.close();
      }
    }
  }

  /** A client's initialize with X-EnvScaler-Fork: the session takes over the fork's episode, id and rollout tag. */
  private async connectFork(req: IncomingMessage, res: ServerResponse, body: unknown, forkId: string, rolloutHeader: string | undefined): Promise<void> {
    if (req.headers[SCENARIO_HEADER] !== undefined || req.headers[SEED_HEADER] !== undefined) {
      throw new McpHttpError("bad_request", `a fork plays its source's scenario and seed: send ${FORK_HEADER} without ${SCENARIO_HEADER} or ${SEED_HEADER}`);
    }
    const fork = this.sessions.get(forkId);
    if (!fork.extra.pending || fork.extra.connecting) throw new McpHttpError("bad_request", `session ${fork.id} is not a fork waiting for a client (a client is connected to it already)`);
    if (rolloutHeader !== undefined && rolloutHeader !== fork.rollout) {
      if (fork.rollout !== null) throw new McpHttpError("bad_request", `this fork's rollout tag is ${fork.rollout}; ${ROLLOUT_HEADER} says ${rolloutHeader}`);
      if (this.sessions.holds(rolloutHeader)) throw new McpHttpError("rollout_in_use", `rollout ${rolloutHeader} already has a live session`);
      this.sessions.tag(fork, rolloutHeader);
    }
    // while the handshake runs the fork keeps its session slot, and no other client can take it
    fork.extra.connecting = true;
    let registered = false;
    try {
      registered = await this.connect(req, res, body, fork);
    } finally {
      fork.extra.connecting = false;
      // a failed handshake leaves the fork waiting for another try, unless the server is stopping
      if (!registered && this.stopping) await this.closeSession(fork.id, "closed: the server shut down");
    }
  }

  /** Answers `initialize` on a new SDK server and transport for the session; true once the session is registered (added, or a fork connected). */
  private async connect(req: IncomingMessage, res: ServerResponse, body: unknown, s: ControlSession): Promise<boolean> {
    let registered = false;
    const id = s.id;
    const server = createMcpServer(s.extra.episode, this.options.picker);
    const transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => id,
      // one JSON reply per POST: cheaper than an SSE stream per call; notifications use the GET stream
      enableJsonResponse: true,
      maxRequestBodySize: this.limits.maxBodyBytes,
      onsessioninitialized: () => {
        registered = true;
        s.extra.server = server;
        s.extra.transport = transport;
        if (s.extra.pending) s.extra.pending = false;
        else this.sessions.add(s);
        this.counters.opened++;
      },
      onsessionclosed: () => this.closeSession(id, "closed by the client (HTTP DELETE)"),
    });
    server.onclose = () => void this.closeSession(id, "the transport closed");
    await server.connect(transport);
    await transport.handleRequest(req, res, body);
    if (!registered) await server.close();
    return registered;
  }

  /**
   * The control routes' fork: a new session whose episode continues from a live session's episode
   * (after its queued calls) or from a snapshot. It waits, holding a session slot, until a client
   * connects with X-EnvScaler-Fork (or the idle reaper closes it).
   */
  private async fork(source: ForkSource, rollout: string | null): Promise<Record<string, unknown>> {
    if (this.stopping) throw new McpHttpError("shutting_down", "the server is shutting down");
    this.sessions.admit("");
    if (rollout !== null && this.sessions.holds(rollout)) throw new McpHttpError("rollout_in_use", `rollout ${rollout} already has a live session`);
    const rt = this.options.runtime;
    let started: EpisodeStarted;
    let from: Record<string, unknown>;
    if ("session" in source) {
      if (!source.session.extra.episode.started) throw new McpHttpError("no_episode", `session ${source.session.id} has not started its episode: nothing to fork`);
      started = source.session.extra.episode.started;
      from = { session_id: source.session.id, rollout: source.session.rollout };
    } else {
      const snap = requireSnapshot(rt.snapshotInfo(source.snapshot_id), source.snapshot_id);
      // the snapshot's episode is a session's here (the runtime drops it with its episode)
      const owner = this.sessions.holderOf(snap.episode_id);
      if (!owner?.extra.episode.started) throw unknownSnapshot(source.snapshot_id);
      started = owner.extra.episode.started;
      from = { snapshot_id: source.snapshot_id };
    }
    const s = this.sessions.fresh(randomUUID());
    const id = s.id;
    if (rollout !== null) this.sessions.tag(s, rollout);
    try {
      return await this.sessions.reserving("", async () => {
        const r = "session" in source ? await source.session.extra.episode.fork(`mcp-${id}`) : await rt.fork({ snapshot_id: source.snapshot_id }, `mcp-${id}`);
        const episode = s.extra.episode.adoptFork(started, r);
        if (this.stopping) {
          await episode.close();
          throw new McpHttpError("shutting_down", "the server is shutting down");
        }
        s.extra.pending = true;
        this.sessions.add(s);
        this.counters.forked++;
        return { session_id: id, rollout, scenario_id: r.scenario_id, seed: r.seed, step: r.step, state_hash: r.state_hash, forked_from: { ...from, step: r.forked_from.step }, connect_header: "X-EnvScaler-Fork" };
      });
    } catch (e) {
      this.sessions.untag(s);
      throw e;
    }
  }

  /** Ends the session's episode (freeing its sandbox) and its transport; idempotent. */
  async closeSession(id: string, why: string): Promise<void> {
    const s = this.sessions.remove(id, why);
    if (!s) return;
    this.keepResult(s, why);
    await s.extra.episode.close();
    // again once the calls queued before the close have run: one of them may have ended the episode
    this.keepResult(s, why);
    await s.extra.server?.close().catch(() => undefined);
  }

  private keepResult(s: ControlSession, why: string): void {
    const ep = s.extra.episode;
    const started = { scenario_id: ep.started?.scenario_id ?? null, seed: ep.started?.seed ?? null };
    this.sessions.keep({ session_id: s.id, rollout: s.rollout, ...started, episode_id: ep.episodeId, steps: ep.steps, score: ep.score(), closed: why, closed_at: Date.now() });
  }

  private async reap(s: ControlSession): Promise<void> {
    this.counters.reaped++;
    this.options.logger.info({ session: s.id, rollout: s.rollout }, "closing idle session");
    const never = s.extra.pending ? " (a fork no client connected to)" : "";
    await this.closeSession(s.id, `closed by the idle reaper after ${this.limits.idleTimeoutS} s without a request${never}`);
  }

  private readonly control: ControlContext = {
    find: (idOrRollout) => this.sessions.get(idOrRollout),
    // connected sessions first, then the forks waiting for their client
    list: () => [...this.sessions.connected(), ...this.sessions.all().filter((s) => s.extra.pending)],
    closedResult: (idOrRollout) => this.sessions.closedResult(idOrRollout),
    close: (id, why) => this.closeSession(id, why),
    fork: (source, rollout) => this.fork(source, rollout),
    snapshotInfo: (id) => this.options.runtime.snapshotInfo(id),
    dropSnapshot: (id) => this.options.runtime.dropSnapshot(id),
    stats: () => ({
      sessions: this.sessions.connected().length,
      forks_waiting: this.sessions.all().filter((s) => s.extra.pending && !s.extra.connecting).length,
      forked: this.counters.forked,
      // opens under way, and forks whose client is in its handshake
      opening: this.sessions.opening + this.sessions.all().filter((s) => s.extra.connecting).length,
      in_flight: this.gate.inFlight,
      opened: this.counters.opened,
      reaped: this.counters.reaped,
      refused: this.counters.refused,
      results_kept: this.sessions.results!.size,
      limits: {
        max_sessions: this.limits.maxSessions, idle_timeout_s: this.limits.idleTimeoutS, max_in_flight: this.limits.maxInFlight,
        max_queued_per_session: this.limits.maxQueuedPerSession, max_body_bytes: this.limits.maxBodyBytes, request_timeout_s: this.limits.requestTimeoutMs / 1000,
      },
      runtime: this.options.runtime.stats(),
    }),
  };

  /** Refuses new requests, closes every session (ending its episode) and the listener. */
  async stop(): Promise<void> {
    if (this.stopping) return;
    this.stopping = true;
    this.sessions.stopReaper();
    await Promise.all(this.sessions.all().map((s) => this.closeSession(s.id, "closed: the server shut down")));
    await new Promise<void>((resolve) => {
      this.http.close(() => resolve());
      this.http.closeAllConnections();
    });
  }
}
