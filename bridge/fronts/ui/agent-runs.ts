import { randomUUID } from "node:crypto";
import type { ServerResponse } from "node:http";
import type { Usage } from "../../../llm/chat.js";
import type { AgentGame, AgentOutcome, AgentPlayer, EpisodeOps } from "./agent-player.js";
import { ApiError } from "./http-util.js";
import type { PlaySessions } from "./play-sessions.js";

/** What the page asks for: a scenario and seed, and the model to play it. */
export interface AgentRequest extends Omit<AgentGame, "key" | "seed"> {
  page: string;
  seed?: number;
}

/** What the page is told, in order, over the run's event stream. */
export type AgentEvent =
  | ({ type: "start" } & Awaited<ReturnType<PlaySessions["start"]>>)
  | { type: "thinking"; step: number }
  | { type: "model"; step: number; latency_ms: number; attempts: number; usage: Usage }
  | ({ type: "step"; action: unknown; finish?: true } & Awaited<ReturnType<PlaySessions["step"]>>)
  | { type: "end"; stopped: boolean; outcome: AgentSummary };

export type AgentSummary = AgentOutcome;

interface Run {
  id: string;
  page: string;
  episodeId: string | null;
  events: AgentEvent[];
  /** Open event streams: each is sent every new event, and ended with the run. */
  listeners: Set<{ send: (e: AgentEvent, index: number) => void; end: () => void }>;
  controller: AbortController;
  done: Promise<void>;
  ended: number | null;
}

/** A finished run's events are kept this long for a page that reconnects. @unit ms */
const KEEP_ENDED_MS = 10 * 60_000;

/** Steps stopped by the user: every later request of the loop is refused with this code. */
const STOPPED = "stopped";

/**
 * Models playing scenarios from the UI, through an AgentPlayer (the CLI gives it the rollout's
 * loop, agent/ui-agent-player.ts): its episode operations are the page's PlaySessions, so the
 * model's episode is an ordinary play episode (its steps snapshotted, scored live, undoable and
 * branchable once the run ends) and every step is streamed to the page as it happens. A run is
 * stopped by aborting its signal (the player cancels its model call in flight).
 */
export class AgentRuns {
  private readonly runs = new Map<string, Run>();

  /** `player`: null when the UI was started without one: the page's agent form is refused. */
  constructor(
    private readonly play: PlaySessions,
    private readonly player: AgentPlayer | null,
  ) {}

  start(req: AgentRequest): { run_id: string } {
    this.prune();
    const player = this.player;
    if (!player) throw new ApiError(501, "no_agent", "this playground was started without an agent player: models cannot play here");
    // refused here rather than as the loop's first failure
    this.play.checkStart(req.scenario_id);
    const run: Run = { id: `run-${randomUUID()}`, page: req.page, episodeId: null, events: [], listeners: new Set(), controller: new AbortController(), done: Promise.resolve(), ended: null };
    const emit = (e: AgentEvent) => {
      run.events.push(e);
      for (const l of run.listeners) l.send(e, run.events.length - 1);
    };
    const signal = run.controller.signal;
    const refuse = () => Object.assign(new Error("stopped by the user"), { code: STOPPED });
    const episode: EpisodeOps = async (op, f = {}) => {
      // the episode belongs to the page, not to the loop: it stays open for the user to go on with
      if (op === "close") return {};
      if (signal.aborted) throw refuse();
      if (op === "reset") {
        const r = await this.play.start(req.page, f.scenario_id as string, f.seed as number);
        run.episodeId = r.episode_id;
        this.play.claim(r.episode_id, run.id);
        emit({ type: "start", ...r });
        return { session_id: r.episode_id, observation: r.observation, info: r.info };
      }
      if (op === "step" || op === "finish") {
        const r = op === "step" ? await this.play.step(run.episodeId!, f.action, run.id) : await this.play.finish(run.episodeId!, run.id);
        emit({ type: "step", action: op === "step" ? f.action : null, ...(op === "finish" ? { finish: true as const } : {}), ...r });
        return r.result;
      }
      throw new ApiError(500, "internal_error", `the agent loop asked for ${op}, which the playground does not serve`);
    };
    const { page: _, ...game } = req;
    const hooks = {
      signal,
      onThinking: (step: number) => emit({ type: "thinking", step }),
      onReply: (step: number, r: { latency_ms: number; attempts: number; usage: Usage }) => emit({ type: "model", step, ...r }),
    };
    run.done = player
      .play(episode, { ...game, key: run.id, seed: req.seed ?? Math.floor(Math.random() * 2 ** 31) }, hooks)
      .then((outcome) => emit({ type: "end", stopped: signal.aborted, outcome }))
      .finally(() => {
        run.ended = Date.now();
        if (run.episodeId) {
          try {
            this.play.claim(run.episodeId, null);
          } catch {
            // closed meanwhile (its page went away)
          }
        }
        for (const l of run.listeners) l.end();
        run.listeners.clear();
      });
    this.runs.set(run.id, run);
    return { run_id: run.id };
  }

  private get(id: string): Run {
    const run = this.runs.get(id);
    if (!run) throw new ApiError(404, "unknown_run", `no agent run ${id} (ended long ago, its page closed, or never started)`);
    return run;
  }

  /** Stops the run: its model call in flight is cancelled; a step in flight finishes (the env's own limits bound it). */
  async stop(id: string): Promise<{ stopped: boolean }> {
    const run = this.get(id);
    const was = run.ended === null;
    run.controller.abort();
    await run.done;
    return { stopped: was };
  }

  /**
   * Streams the run's events as server-sent events, from after `lastEventId` (a reconnecting
   * EventSource sends it), and ends the stream after the last one.
   */
  stream(id: string, lastEventId: string | undefined, res: ServerResponse): void {
    const run = this.get(id);
    res.writeHead(200, { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-store", connection: "keep-alive" });
    const send = (e: AgentEvent, i: number) => res.write(`id: ${i}\ndata: ${JSON.stringify(e)}\n\n`);
    const from = lastEventId !== undefined && /^\d+$/.test(lastEventId) ? Number(lastEventId) + 1 : 0;
    run.events.slice(from).forEach((e, k) => send(e, from + k));
    if (run.ended !== null) return void res.end();
    const listener = { send, end: () => res.end() };
    run.listeners.add(listener);
    res.on("close", () => run.listeners.delete(listener));
  }

  /** Stops and forgets the runs a page started (the page went away). */
  async closePage(page: string): Promise<void> {
    for (const run of [...this.runs.values()].filter((r) => r.page === page)) {
      run.controller.abort();
      await run.done;
      this.runs.delete(run.id);
    }
  }

  private prune(): void {
    const now = Date.now();
    for (const [id, run] of this.runs) if (run.ended !== null && now - run.ended > KEEP_ENDED_MS) this.runs.delete(id);
  }

  running(): number {
    return [...this.runs.values()].filter((r) => r.ended === null).length;
  }

  async dispose(): Promise<void> {
    for (const run of this.runs.values()) run.controller.abort();
    await Promise.all([...this.runs.values()].map((r) => r.done));
    this.runs.clear();
  }
}

/** Checks the page's request; every field is typed, bounded, and named when wrong. */
export function agentRequest(b: Record<string, unknown>): AgentRequest {
  const bad = (m: string): never => {
    throw new ApiError(400, "bad_request", m);
  };
  const s = (k: string, optional = false) => {
    const v = b[k];
    if ((v === undefined || v === null || v === "") && optional) return undefined;
    return typeof v === "string" && v !== "" ? v : bad(`${k} must be a non-empty string`);
  };
  const n = (k: string, lo: number, hi: number, integer: boolean, fallback?: number) => {
    const v = b[k] === undefined || b[k] === null || b[k] === "" ? fallback : Number(b[k]);
    if (v === undefined) return undefined;
    if (!Number.isFinite(v) || v < lo || v > hi || (integer && !Number.isInteger(v))) return bad(`${k} must be ${integer ? "an integer" : "a number"} in [${lo}, ${hi}]`);
    return v;
  };
  const baseUrl = s("base_url")!;
  let url: URL | undefined;
  try {
    url = new URL(baseUrl);
  } catch {
    // reported below
  }
  if (!url || (url.protocol !== "http:" && url.protocol !== "https:")) bad("base_url must be an http(s) URL of an OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1");
  const mode = b.agent_mode ?? "fc";
  if (mode !== "fc" && mode !== "prompt") bad("agent_mode must be fc (the endpoint's tool calling) or prompt (tool calls written in the text)");
  return {
    page: s("page")!,
    scenario_id: s("scenario_id")!,
    seed: n("seed", 0, 2 ** 32 - 1, true),
    base_url: baseUrl,
    model: s("model")!,
    api_key: s("api_key", true),
    agent_mode: mode as AgentRequest["agent_mode"],
    max_steps: n("max_steps", 1, 1000, true),
    timeout_s: n("timeout_s", 1, 600, false, 60)!,
    max_retries: n("max_retries", 0, 5, true, 0)!,
    temperature: n("temperature", 0, 2, false),
  };
}
