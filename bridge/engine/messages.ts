import type { UserSimulatorConfig } from "../episode/user-simulator.js";
import type { EpisodeInputs } from "../episode/episode.js";
import type { PortableSnapshot } from "../episode/portable-snapshot.js";

/** Requests from the pool to an engine worker. Every request names the episode it concerns. */
export type EngineRequest =
  | { id: number; op: "reset"; episode: string; scenario_id: string; seed: number; user: UserSimulatorConfig | null }
  | { id: number; op: "step"; episode: string; action: unknown }
  | { id: number; op: "finish"; episode: string }
  | { id: number; op: "state"; episode: string }
  | { id: number; op: "close"; episode: string }
  /**
   * Rebuilds `episode` on this engine: from its checkpoint (`from`) when it has one, then re-runs
   * `inputs` (only the actions and user replies since that checkpoint), and checks the state hash.
   */
  | { id: number; op: "restore"; episode: string; inputs: EpisodeInputs; from?: PortableSnapshot; user: UserSimulatorConfig | null; state_hash: string }
  /** The episode now as a PortableSnapshot (the pool keeps it to restore the episode elsewhere). */
  | { id: number; op: "checkpoint"; episode: string }
  /** Freezes `episode` as `snapshot` (kept in the worker until dropped). */
  | { id: number; op: "snapshot"; episode: string; snapshot: string }
  /** Starts `episode` as a copy of a live episode (`from_episode`) or of a snapshot (`from_snapshot`). */
  | { id: number; op: "fork"; episode: string; from_episode?: string; from_snapshot?: string }
  | { id: number; op: "drop_snapshot"; episode: string; snapshot: string }
  /** A held snapshot (`snapshot`), or `episode` as it is now, as a PortableSnapshot for another replica. */
  | { id: number; op: "export_snapshot"; episode: string; snapshot?: string }
  /**
   * Holds `from` (a snapshot another replica exported) as `snapshot`, once its image matches this
   * engine's image of the env; `episode` is only the id its requests are ordered under (no episode runs).
   */
  | { id: number; op: "import_snapshot"; episode: string; snapshot: string; from: PortableSnapshot; user: UserSimulatorConfig | null };

/** What a fork reports about the new episode. */
export interface ForkValue {
  step: number;
  state_hash: string;
  done: boolean;
}

export type EngineReply =
  | { id: number; ok: true; value: unknown; user_replies?: string[] }
  | { id: number; ok: false; error: { code: string; message: string } };

/** Slots of the shared watchdog buffer (Float64): when the running guest call must be done by, and whose it is. */
export const WATCH_DEADLINE = 0;
export const WATCH_EPISODE = 1;
