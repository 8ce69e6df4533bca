import type { RuntimeOptions } from "../../core/engine/env-runtime.js";
import type { UserSimulatorConfig } from "../../core/episode/user-simulator.js";
import type { CurveServerKeys, ServerLimits } from "./bridge-server.js";

/** What the supervisor tells a replica process (over IPC, so keys never appear in argv or the environment). */
export interface ReplicaConfig {
  replica: number;
  endpoint: string;
  envs: string[];
  workers: number;
  limits: Partial<ServerLimits>;
  previousInstances: string[];
  user: UserSimulatorConfig | null;
  curve: (CurveServerKeys & { allow: string[] }) | null;
  /** Folder for this replica's trajectory file; null: no recording. */
  recordDir: string | null;
  recordFailure: "refuse" | "continue";
  /** Engine worker restarts allowed per minute (the same budget the supervisor has for replicas). */
  maxRestartsPerMinute: number;
  /** @unit ms */
  hardStopGraceMs: number;
  /** Episodes to ready sandboxes for before serving (see RuntimeOptions.warmSessions). */
  warmSessions: number;
  /** The runtime's per-episode limits (see RuntimeOptions). */
  episodeLimits: EpisodeLimits;
}

export type EpisodeLimits = Pick<RuntimeOptions, "maxSnapshotsPerEpisode" | "maxSnapshotBytes" | "maxActionBytes" | "maxEpisodeInputBytes" | "quarantineAfter" | "checkpointEvery">;

/** Replica → supervisor. */
export type ReplicaMessage = { ready: true; endpoint: string; instance: string } | { failed: string };
