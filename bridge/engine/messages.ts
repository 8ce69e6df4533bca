import type { UserSimulatorConfig } from "../episode/user-simulator.js";
import type { EpisodeInputs, ResetInfo, StepResult, Observation } from "../episode/episode.js";

/** Requests from the pool to an engine worker. Every request names the episode it concerns. */
export type EngineRequest =
  | { id: number; op: "reset"; episode: string; scenario_id: string; seed: number; user: UserSimulatorConfig | null }
  | { id: number; op: "step"; episode: string; action: unknown }
  | { id: number; op: "finish"; episode: string }
  | { id: number; op: "state"; episode: string }
  | { id: number; op: "close"; episode: string }
  | { id: number; op: "restore"; episode: string; inputs: EpisodeInputs; user: UserSimulatorConfig | null; state_hash: string };

export type EngineReply =
  | { id: number; ok: true; value: unknown; user_replies?: string[] }
  | { id: number; ok: false; error: { code: string; message: string } };

export interface ResetValue {
  observation: Observation;
  info: ResetInfo;
}

export type StepValue = StepResult;

/** Slots of the shared watchdog buffer (Float64): when the running guest call must be done by, and whose it is. */
export const WATCH_DEADLINE = 0;
export const WATCH_EPISODE = 1;
