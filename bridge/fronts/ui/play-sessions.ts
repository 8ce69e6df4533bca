import type { EnvRuntime, ForkResult, ResetResult } from "../../core/engine/env-runtime.js";
import type { RewardInfo, StepResult } from "../../core/episode/episode.js";
import { failureOf } from "../../core/sessions/failure-table.js";
import { SessionService, type Session } from "../../core/sessions/session-service.js";
import { requireScenario } from "../../core/sessions/unknowns.js";
import { ApiError, asApiError } from "./http-util.js";

export interface PlayOptions {
  /** An episode nobody touched for this long is closed. @unit ms @default 1_800_000 */
  idleMs?: number;
  /** Live episodes across all pages; one more is refused with `too_many_episodes`. @default 32 */
  maxEpisodes?: number;
  /** A simulated user is configured: conversation episodes talk to it. */
  userAttached: boolean;
}

/** States up to this size travel with every step; bigger ones the page keeps up to date by applying info.diff. */
export const INLINE_STATE_BYTES = 256 * 1024;

/** How long close() waits for the runtime to confirm. @unit ms */
const CLOSE_WAIT_MS = 5000;

/**
 * The UI's own part of a play session (the session service holds the rest: the page that owns it,
 * its queue, so that a step, an undo and a branch, each several runtime calls, never interleave,
 * and its undo points, the snapshots taken before each step and finish, oldest first). A play
 * session is named by its episode id.
 */
interface Play {
  scenarioId: string;
  mode: "task" | "conversation";
  ended: boolean;
  /** Steps taken (after an undo: the step it went back to). */
  step: number;
  /** An agent run playing this episode: steps from anyone else are refused until it ends. */
  agent: string | null;
}

type Live = Session<Play>;

/** Where this episode can go back to (undo) or branch from: the steps whose snapshots it holds. */
export interface UndoInfo {
  steps: number[];
  /** The last snapshot could not be taken (the runtime's snapshot limits): the step happened, but cannot be undone. */
  snapshot_error?: { code: string; message: string };
}

export interface Score {
  reward: number;
  reward_info: RewardInfo | undefined;
  /** How the score was made: `copy` (a throwaway fork of the episode as it is now, finished), `final` (the episode ended). */
  how: "copy" | "final";
}

export interface ScoreError {
  error: { code: string; message: string };
}

function scoreError(e: unknown): ScoreError {
  const x = asApiError(e);
  return { error: x instanceof ApiError ? { code: x.code, message: x.message } : { code: "internal_error", message: failureOf(x).message } };
}

/**
 * The episodes played from the UI's pages (by hand or by an agent run), on the UI's one EnvRuntime.
 * Each belongs to the page session that started it and is closed when that page goes away or when
 * it idles. Before every step the episode is snapshotted, so any earlier step can be gone back to
 * (undo) or branched from (a fork: a new episode of the same page); the runtime bounds snapshots
 * per episode and in total, and a step over a bound still runs, saying it cannot be undone.
 */
export class PlaySessions {
  private readonly live: SessionService<Play>;

  constructor(
    private readonly rt: EnvRuntime,
    private readonly options: PlayOptions,
  ) {
    this.live = new SessionService<Play>({
      runtime: rt,
      maxSessions: options.maxEpisodes ?? 32,
      // the UI answers a closed episode as unknown: it remembers no closes
      closedMemory: 0,
      undo: true,
      words: {
        noun: "episode",
        where: " (closed, idle too long, or never started)",
        closed: (why) => why,
        // episodes being started count: concurrent starts must not all pass a check none has counted yet
        refuse: (_scope, open, max) => new ApiError(429, "too_many_episodes", `${open} episodes are open or starting (the limit is ${max}); close one first`),
      },
    });
    // an episode an agent run plays is not idle, whatever its clock says
    this.live.startReaper(options.idleMs ?? 1_800_000, (l) => this.close(l.id), { kept: (l) => l.extra.agent !== null, minMs: 1000, maxMs: 30_000 });
  }

  private touch(id: string): Live {
    try {
      return this.live.use(id);
    } catch (e) {
      throw asApiError(e);
    }
  }

  /** Runs `fn` after the episode's earlier requests (it may have closed meanwhile); failures become API errors. */
  private serial<T>(id: string, fn: (l: Live) => Promise<T>): Promise<T> {
    return this.live.run(id, fn).catch((e: unknown) => Promise.reject(asApiError(e)));
  }

  private checkAgent(l: Live, agent: string | undefined): void {
    if (l.extra.agent && l.extra.agent !== agent) throw new ApiError(409, "episode_busy", "a model is playing this episode: stop it first");
  }

  private async stateFor(id: string): Promise<unknown> {
    const text = await this.rt.state(id);
    return text.length <= INLINE_STATE_BYTES ? JSON.parse(text) : undefined;
  }

  private undoInfo(l: Live, snapshotError?: { code: string; message: string }): UndoInfo {
    return { steps: l.undo!.steps, ...(snapshotError ? { snapshot_error: snapshotError } : {}) };
  }

  /** Throws what start() would refuse before running anything: an unknown scenario, too many episodes. */
  checkStart(scenarioId: string): void {
    this.live.admit("");
    try {
      requireScenario(this.rt.registry, scenarioId);
    } catch (e) {
      throw asApiError(e);
    }
  }

  async start(page: string, scenarioId: string, seed: number | undefined): Promise<ResetResult & { state: unknown; live_scoring: boolean; score: Score | ScoreError | null; undo: UndoInfo }> {
    this.checkStart(scenarioId);
    const found = this.rt.registry.scenario(scenarioId)!;
    let r: ResetResult;
    // the start holds a slot while the runtime resets (the session service counts it)
    try {
      r = await this.live.reserving(page, () => this.rt.reset(scenarioId, seed));
    } catch (e) {
      throw asApiError(e);
    }
    const l = this.live.add(r.episode_id, page, { scenarioId, mode: found.scenario.mode, ended: false, step: 0, agent: null }, r.episode_id);
    // the full state goes once, whatever its size: the page applies each step's diff to it
    const state: unknown = JSON.parse(await this.rt.state(r.episode_id).catch((e) => Promise.reject(asApiError(e))));
    // a conversation the simulated user stopped in its opening message has nothing to score yet but its end
    return { ...r, state, live_scoring: true, score: await this.scoreNow(r.episode_id).catch(scoreError), undo: this.undoInfo(l) };
  }

  /** `agent`: the id of the agent run stepping (anyone else is refused while one plays). */
  step(id: string, action: unknown, agent?: string): Promise<{ result: StepResult; state?: unknown; score: Score | ScoreError | null; undo: UndoInfo }> {
    return this.serial(id, async (l) => {
      this.checkAgent(l, agent);
      if (l.extra.ended) throw new ApiError(409, "episode_done", `episode ${id} has ended: undo, branch, or start a new one`);
      const snap = await l.undo!.take(id, l.extra.step);
      let result: StepResult;
      try {
        result = await this.rt.step(id, action);
      } catch (e) {
        await l.undo!.untake(snap.taken);
        throw e;
      }
      l.extra.step = result.info.step;
      if (result.terminated || result.truncated) l.extra.ended = true;
      const state = await this.stateFor(id).catch(() => undefined);
      // a scoring copy that fails says so next to the step; the step itself happened
      const score = l.extra.ended ? final(result) : await this.scoreNow(id).catch(scoreError);
      return { result, state, score, undo: this.undoInfo(l, snap.error) };
    });
  }

  finish(id: string, agent?: string): Promise<{ result: StepResult; state?: unknown; score: Score; undo: UndoInfo }> {
    return this.serial(id, async (l) => {
      this.checkAgent(l, agent);
      if (l.extra.ended) throw new ApiError(409, "episode_done", `episode ${id} has ended`);
      // finishing can be undone too: back to the open episode as it was
      const snap = await l.undo!.take(id, l.extra.step);
      let result: StepResult;
      try {
        result = await this.rt.finish(id);
      } catch (e) {
        await l.undo!.untake(snap.taken);
        throw e;
      }
      l.extra.ended = true;
      return { result, state: await this.stateFor(id).catch(() => undefined), score: final(result), undo: this.undoInfo(l, snap.error) };
    });
  }

  async state(id: string): Promise<unknown> {
    this.touch(id);
    try {
      return JSON.parse(await this.rt.state(id));
    } catch (e) {
      throw asApiError(e);
    }
  }

  /** Scores the episode as if it ended now, without ending it (see scoreNow). */
  score(id: string): Promise<Score> {
    return this.serial(id, async (l) => {
      if (l.extra.ended) throw new ApiError(409, "episode_done", `episode ${id} has ended: its reward is final`);
      return this.scoreNow(id);
    });
  }

  /**
   * A fork of the episode as it is now, finished and closed: the checks as they would score if the
   * episode ended here. The played episode is not touched, and the cost does not grow with the
   * episode's length (a fork copies the sandbox's memory; nothing is replayed). No simulated user is
   * asked anything: finishing only runs the checks.
   */
  private async scoreNow(id: string): Promise<Score> {
    let copy: ForkResult | undefined;
    try {
      copy = await this.rt.fork({ episode_id: id });
      const end = await this.rt.finish(copy.episode_id);
      return { reward: end.reward, reward_info: end.info.reward_info, how: "copy" };
    } catch (e) {
      throw asApiError(e);
    } finally {
      if (copy) await this.rt.closeEpisode(copy.episode_id).catch(() => undefined);
    }
  }

  /**
   * Goes back to the point after `toStep` steps (default: before the last step or finish), restoring
   * the snapshot taken there. Snapshots of later points are dropped: going forward again is playing again.
   */
  undo(id: string, toStep?: number): Promise<{ step: number; state_hash: string; state: unknown; score: Score | ScoreError; undo: UndoInfo }> {
    return this.serial(id, async (l) => {
      this.checkAgent(l, undefined);
      const at = l.undo!.indexOf(toStep);
      if (at < 0) {
        throw new ApiError(409, "nothing_to_undo", toStep === undefined ? "there is no earlier step to go back to" : `no snapshot of step ${toStep} is held (the ones held: ${l.undo!.describe()})`);
      }
      const target = l.undo!.at(at)!;
      let r: ForkResult;
      try {
        r = await this.rt.restoreSnapshot(id, target.snapshot_id);
      } catch (e) {
        // a snapshot lost with a stopped engine worker is refused before anything changes: it goes from the list
        if (failureOf(e).code === "unknown_snapshot") l.undo!.lost(at);
        if (!this.runtimeHas(id)) this.live.remove(id, "lost with its engine");
        throw e;
      }
      await l.undo!.dropFrom(at);
      l.extra.step = r.step;
      l.extra.ended = false;
      const state: unknown = JSON.parse(await this.rt.state(id));
      return { step: r.step, state_hash: r.state_hash, state, score: await this.scoreNow(id).catch(scoreError), undo: this.undoInfo(l) };
    });
  }

  /**
   * A new episode of the same page continuing from this one: from where it is now (`atStep`
   * omitted, or the current step of an episode still open), or from the snapshot of an earlier
   * step. The branch keeps no undo history of its own before the branch point.
   */
  branch(id: string, atStep?: number): Promise<ForkResult & { state: unknown; score: Score | ScoreError; undo: UndoInfo; parent: string }> {
    return this.serial(id, async (l) => {
      this.checkAgent(l, undefined);
      this.live.admit(l.owner);
      let r: ForkResult;
      if (atStep === undefined || (atStep === l.extra.step && !l.extra.ended)) {
        if (l.extra.ended) throw new ApiError(409, "episode_done", "an ended episode can only be branched from one of its earlier steps");
        r = await this.rt.fork({ episode_id: id });
      } else {
        const h = l.undo!.find(atStep);
        if (!h) throw new ApiError(409, "nothing_to_undo", `no snapshot of step ${atStep} is held (the ones held: ${l.undo!.describe()})`);
        r = await this.rt.fork({ snapshot_id: h.snapshot_id });
      }
      const child = this.live.add(r.episode_id, l.owner, { scenarioId: l.extra.scenarioId, mode: l.extra.mode, ended: false, step: r.step, agent: null }, r.episode_id);
      const state: unknown = JSON.parse(await this.rt.state(r.episode_id));
      return { ...r, state, score: await this.scoreNow(r.episode_id).catch(scoreError), undo: this.undoInfo(child), parent: id };
    });
  }

  private runtimeHas(id: string): boolean {
    try {
      this.rt.stateHash(id);
      return true;
    } catch {
      return false;
    }
  }

  /** Marks the episode as played by an agent run (null: by hand again). */
  claim(id: string, agent: string | null): void {
    const l = this.touch(id);
    if (agent !== null) this.checkAgent(l, agent);
    l.extra.agent = agent;
  }

  async close(id: string): Promise<void> {
    const l = this.live.remove(id, "closed");
    if (!l) return;
    // not after its queued requests (an agent run's step may be waiting on a model); the runtime
    // drops a close that reaches a worker while the watchdog is replacing it (the reply never
    // comes); the episode is gone either way, so nobody waits on it for long
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([this.live.release(l, false).catch(() => undefined), new Promise<void>((resolve) => (timer = setTimeout(resolve, CLOSE_WAIT_MS)))]);
    clearTimeout(timer);
  }

  /** The episode's page, or undefined when it is not open. */
  pageOf(id: string): string | undefined {
    return this.live.find(id)?.owner;
  }

  /** Closes every episode a page started (the page was closed or reloaded). */
  async closePage(page: string): Promise<number> {
    const ids = this.live.all().filter((l) => l.owner === page).map((l) => l.id);
    for (const id of ids) await this.close(id);
    return ids.length;
  }

  count(): number {
    return this.live.size;
  }

  async dispose(): Promise<void> {
    this.live.stopReaper();
    for (const l of this.live.all()) await this.close(l.id);
  }
}

function final(r: StepResult): Score {
  return { reward: r.reward, reward_info: r.info.reward_info, how: "final" };
}
