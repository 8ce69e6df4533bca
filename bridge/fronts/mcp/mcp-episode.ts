import type { ToolSchema } from "../../../envs/format/bundle-schema.js";
import type { EnvRuntime, ForkResult } from "../../core/engine/env-runtime.js";
import type { EpisodeInputs, ResetInfo, StepResult } from "../../core/episode/episode.js";
import type { Session } from "../../core/sessions/session-service.js";
import { requireSnapshot, sessionClosed } from "../../core/sessions/unknowns.js";
import type { InFlightGate } from "./in-flight-gate.js";
import { McpHttpError } from "./mcp-error.js";

/** What a trainer reads at the end of an episode (control route `finish` / `reward`). */
export interface EpisodeScore {
  reward: number;
  terminated: boolean;
  truncated: boolean;
  end_reason: string | undefined;
  /** Every check's result, passed/total and the reward mode. */
  reward_info: StepResult["info"]["reward_info"];
  /** Set when the env (not the agent) ended the episode: env_timeout, env_oom, env_crashed, … */
  error: StepResult["info"]["error"];
  state_hash: string;
  steps: number;
}

export interface EpisodeStarted {
  scenario_id: string;
  seed: number;
  mode: ResetInfo["mode"];
  /** The task text, or in a conversation with a simulated user, the user's first message. */
  first_message: string;
  introduction: string;
  rules: string[];
  /** The tools the agent sees now (a multi-turn benchmark adds held-out ones at their turn). */
  tools: ToolSchema[];
  max_steps: number;
  /** Multi-turn task scenarios: the number of user turns (message_user ends each). */
  turns?: number;
}

/** What an MCP episode uses of its session in the session service: its id, its queue (the one per-session ordering) and its episode. */
export type EpisodeSlot = Pick<Session, "id" | "queue" | "episodeId">;

/**
 * The MCP part of one session's episode in the shared EnvRuntime: started once, stepped one call
 * at a time in its session's order, ended by a terminal step, the trainer's finish or the
 * session's close. The session service holds the session → episode binding and the queue; this
 * keeps what MCP adds (the task as started, the kept final step) and closes the episode exactly once.
 */
export class McpEpisode {
  started: EpisodeStarted | null = null;
  /** The terminal step (or finish) result, kept so the trainer can read the reward after the end. */
  final: StepResult | null = null;
  steps = 0;
  private closed = false;
  private starting: Promise<EpisodeStarted> | null = null;

  constructor(
    private readonly slot: EpisodeSlot,
    private readonly runtime: EnvRuntime,
    private readonly gate: InFlightGate,
  ) {}

  get sessionId(): string {
    return this.slot.id;
  }

  get episodeId(): string | null {
    return this.slot.episodeId;
  }

  private set episodeId(id: string | null) {
    this.slot.episodeId = id;
  }

  private get queue(): EpisodeSlot["queue"] {
    return this.slot.queue;
  }

  /**
   * Makes this (unstarted) episode a fork (the control routes' fork): the runtime episode already
   * exists and continues from its source's step; `started` is the source's.
   */
  adoptFork(started: EpisodeStarted, fork: ForkResult): this {
    this.episodeId = fork.episode_id;
    this.started = { ...started, seed: fork.seed };
    this.steps = fork.step;
    this.starting = Promise.resolve(this.started);
    return this;
  }

  get lastUsed(): number {
    return this.queue.lastUsed;
  }

  get ended(): boolean {
    return this.final !== null;
  }

  /** Resets the runtime episode (once per session; a second start is `bad_request`). */
  start(scenarioId: string, seed?: number): Promise<EpisodeStarted> {
    if (this.closed) return Promise.reject(sessionClosed("the session is closed"));
    if (this.starting) return Promise.reject(new McpHttpError("bad_request", "this session already has its episode (one episode per MCP session; open a new session for another)"));
    this.starting = this.serial(async () => {
      const r = await this.runtime.reset(scenarioId, seed, `mcp-${this.sessionId}`);
      if (this.closed) {
        await this.runtime.closeEpisode(r.episode_id);
        throw sessionClosed("the session was closed while its episode started");
      }
      this.episodeId = r.episode_id;
      const i = r.info;
      this.started = {
        scenario_id: i.scenario_id,
        seed: i.seed,
        mode: i.mode,
        first_message: r.observation.content,
        introduction: i.introduction,
        rules: i.rules,
        tools: i.tools,
        max_steps: i.max_steps,
        ...(i.turns ? { turns: i.turns } : {}),
      };
      return this.started;
    });
    this.starting.catch(() => (this.starting = null));
    return this.starting;
  }

  /** One agent action as one step. Throws a typed error when there is no live episode to step. */
  step(action: unknown): Promise<StepResult> {
    return this.serial(() => {
      const id = this.live();
      return this.gate.run(async () => {
        const r = await this.runtime.step(id, action);
        this.steps++;
        if (r.terminated || r.truncated) this.final = r;
        return r;
      });
    });
  }

  /**
   * Ends the episode and scores it: after `message` (the agent's final reply, a text step that
   * ends a task episode and goes to the simulated user in a conversation) when one is given.
   * On an episode that already ended, returns its score.
   */
  finish(message?: string): Promise<EpisodeScore> {
    return this.serial(async () => {
      if (!this.final) {
        const id = this.live();
        if (message !== undefined && message.trim() !== "") {
          const r = await this.runtime.step(id, { role: "assistant", content: message });
          this.steps++;
          if (r.terminated || r.truncated) this.final = r;
        }
        this.final ??= await this.runtime.finish(id);
      }
      return this.score()!;
    });
  }

  /** The score once the episode has ended, else null. */
  score(): EpisodeScore | null {
    const r = this.final;
    if (!r) return null;
    return { reward: r.reward, terminated: r.terminated, truncated: r.truncated, end_reason: r.info.end_reason, reward_info: r.info.reward_info, error: r.info.error, state_hash: r.info.state_hash, steps: this.steps };
  }

  /** The state now (after the calls queued before this request), as parsed JSON, and its hash. */
  state(): Promise<{ state: unknown; state_hash: string }> {
    return this.serial(async () => {
      const id = this.started && this.episodeId ? this.episodeId : this.live();
      return { state: JSON.parse(await this.runtime.state(id)) as unknown, state_hash: this.runtime.stateHash(id) };
    });
  }

  /** The inputs that replay the episode exactly (scenario, seed, actions, simulated user replies). */
  inputs(): EpisodeInputs {
    if (!this.episodeId) throw new McpHttpError("no_episode", "the session has not started its episode");
    return this.runtime.inputs(this.episodeId);
  }

  /** Freezes the episode after the calls queued before this request (EnvRuntime.snapshot; its limits answer `too_large`). */
  snapshot(): Promise<{ snapshot_id: string; step: number; bytes: number; state_hash: string }> {
    return this.serial(() => this.runtime.snapshot(this.live()));
  }

  /** A copy of the episode as it is after the calls queued before this request, as runtime episode `episodeId`. */
  fork(episodeId: string): Promise<ForkResult> {
    return this.serial(() => this.runtime.fork({ episode_id: this.live() }, episodeId));
  }

  /**
   * Puts the episode back to a snapshot's point (even after it ended): the same session, the
   * same tools and task, so only a snapshot of this session's scenario is accepted.
   */
  restore(snapshotId: string): Promise<ForkResult> {
    return this.serial(async () => {
      if (this.closed) throw sessionClosed("the session is closed");
      if (!this.episodeId || !this.started) throw new McpHttpError("no_episode", "the session has not started its episode");
      const snap = requireSnapshot(this.runtime.snapshotInfo(snapshotId), snapshotId);
      if (snap.scenario_id !== this.started.scenario_id) {
        throw new McpHttpError("bad_request", `snapshot ${snapshotId} is of scenario ${snap.scenario_id}, this session plays ${this.started.scenario_id}; fork it into a new session instead`);
      }
      const r = await this.runtime.restoreSnapshot(this.episodeId, snapshotId);
      this.final = null;
      this.steps = r.step;
      this.started = { ...this.started, seed: r.seed };
      return r;
    });
  }

  /** Ends the episode (recorded as closed unless it had ended) and frees its sandbox; idempotent. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    // after the calls already queued, so none of them runs on a closed episode
    await this.queue.drained();
    if (this.episodeId) await this.runtime.closeEpisode(this.episodeId).catch(() => undefined);
  }

  private live(): string {
    if (this.closed) throw sessionClosed("the session is closed");
    if (!this.episodeId) throw new McpHttpError("no_episode", "no episode yet: call the start_episode tool (or connect with the X-EnvScaler-Scenario header)");
    if (this.final) throw new McpHttpError("episode_done", `the episode has ended (${this.final.info.end_reason ?? "ended"}); the trainer reads its reward from the control route`);
    return this.episodeId;
  }

  /** Runs `fn` after every earlier request of this session; at most `maxQueued` wait (one more is `overloaded`). */
  private serial<T>(fn: () => Promise<T>): Promise<T> {
    return this.queue.run(fn);
  }
}
