import { EnvRuntime, RuntimeError, type ResetResult } from "../engine/env-runtime.js";
import type { RewardInfo, StepResult } from "../episode/episode.js";
import { ApiError, statusFor } from "./http-util.js";

export interface PlayOptions {
  /** An episode nobody touched for this long is closed. @unit ms @default 1_800_000 */
  idleMs?: number;
  /** Live episodes across all pages; one more is refused with `too_many_episodes`. @default 32 */
  maxEpisodes?: number;
  /** A simulated user is configured: conversation episodes talk to it (and cannot be scored live, see score()). */
  userAttached: boolean;
}

/** States up to this size travel with every step; bigger ones the page keeps up to date by applying info.diff. */
export const INLINE_STATE_BYTES = 256 * 1024;

/** How long close() waits for the runtime to confirm. @unit ms */
const CLOSE_WAIT_MS = 5000;

interface Live {
  page: string;
  scenarioId: string;
  mode: "task" | "conversation";
  lastUsed: number;
  ended: boolean;
}

export interface Score {
  reward: number;
  reward_info: RewardInfo | undefined;
  /** How the score was made: `copy` (a throwaway episode replaying this one's inputs, then finished), `final` (the episode ended). */
  how: "copy" | "final";
}

export interface ScoreError {
  error: { code: string; message: string };
}

function scoreError(e: unknown): ScoreError {
  const x = asApiError(e);
  return { error: x instanceof ApiError ? { code: x.code, message: x.message } : { code: "internal_error", message: String((x as Error)?.message ?? x) } };
}

function asApiError(e: unknown): unknown {
  if (e instanceof RuntimeError) return new ApiError(statusFor(e.code), e.code, e.message);
  return e;
}

/**
 * The episodes played by hand from the UI's pages, on the UI's one EnvRuntime. Each belongs to the
 * page session that started it and is closed when that page goes away or when it idles.
 */
export class PlaySessions {
  private readonly live = new Map<string, Live>();
  private readonly sweeper: NodeJS.Timeout;

  constructor(
    private readonly rt: EnvRuntime,
    private readonly options: PlayOptions,
  ) {
    this.sweeper = setInterval(() => void this.sweep(), Math.min(30_000, Math.max(1000, (options.idleMs ?? 1_800_000) / 4)));
    this.sweeper.unref();
  }

  private touch(id: string): Live {
    const l = this.live.get(id);
    if (!l) throw new ApiError(404, "unknown_episode", `no episode ${id} (closed, idle too long, or never started)`);
    l.lastUsed = Date.now();
    return l;
  }

  /** Live scoring replays the episode's inputs in a copy; a conversation with a simulated user would ask the user model again, so it waits for the end. */
  liveScoring(mode: string): boolean {
    return !(mode === "conversation" && this.options.userAttached);
  }

  private async stateFor(id: string): Promise<unknown> {
    const text = await this.rt.state(id);
    return text.length <= INLINE_STATE_BYTES ? JSON.parse(text) : undefined;
  }

  async start(page: string, scenarioId: string, seed: number | undefined): Promise<ResetResult & { state: unknown; live_scoring: boolean; score: Score | ScoreError | null }> {
    if (this.live.size >= (this.options.maxEpisodes ?? 32)) throw new ApiError(429, "too_many_episodes", `${this.live.size} episodes are open (the limit is ${this.options.maxEpisodes ?? 32}); close one first`);
    const found = this.rt.registry.scenario(scenarioId);
    if (!found) throw new ApiError(404, "unknown_scenario", `no scenario ${scenarioId}`);
    let r: ResetResult;
    try {
      r = await this.rt.reset(scenarioId, seed);
    } catch (e) {
      throw asApiError(e);
    }
    this.live.set(r.episode_id, { page, scenarioId, mode: found.scenario.mode, lastUsed: Date.now(), ended: false });
    // the full state goes once, whatever its size: the page applies each step's diff to it
    let stateJson: string;
    try {
      stateJson = await this.rt.state(r.episode_id);
    } catch (e) {
      throw asApiError(e);
    }
    const state: unknown = JSON.parse(stateJson);
    const live = this.liveScoring(found.scenario.mode);
    return { ...r, state, live_scoring: live, score: live ? await this.score(r.episode_id).catch(scoreError) : null };
  }

  async step(id: string, action: unknown): Promise<{ result: StepResult; state?: unknown; score: Score | ScoreError | null }> {
    const l = this.touch(id);
    try {
      const result = await this.rt.step(id, action);
      if (result.terminated || result.truncated) l.ended = true;
      const state = await this.stateFor(id).catch(() => undefined);
      // a scoring copy that fails says so next to the step; the step itself happened
      const score = l.ended ? final(result) : this.liveScoring(l.mode) ? await this.score(id).catch(scoreError) : null;
      return { result, state, score };
    } catch (e) {
      throw asApiError(e);
    }
  }

  async finish(id: string): Promise<{ result: StepResult; state?: unknown; score: Score }> {
    const l = this.touch(id);
    try {
      const result = await this.rt.finish(id);
      l.ended = true;
      return { result, state: await this.stateFor(id).catch(() => undefined), score: final(result) };
    } catch (e) {
      throw asApiError(e);
    }
  }

  async state(id: string): Promise<unknown> {
    this.touch(id);
    try {
      return JSON.parse(await this.rt.state(id));
    } catch (e) {
      throw asApiError(e);
    }
  }

  /**
   * Scores the episode as if it ended now, without ending it: a throwaway episode of the same
   * scenario and seed replays this one's recorded actions on the same runtime (so a misbehaving
   * env is still under the engine's watchdog), is finished, and closed. Exact, because episodes
   * are deterministic given their inputs; it costs a reset and the steps so far.
   */
  async score(id: string): Promise<Score> {
    const l = this.touch(id);
    if (!this.liveScoring(l.mode)) throw new ApiError(409, "bad_request", "conversation episodes with a simulated user are scored when they end (a scoring copy would ask the user model again)");
    const inputs = this.rt.inputs(id);
    let copy: ResetResult | undefined;
    try {
      copy = await this.rt.reset(inputs.scenario_id, inputs.seed);
      for (const a of inputs.actions) {
        const r = await this.rt.step(copy.episode_id, a);
        if (r.terminated || r.truncated) return { ...final(r), how: "copy" };
      }
      const end = await this.rt.finish(copy.episode_id);
      return { reward: end.reward, reward_info: end.info.reward_info, how: "copy" };
    } catch (e) {
      throw asApiError(e);
    } finally {
      if (copy) await this.rt.closeEpisode(copy.episode_id).catch(() => undefined);
    }
  }

  async close(id: string): Promise<void> {
    if (!this.live.delete(id)) return;
    // the runtime drops a close that reaches a worker while the watchdog is replacing it (the reply
    // never comes); the episode is gone either way, so nobody waits on it for long
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([this.rt.closeEpisode(id).catch(() => undefined), new Promise<void>((resolve) => (timer = setTimeout(resolve, CLOSE_WAIT_MS)))]);
    clearTimeout(timer);
  }

  /** Closes every episode a page started (the page was closed or reloaded). */
  async closePage(page: string): Promise<number> {
    const ids = [...this.live].filter(([, l]) => l.page === page).map(([id]) => id);
    for (const id of ids) await this.close(id);
    return ids.length;
  }

  private async sweep(): Promise<void> {
    const limit = this.options.idleMs ?? 1_800_000;
    const now = Date.now();
    for (const [id, l] of [...this.live]) if (now - l.lastUsed > limit) await this.close(id);
  }

  count(): number {
    return this.live.size;
  }

  async dispose(): Promise<void> {
    clearInterval(this.sweeper);
    for (const id of [...this.live.keys()]) await this.close(id);
  }
}

function final(r: StepResult): Score {
  return { reward: r.reward, reward_info: r.info.reward_info, how: "final" };
}
