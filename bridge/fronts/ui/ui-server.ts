import { readSeed } from "../../core/sessions/seed.js";
import { ClientAborted, timeoutOptions } from "../mcp/http-timeouts.js";
import { readFileSync } from "node:fs";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { EnvRuntime } from "../../core/engine/env-runtime.js";
import type { UserSimulatorConfig } from "../../core/episode/user-simulator.js";
import type { AgentPlayer } from "./agent-player.js";
import { AgentRuns, agentRequest } from "./agent-runs.js";
import { EnvCatalog } from "./env-catalog.js";
import { ApiError, asApiError, readJsonBody, sendError, sendJson, str } from "./http-util.js";
import { PlaySessions } from "./play-sessions.js";
import { TrajectoryLibrary } from "./trajectory-library.js";
import { hostAllowed, isLoopback, newToken, originAllowed, TOKEN_COOKIE, tokenOk } from "./ui-auth.js";

export interface UiOptions {
  envs: string[];
  /** Folder of recorded trajectory files (*.jsonl, searched a few levels deep). */
  trajectories: string;
  /** @default 8080; 0 picks a free port */
  port?: number;
  /** @default 127.0.0.1. Any non-loopback address requires the token printed at start. */
  host?: string;
  /** The simulated user for conversation scenarios; null: conversations have no user (text replies are recorded). */
  user?: UserSimulatorConfig | null;
  /** An episode left alone this long is closed. @unit ms @default 1_800_000 */
  idleMs?: number;
  /** Live episodes at once. @default 32 */
  maxEpisodes?: number;
  /** How long past a guest call's deadline before the watchdog stops it (engine and replay workers). @unit ms @default 1000 */
  hardStopGraceMs?: number;
  /** Snapshots (undo points) one episode may hold; a step beyond it runs but cannot be undone. @default 32 */
  maxSnapshots?: number;
  /** Memory all episodes' snapshots may hold together. @unit MiB @default 512 */
  maxSnapshotMb?: number;
  /** What the page's agent form starts with (an OpenAI-compatible endpoint and model); the page may change both. */
  agent?: { baseURL?: string; model?: string };
  /** Plays the page's agent runs (the CLI gives it agent/'s loop); unset: the agent form is refused. */
  agentPlayer?: AgentPlayer;
}

const ASSETS = new URL("./assets/", import.meta.url);
const TYPES: Record<string, string> = { js: "text/javascript; charset=utf-8", css: "text/css; charset=utf-8", html: "text/html; charset=utf-8", svg: "image/svg+xml" };
const APP_CSP = "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; frame-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";
// the episode page (the same HTML `envscaler view` writes) has inline CSS and no scripts; the app frames it
const PAGE_CSP = "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'self'";

/** A route: its result (or what its promise resolves to) is the JSON reply. */
type Handler = (req: IncomingMessage, url: URL, res: ServerResponse) => unknown;

/**
 * `envscaler ui`: the web playground, served by this process with node:http. One EnvRuntime for
 * every page's episodes; assets are files next to this module, nothing is fetched from elsewhere.
 * Owns the runtime, the play sessions and the HTTP server; close() releases all three.
 */
/** How long a whole request may take to arrive (see http-timeouts.ts). @unit ms */
export const UI_REQUEST_TIMEOUT_MS = 60_000;

export class UiServer {
  readonly token: string | null;
  readonly loopback: boolean;
  private server: Server | null = null;
  private readonly routes = new Map<string, Handler>();
  readonly catalog: EnvCatalog;
  readonly play: PlaySessions;
  readonly agents: AgentRuns;
  readonly trajectories: TrajectoryLibrary;

  private constructor(
    readonly runtime: EnvRuntime,
    private readonly options: UiOptions,
  ) {
    this.loopback = isLoopback(options.host ?? "127.0.0.1");
    this.token = this.loopback ? null : newToken();
    this.catalog = new EnvCatalog(runtime.registry);
    this.play = new PlaySessions(runtime, { idleMs: options.idleMs, maxEpisodes: options.maxEpisodes, userAttached: !!options.user });
    this.agents = new AgentRuns(this.play, options.agentPlayer ?? null);
    this.trajectories = new TrajectoryLibrary(options.trajectories, options.envs, options.hardStopGraceMs);
    this.defineRoutes();
  }

  static async start(options: UiOptions): Promise<UiServer> {
    const rt = await EnvRuntime.start({
      envs: options.envs, workers: 1, user: options.user ?? null, hardStopGraceMs: options.hardStopGraceMs,
      maxSnapshotsPerEpisode: options.maxSnapshots ?? 32, maxSnapshotBytes: (options.maxSnapshotMb ?? 512) * 2 ** 20,
    });
    const ui = new UiServer(rt, options);
    try {
      await ui.listen();
    } catch (e) {
      await ui.close();
      throw e;
    }
    return ui;
  }

  get url(): string {
    const a = this.server!.address() as AddressInfo;
    const host = a.family === "IPv6" ? `[${a.address}]` : a.address;
    return `http://${host === "0.0.0.0" || host === "[::]" ? "127.0.0.1" : host}:${a.port}/`;
  }

  /** The link to open: with the token when one is required (the page trades it for a cookie). */
  get openUrl(): string {
    return this.token ? `${this.url}?token=${this.token}` : this.url;
  }

  private listen(): Promise<void> {
    // a whole request must arrive within 60 s (headers within 20 s): set explicitly, not Node's 300 s (docs/ui.md)
    const server = createServer(timeoutOptions(UI_REQUEST_TIMEOUT_MS, 20_000), (req, res) => void this.handle(req, res));
    this.server = server;
    return new Promise((resolve, reject) => {
      server.once("error", reject);
      server.listen(this.options.port ?? 8080, this.options.host ?? "127.0.0.1", () => {
        server.off("error", reject);
        resolve();
      });
    });
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? "/", "http://ui.invalid");
    res.setHeader("x-content-type-options", "nosniff");
    res.setHeader("referrer-policy", "no-referrer");
    try {
      if (!hostAllowed(req, this.loopback)) throw new ApiError(403, "forbidden", "this server answers only requests addressed to localhost");
      if (req.method === "POST" && !originAllowed(req)) throw new ApiError(403, "forbidden", "cross-origin requests are refused");
      if (!tokenOk(this.token, req, url)) throw new ApiError(401, "unauthorized", "this server is bound to a non-loopback address: open the link with ?token= that `envscaler ui` printed, or send Authorization: Bearer <token>");
      if (this.token && url.searchParams.has("token") && req.method === "GET" && url.pathname === "/") {
        // trade the link's token for a cookie, and take it out of the address bar and history
        res.writeHead(303, { "set-cookie": `${TOKEN_COOKIE}=${encodeURIComponent(this.token)}; HttpOnly; SameSite=Strict; Path=/`, location: "/" });
        return void res.end();
      }
      const handler = this.routes.get(`${req.method} ${url.pathname}`);
      if (handler) {
        const value = await handler(req, url, res);
        if (!res.headersSent) sendJson(res, 200, value ?? { ok: true });
        return;
      }
      if (req.method === "GET") return this.serveAsset(url.pathname, res);
      throw new ApiError(404, "not_found", `no route ${req.method} ${url.pathname}`);
    } catch (e) {
      // the client went away mid-upload: nothing to answer, and no bug of ours
      if (e instanceof ClientAborted) return void res.destroy();
      if (res.headersSent) return void res.end();
      // a failure of the session service or the runtime answers as the failure table says
      const failure = asApiError(e);
      if (failure instanceof ApiError) return sendError(res, failure);
      // anything else is a bug of ours, not of the env or the request
      console.error("envscaler ui: internal error:", e);
      sendError(res, new ApiError(500, "internal_error", (e as Error)?.message ?? String(e)));
    }
  }

  private serveAsset(pathname: string, res: ServerResponse): void {
    const name = pathname === "/" ? "index.html" : pathname.replace(/^\/assets\//, "");
    if (!/^[a-z0-9-]+\.(js|css|html|svg)$/.test(name) || (pathname !== "/" && !pathname.startsWith("/assets/"))) throw new ApiError(404, "not_found", `no page ${pathname}`);
    let body: Buffer;
    try {
      body = readFileSync(new URL(name, ASSETS));
    } catch {
      throw new ApiError(404, "not_found", `no asset ${name}`);
    }
    const ext = name.split(".").pop()!;
    res.writeHead(200, { "content-type": TYPES[ext]!, "cache-control": "no-cache", ...(ext === "html" ? { "content-security-policy": APP_CSP } : {}) });
    res.end(body);
  }

  private defineRoutes(): void {
    const r = (key: string, h: Handler) => this.routes.set(key, h);
    const body = readJsonBody;
    const num = (v: string | null) => (v === null || v === "" ? undefined : Number.isFinite(Number(v)) ? Number(v) : badNumber(v));

    r("GET /api/info", () => ({
      envs: this.catalog.list().length,
      trajectories: this.trajectories.root,
      user_attached: !!this.options.user,
      open_episodes: this.play.count(),
      agent: { base_url: this.options.agent?.baseURL ?? "", model: this.options.agent?.model ?? "", running: this.agents.running() },
      snapshots: { per_episode: this.options.maxSnapshots ?? 32, mb: this.options.maxSnapshotMb ?? 512 },
    }));
    r("GET /api/envs", (_req, url) => ({ envs: this.catalog.list(url.searchParams.get("q") ?? "") }));
    r("GET /api/env", (_req, url) => this.catalog.get(url.searchParams.get("id") ?? ""));

    r("POST /api/play/start", async (req) => {
      const b = await body(req);
      // absent, null or "" (the form's empty field): a random seed
      const read = b.seed === undefined || b.seed === null || b.seed === "" ? null : readSeed(b.seed);
      if (read && "problem" in read) throw new ApiError(400, "bad_request", read.problem);
      return this.play.start(str(b, "page"), str(b, "scenario_id"), read?.seed);
    });
    r("POST /api/play/step", async (req) => {
      const b = await body(req);
      if (b.action === undefined || b.action === null) throw new ApiError(400, "bad_request", "action is required: a tool call {name, arguments}, a list of them, or the model's raw text");
      return this.play.step(str(b, "episode_id"), b.action);
    });
    r("POST /api/play/score", async (req) => this.play.score(str(await body(req), "episode_id")));
    r("POST /api/play/finish", async (req) => this.play.finish(str(await body(req), "episode_id")));
    r("POST /api/play/close", async (req) => {
      await this.play.close(str(await body(req), "episode_id"));
      return { ok: true };
    });
    r("POST /api/play/close-page", async (req) => {
      const page = str(await body(req), "page");
      await this.agents.closePage(page);
      return { closed: await this.play.closePage(page) };
    });
    r("POST /api/play/undo", async (req) => {
      const b = await body(req);
      return this.play.undo(str(b, "episode_id"), step(b.to_step, "to_step"));
    });
    r("POST /api/play/branch", async (req) => {
      const b = await body(req);
      return this.play.branch(str(b, "episode_id"), step(b.at_step, "at_step"));
    });

    r("POST /api/agent/start", async (req) => this.agents.start(agentRequest(await body(req))));
    r("POST /api/agent/stop", async (req) => this.agents.stop(str(await body(req), "run_id")));
    r("GET /api/agent/events", (req, url, res) => {
      const last = req.headers["last-event-id"];
      this.agents.stream(url.searchParams.get("run_id") ?? "", (Array.isArray(last) ? last[0] : last) ?? url.searchParams.get("after") ?? undefined, res);
    });
    r("GET /api/play/state", async (_req, url) => ({ state: await this.play.state(url.searchParams.get("episode_id") ?? "") }));

    const filter = (q: URLSearchParams) => ({ env: q.get("env") || undefined, scenario: q.get("scenario") || undefined, endReason: q.get("end_reason") || undefined, minReward: num(q.get("min_reward")), maxReward: num(q.get("max_reward")) });
    r("GET /api/trajectories", (_req, url) => ({ root: this.trajectories.root, ...this.trajectories.list(filter(url.searchParams)) }));
    // the charts of the filtered episodes: a framed page like the episode page (inline SVG, no scripts)
    r("GET /trajectories/charts", (_req, url, res) => {
      const html = this.trajectories.chartsPage(filter(url.searchParams));
      res.writeHead(200, { "content-type": "text/html; charset=utf-8", "content-security-policy": PAGE_CSP, "cache-control": "no-cache" });
      res.end(html);
    });
    r("GET /api/trajectories/episode", (_req, url) => this.trajectories.episode(url.searchParams.get("file") ?? "", url.searchParams.get("id") ?? ""));
    r("GET /trajectories/page", (_req, url, res) => {
      const html = this.trajectories.page(url.searchParams.get("file") ?? "", url.searchParams.get("id") ?? "");
      res.writeHead(200, { "content-type": "text/html; charset=utf-8", "content-security-policy": PAGE_CSP, "cache-control": "no-cache" });
      res.end(html);
    });
    r("POST /api/trajectories/replay", async (req) => {
      const b = await body(req);
      return this.trajectories.replay(str(b, "file"), str(b, "episode_id"));
    });
    r("POST /api/trajectories/export", async (req) => {
      const items = (await body(req)).items;
      const isItem = (i: unknown) => typeof i === "object" && i !== null && typeof (i as Record<string, unknown>).file === "string" && typeof (i as Record<string, unknown>).episode_id === "string";
      if (!Array.isArray(items) || items.length === 0 || !items.every(isItem)) {
        throw new ApiError(400, "bad_request", "items must be a non-empty list of {file, episode_id}");
      }
      const { records, left_out, why } = this.trajectories.exportSft(items as { file: string; episode_id: string }[]);
      return { jsonl: records.map((x) => JSON.stringify(x)).join("\n") + (records.length ? "\n" : ""), count: records.length, left_out, left_out_why: why };
    });
  }

  async close(): Promise<void> {
    const server = this.server;
    this.server = null;
    if (server) {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
    await this.agents.dispose();
    await this.play.dispose();
    await this.runtime.close();
  }
}

/** An optional step number from a request body. */
function step(v: unknown, name: string): number | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "number" || !Number.isInteger(v) || v < 0) throw new ApiError(400, "bad_request", `${name} must be a step number (an integer >= 0)`);
  return v;
}

function badNumber(v: string): never {
  throw new ApiError(400, "bad_request", `${v} is not a number`);
}
