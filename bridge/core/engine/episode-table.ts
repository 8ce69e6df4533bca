import type { EpisodeInputs, StepResult } from "../episode/episode.js";
import { MAX_ACTION_DEPTH, valueShape } from "../episode/action-limits.js";
import type { EpisodeRecorder } from "./episode-recorder.js";
import type { UserSimulatorConfig } from "../episode/user-simulator.js";
import type { Engine } from "./engine.js";
import type { RequestFields } from "./messages.js";
import type { EpisodeRecord, Opening } from "./records.js";
import { RuntimeError } from "./runtime-error.js";

export interface EpisodeTableOptions {
  recorder: EpisodeRecorder | null;
  maxActionBytes: number;
  maxEpisodeInputBytes: number;
  /** See RuntimeOptions.checkpointEvery; 0: never. */
  checkpointEvery: number;
}

/**
 * The runtime's episodes: their records (engine, inputs, state hash, checkpoint), the bounds on
 * what they keep, their checkpoints and what a lost one answers, and the trajectory records
 * written for them.
 */
export class EpisodeTable {
  private readonly byId = new Map<string, EpisodeRecord>();
  private nextSlot = 1;

  constructor(private readonly options: EpisodeTableOptions) {}

  get size(): number {
    return this.byId.size;
  }

  has(id: string): boolean {
    return this.byId.has(id);
  }

  find(id: string): EpisodeRecord | undefined {
    return this.byId.get(id);
  }

  /** The episode, or unknown_episode. */
  get(id: string): EpisodeRecord {
    const rec = this.byId.get(id);
    if (!rec) throw new RuntimeError("unknown_episode", `no episode ${id} (closed, or never reset)`);
    return rec;
  }

  /** A new episode on `engine`, entered in the table (`listed: false`: only a name its engine orders requests under, as an import's holder). */
  add(id: string, engine: Engine, inputs: EpisodeInputs, opening?: Opening, listed = true): EpisodeRecord {
    const rec: EpisodeRecord = { id, slot: this.nextSlot++, engine, inputs, stateHash: "", snapshots: new Set(), opening };
    if (listed) {
      engine.episodes.add(rec);
      this.byId.set(id, rec);
    }
    return rec;
  }

  /** Takes the episode out of the table and off its engine's list (its snapshots are the store's to drop). */
  remove(rec: EpisodeRecord): void {
    this.byId.delete(rec.id);
    rec.engine.episodes.delete(rec);
  }

  /**
   * Admits an action to the episode's inputs before anything runs: every action is kept (restore
   * and replay re-execute them), so its size is checked first, by one bounded, iterative walk made
   * before anything is copied to an engine thread (structured clone and every later encoder
   * recurse, so a value nested 10,000 deep must stop here: issue 32).
   */
  admit(rec: EpisodeRecord, action: unknown): void {
    const { maxActionBytes: maxAction, maxEpisodeInputBytes: maxInputs } = this.options;
    const { bytes: size, tooDeep } = valueShape(action, maxAction, MAX_ACTION_DEPTH);
    if (tooDeep) throw new RuntimeError("too_large", `the action nests deeper than ${MAX_ACTION_DEPTH} levels (max_action_depth); it was not run`);
    if (size > maxAction) throw new RuntimeError("too_large", `the action is over ${maxAction} bytes as JSON (serve --max-action-bytes); it was not run`);
    if ((rec.inputBytes ?? 0) + size > maxInputs) throw new RuntimeError("too_large", `the episode's actions would exceed ${maxInputs} bytes in total (serve --max-episode-input-mb); it was not run: reset a new episode`);
    rec.inputBytes = (rec.inputBytes ?? 0) + size;
  }

  /**
   * Asks the episode's worker for a checkpoint once `checkpointEvery` actions have been acknowledged
   * since the last one. Not awaited: it queues behind the episode's step like any request and
   * costs the step nothing; the position is the one at asking (later steps queue behind it). Only
   * an engine on a thread of its own can be lost, so only its episodes take checkpoints.
   */
  maybeCheckpoint(rec: EpisodeRecord): void {
    const every = this.options.checkpointEvery;
    // only between requests: a step already queued behind this one would run before the capture
    if (!rec.engine.board || every <= 0 || rec.checkpointing || rec.dead || rec.ended || rec.inFlight) return;
    const at = { actions: rec.inputs.actions.length, replies: rec.inputs.user_replies.length };
    if (at.actions - (rec.checkpoint?.actions ?? 0) < every) return;
    rec.checkpointing = true;
    void rec.engine.post(rec, "checkpoint", {}).then((reply) => {
      rec.checkpointing = false;
      // refused when the episode closed or died meanwhile: it keeps the checkpoint it had
      if (!reply.ok) return;
      const snapshot = reply.value;
      if (snapshot.inputs.actions.length === at.actions && snapshot.inputs.user_replies.length === at.replies) rec.checkpoint = { snapshot, ...at };
    });
  }

  /** What rebuilds `rec` on another worker: its checkpoint and the inputs since (all of them without one). */
  restoreFields(rec: EpisodeRecord, user: UserSimulatorConfig | null): RequestFields<"restore"> {
    const cp = rec.checkpoint;
    const inputs = cp ? { ...rec.inputs, actions: rec.inputs.actions.slice(cp.actions), user_replies: rec.inputs.user_replies.slice(cp.replies) } : rec.inputs;
    return { inputs, ...(cp ? { from: cp.snapshot } : {}), user, state_hash: rec.stateHash };
  }

  /**
   * The first step asked of an episode lost with its worker: a terminal step carrying the loss, so
   * a client stepping along learns of it as an episode end. Any later one: episode_done.
   */
  deathStep(rec: EpisodeRecord): StepResult {
    const error = rec.dead!;
    if (rec.deathReported) throw new RuntimeError("episode_done", `the episode ended: ${error.message}`);
    rec.deathReported = true;
    return {
      observation: { role: "user", content: JSON.stringify({ error: { type: error.code, message: error.message } }) },
      reward: 0,
      terminated: true,
      truncated: false,
      info: { step: rec.inputs.actions.length + 1, episode_id: rec.id, tool_calls: [], diff: [], state_hash: rec.stateHash, end_reason: "env_fault", error: error as StepResult["info"]["error"] },
    };
  }

  /** Writes one trajectory record; a write that fails after the work ran is answered as recording_unavailable (`strict: false`: ignored). */
  record(r: object, strict = true): void {
    try {
      this.options.recorder?.append(r);
    } catch (e) {
      if (strict) throw new RuntimeError("recording_unavailable", `the request ran but its record could not be written: ${(e as Error).message}`);
    }
  }

  get recording(): boolean {
    return this.options.recorder != null;
  }

  /** Refuses work whose record could not be written (the recorder's policy decides: see TrajectoryWriter.check). */
  recordable(): void {
    try {
      this.options.recorder?.check();
    } catch (e) {
      throw new RuntimeError("recording_unavailable", (e as Error).message);
    }
  }
}
