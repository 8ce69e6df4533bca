// The seam between the runtime and its engines: what each op asks and what it answers, as one map
// (EngineOps), so the result type follows from the op at every call (post, EngineHost's handlers)
// with no casts. The same types cross a worker thread boundary (structured clone) unchanged.
import type { CoreErrorCode } from "../../../protocol/error-codes.js";
import type { EpisodeInputs, Observation, ResetInfo, StepResult } from "../episode/episode.js";
import type { PortableSnapshot } from "../episode/portable-snapshot.js";
import type { UserSimulatorConfig } from "../episode/user-simulator.js";

/** A snapshot an engine now holds (taken or imported): where it stands and what it costs. */
export interface SnapshotValue {
  step: number;
  bytes: number;
  state_hash: string;
}

/** What a fork reports about the new episode: its position, and the tools its source shows at that point. */
export interface ForkValue {
  step: number;
  state_hash: string;
  done: boolean;
  tool_names: string[];
}

/** A reset's answer without what the runtime adds from the manifest (introduction, rules, tools: ~8 KB a reset need not hand across). */
export interface ResetValue {
  observation: Observation;
  info: Omit<ResetInfo, "introduction" | "rules" | "tools">;
}

/** Every engine op: the fields its request carries besides `op` and `episode`, and what it answers. Every request names the episode it concerns. */
export interface EngineOps {
  reset: { request: { scenario_id: string; seed: number; user: UserSimulatorConfig | null }; result: ResetValue };
  step: { request: { action: unknown }; result: StepResult };
  finish: { request: object; result: StepResult };
  /**
   * Ends the episode now without scoring it, and closes it (its sandbox is released); the engine
   * keeps what scoring needs until a `score` request for the episode takes it.
   */
  finish_later: { request: object; result: { step: number; state_hash: string } };
  /**
   * The score of an episode ended by `finish_later`. Not `urgent`: held until the engine has no
   * other request in hand, and the scoring yields to requests between its checks; `urgent`: now.
   * Not ordered behind the episode's other requests (it has none left).
   */
  score: { request: { urgent: boolean }; result: StepResult };
  /** The episode's state as JSON text. */
  state: { request: object; result: string };
  close: { request: object; result: null };
  /**
   * Rebuilds the episode on this engine: from its checkpoint (`from`) when it has one, then re-runs
   * `inputs` (only the actions and user replies since that checkpoint), and checks the state hash.
   */
  restore: { request: { inputs: EpisodeInputs; from?: PortableSnapshot; user: UserSimulatorConfig | null; state_hash: string }; result: { restored: true; steps: number } };
  /** The episode now as a PortableSnapshot (the runtime keeps it to restore the episode elsewhere). */
  checkpoint: { request: object; result: PortableSnapshot };
  /** Freezes the episode as `snapshot` (kept in the engine until dropped). */
  snapshot: { request: { snapshot: string }; result: SnapshotValue };
  /** Starts the episode as a copy of a live episode (`from_episode`) or of a snapshot (`from_snapshot`). */
  fork: { request: { from_episode?: string; from_snapshot?: string }; result: ForkValue };
  /** Whether the snapshot was held. */
  drop_snapshot: { request: { snapshot: string }; result: boolean };
  /** A held snapshot (`snapshot`), or the episode as it is now, as a PortableSnapshot for another replica. */
  export_snapshot: { request: { snapshot?: string }; result: PortableSnapshot };
  /**
   * Holds `from` (a snapshot another replica exported) as `snapshot`, once its image matches this
   * engine's image of the env; `episode` is only the id its requests are ordered under (no episode runs).
   */
  import_snapshot: { request: { snapshot: string; from: PortableSnapshot; user: UserSimulatorConfig | null }; result: SnapshotValue };
}

export type EngineOp = keyof EngineOps;
export type RequestFields<O extends EngineOp> = EngineOps[O]["request"];
export type ResultOf<O extends EngineOp> = EngineOps[O]["result"];

/** One request as an engine receives it: `slot` names the episode to the watchdog (a number fits the shared buffer). */
export type RequestOf<O extends EngineOp> = { id: number; op: O; episode: string; slot: number } & RequestFields<O>;
/** Any request, as a union an engine can narrow by `op`. */
export type EngineRequest = { [O in EngineOp]: RequestOf<O> }[EngineOp];

/** A refusal crossing the seam: one of the closed set of codes, never a free string. */
export interface EngineError {
  code: CoreErrorCode;
  message: string;
}

/** An op's answer; `user_replies` are the simulated user's replies the request produced (kept with the episode's inputs). */
export type ReplyOf<O extends EngineOp> = { id: number; ok: true; value: ResultOf<O>; user_replies?: string[] } | { id: number; ok: false; error: EngineError };
export type EngineReply = ReplyOf<EngineOp>;
