import { randomUUID } from "node:crypto";
import type { ServerResponse } from "node:http";
import { ModelClient, type AgentMessage, type ModelReply } from "../../agent/model-client.js";
import { ABORTING_KINDS, runEpisode, type AgentBridge, type EpisodeOutcome } from "../../agent/run-episode.js";
import type { AgentMode } from "../../agent/system-prompt.js";
import { ApiError } from "./http-util.js";
import type { PlaySessions } from "./play-sessions.js";

/** What the page asks for: a scenario and seed, and the model to play it. */
export interface AgentRequest {
  page: string;
  scenario_id: string;
  seed?: number;
  base_url: string;
  model: string;
  api_key?: string;
  agent_mode: AgentMode;
  /** Client-side step cap (the scenario's own max_steps applies too). */
  max_steps?: number;
  /** Per model call. @unit s */
  timeout_s: number;
  max_retries: number;
  temperature?: number;
}

/** What the page is told, in order, over the run's event stream. */
export type AgentEvent =
  | ({ type: "start" } & Awaited<ReturnType<PlaySessions["start"]>>)
  | { type: "thinking"; step: number }
  | { type: "model"; step: number; latency_ms: number; attempts: number; usage: ModelReply["usage"] }
  | ({ type: "step"; action: unknown; finish?: true } & Awaited<ReturnType<PlaySessions["step"]>>)
  | { type: "end"; stopped: boolean; outcome: AgentSummary };

export type AgentSummary = Pick<EpisodeOutcome, "episode_id" | "reward" | "success" | "end_reason" | "steps" | "failures" | "usage" | "model_calls" | "model_ms" | "wall_ms">;

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

/** The agent's model client, its calls cancellable and announced to the page. */
class StreamedModel extends ModelClient {
  private step = 0;
  constructor(
    options: ConstructorParameters<typeof ModelClient>[0],
    private readonly signal: AbortSignal,
    private readonly emit: (e: AgentEvent) => void,
  ) {
    super(options);
  }

  override async chat(messages: AgentMessage[], tools: unknown[] | undefined, salt: string): Promise<ModelReply> {
    const step = ++this.step;
    this.emit({ type: "thinking", step });
    const r = await super.chat(messages, tools, salt, this.signal);
    this.emit({ type: "model", step, latency_ms: Math.round(r.latency_ms), attempts: r.attempts, usage: r.usage });
    return r;
  }
}

/**
 * Models playing scenarios from the UI, through the same loop as `envscaler rollout` (runEpisode):
 * its bridge is the page's PlaySessions, so the model's episode is an ordinary play episode (its
 * steps snapshotted, scored live, undoable and branchable once the run ends) and every step is
 * streamed to the page as it happens. A run is stopped by aborting its model call in flight.
 */
export class AgentRuns {
  private readonly runs = new Map<string, Run>();

  constructor(private readonly play: PlaySessions) {}

  start(req: AgentRequest): { run_id: string } {
    this.prune();
    // refused here rather than as the loop's first failure
    this.play.checkStart(req.scenario_id);
    const run: Run = { id: `run-${randomUUID()}`, page: req.page, episodeId: null, events: [], listeners: new Set(), controller: new AbortController(), done: Promise.resolve(), ended: null };
    const emit = (e: AgentEvent) => {
      run.events.push(e);
      for (const l of run.listeners) l.send(e, run.events.length - 1);
    };
    const signal = run.controller.signal;
    const model = new StreamedModel(
      {
        baseURL: req.base_url,
        apiKey: req.api_key || undefined,
        model: req.model,
        timeoutMs: req.timeout_s * 1000,
        maxRetries: req.max_retries,
        backoffMs: 500,
        sampling: req.temperature === undefined ? {} : { temperature: req.temperature },
      },
      signal,
      emit,
    );
    const refuse = () => Object.assign(new Error("stopped by the user"), { code: STOPPED });
    const bridge: AgentBridge = {
      request: (async (op: string, f: Record<string, unknown> = {}) => {
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
      }) as AgentBridge["request"],
    };
    const seed = req.seed ?? Math.floor(Math.random() * 2 ** 31);
    run.done = runEpisode(bridge, model, { key: run.id, scenario_id: req.scenario_id, trial: 0, seed }, { agentMode: req.agent_mode, maxSteps: req.max_steps })
      .then((o) => {
        const stopped = signal.aborted;
        // what stopping does to the loop (a cancelled call, refused requests) is not the model's failure
        const failures = stopped ? o.failures.filter((f) => !ABORTING_KINDS.includes(f.kind)) : o.failures;
        const { episode_id, reward, success, end_reason, steps, usage, model_calls, model_ms, wall_ms } = o;
        emit({ type: "end", stopped, outcome: { episode_id, reward, success, end_reason, steps, failures, usage, model_calls, model_ms: Math.round(model_ms), wall_ms: Math.round(wall_ms) } });
      })
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
    agent_mode: mode as AgentMode,
    max_steps: n("max_steps", 1, 1000, true),
    timeout_s: n("timeout_s", 1, 600, false, 60)!,
    max_retries: n("max_retries", 0, 5, true, 0)!,
    temperature: n("temperature", 0, 2, false),
  };
}
