// What the runtime keeps about each episode and snapshot: enough to answer for them, to restore
// them on another engine after a worker loss, and to record them. Owned by EpisodeTable and
// SnapshotStore; the other parts (engine pool, restarter) read and update them.
import type { EpisodeInputs, Observation, ResetInfo } from "../episode/episode.js";
import type { PortableSnapshot } from "../episode/portable-snapshot.js";
import type { Engine, EngineOwner } from "./engine.js";
import type { EngineError } from "./messages.js";

/** What an episode's reset recorded, repeated in the start record of each fork of it so `replay` can re-execute the fork. */
export type Opening = Pick<ResetInfo, "env_hash" | "scenario_hash" | "introduction" | "rules" | "tools"> & { observation: Observation };

export interface EpisodeRecord extends EngineOwner {
  id: string;
  slot: number;
  engine: Engine;
  inputs: EpisodeInputs;
  stateHash: string;
  opening?: Opening;
  /** The episode ended (terminal step or finish): recorded, so close() need not record it again. */
  ended?: boolean;
  /** Estimated JSON bytes of the actions kept in `inputs`. */
  inputBytes?: number;
  /** The episode as it was after `actions` of its acknowledged actions (and `replies` user replies): restores start here. */
  checkpoint?: { snapshot: PortableSnapshot; actions: number; replies: number };
  /** A checkpoint was asked for and has not come back yet. */
  checkpointing?: boolean;
  /** Snapshots this episode took (dropped with it). */
  snapshots: Set<SnapshotRecord>;
  /** Snapshots of this episode being taken now (they count against maxSnapshotsPerEpisode already). */
  snapshotsTaking?: number;
  /** The largest snapshot this episode took: what the next one reserves before it is taken. */
  lastSnapshotBytes?: number;
  /** Set when the episode was lost (its worker died on it): every later request gets this error. */
  dead?: EngineError;
  deathReported?: boolean;
  /** Set while the episode is being restored on a replacement worker. */
  restoring?: Promise<void>;
  /** How many times it was restored (a recovery interrupted by another one knows it is stale). */
  restores?: number;
}

/** A snapshot held by an engine; the runtime keeps what restoring it after a worker loss would need. */
export interface SnapshotRecord {
  id: string;
  engine: Engine;
  owner: EpisodeRecord;
  inputs: EpisodeInputs;
  opening?: Opening;
  stateHash: string;
  step: number;
  bytes: number;
  /** Its engine worker was stopped, and the snapshot with it: kept only to say so until dropped (it no longer counts against any limit). */
  lost?: boolean;
  /** Set for a snapshot imported from another replica: who imported it (its count is theirs) and when it was last used (idle ones are dropped). */
  imported?: { holder: string; lastUsed: number };
}
