import type { CallMonitor } from "../sandbox/sandbox-host.js";
// What EnvRuntime takes and answers (kept apart from the façade so its parts can share them).
import type { ToolSchema } from "../../../envs/format/bundle-schema.js";
import type { Observation, ResetInfo } from "../episode/episode.js";
import type { UserSimulatorConfig } from "../episode/user-simulator.js";
import type { EpisodeRecorder } from "./episode-recorder.js";

export interface RuntimeOptions {
  /** Bundle folders, or folders of bundles. */
  envs: string[];
  /**
   * Engine worker threads; episodes are spread over them. 0: episodes run in this thread, with no
   * thread hop and no watchdog (the sandbox's fuel checks stop a guest call at its deadline
   * wherever it is); give this thread a large stack (ENGINE_STACK_MB) so the guest gets a full
   * one (see safeGuestStackBytes). @default 1
   */
  workers?: number;
  /** The simulated user's endpoint for conversation scenarios; null: conversation episodes have no user. */
  user?: UserSimulatorConfig | null;
  /** How long past a guest call's own deadline before the watchdog stops its worker. @unit ms @default 1000 */
  hardStopGraceMs?: number;
  /** Restarts of one worker allowed within a minute before its episodes are failed instead. @default 10 */
  maxRestartsPerMinute?: number;
  /** Where every episode is recorded (reset, each step, the end); null: not recorded. The runtime does not own it. */
  recorder?: EpisodeRecorder | null;
  /** The largest action a step takes (its size as JSON, estimated). @unit bytes @default 1 MiB */
  maxActionBytes?: number;
  /** Actions one episode keeps for exact restore and replay, in total. @unit bytes @default 64 MiB */
  maxEpisodeInputBytes?: number;
  /** Hard stops (a guest call the watchdog had to stop) one scenario may cause before it is quarantined. @default 2 */
  quarantineAfter?: number;
  /**
   * Episodes this runtime readies sandboxes for before it reports ready (spread over the workers):
   * every env's image is built and that many wasm instances made, so a first burst of that many
   * resets instantiates nothing. Each costs a little memory while unused (about 0.2 MB). @default 0
   */
  warmSessions?: number;
  /**
   * With engine worker threads (`workers` >= 1): every this many steps an episode's snapshot is
   * copied to this thread as its checkpoint, so if the watchdog has to stop its worker the episode
   * is restored from that copy and re-runs at most this many steps, not its whole history. Each
   * checkpoint holds a copy of the sandbox (about 0.4 MB for library-v1; one per episode, replaced
   * by the next); an episode shorter than this takes none. 0: never (restores re-run every step).
   * @default 64
   */
  checkpointEvery?: number;
  /** Told each time the watchdog stops an engine worker (for the replica's log): whose call overran, and how many episodes are being restored. */
  onHardStop?: (event: { scenario_id: string | null; episode_id: string | null; restoring: number; snapshots_lost: number }) => void;
  /** Snapshots one episode may hold at once. @default 32 */
  maxSnapshotsPerEpisode?: number;
  /** Memory all snapshots of this runtime may hold together. @unit bytes @default 1 GiB */
  maxSnapshotBytes?: number;
  /** With `workers: 0`: told of each guest call's deadline in this thread (the replica's last-resort watchdog). */
  callMonitor?: CallMonitor;
  /**
   * Episodes ended by finishLater whose score may be on its way at once; past it, finishLater
   * refuses and the caller waits for room. As many as `keptScores`, so that a vector env's reset
   * of all its live sub-envs (a trainer's burst: 512 at once in the bench) replies without waiting
   * for scoring: at 64, that reset ran at the scorer's pace, 316 resets/s against OpenEnv's 1,750
   * (bench, 2026-12-07). Each holds the episode's captured state views and calls. @default 1024
   */
  maxPendingScores?: number;
  /**
   * Episodes ended by finishLater are scored on a thread of their own (one per engine, started at
   * the first), not in idle turns of the engine's: the serving thread goes on while another core
   * runs the checks. @default false (serve's replicas: true)
   */
  scorerThread?: boolean;
  /** Scores of finishLater episodes kept for `result` after they arrive (the oldest go first). @default 1024 */
  keptScores?: number;
}

export interface ForkResult {
  episode_id: string;
  step: number;
  state_hash: string;
  env_id: string;
  scenario_id: string;
  seed: number;
  /** The tools the episode shows now: its source's at the fork (multi-turn tasks add tools as turns go). */
  tools: ToolSchema[];
  forked_from: { episode_id?: string; snapshot_id?: string; step: number };
}

export interface ResetResult {
  episode_id: string;
  observation: Observation;
  info: ResetInfo;
}
