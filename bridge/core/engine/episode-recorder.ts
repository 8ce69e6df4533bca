/**
 * Where the engine writes its episodes' records (reset, each step, the end). The core names only
 * this; `TrajectoryWriter` (bridge/tools/record/) is the implementation a replica hands in, so the
 * engine does not depend on the trajectory file format or its tools.
 */
export interface EpisodeRecorder {
  /** Throws `recording_unavailable`-worthy errors before work runs when records cannot be written (the recorder's failure policy decides). */
  check(): void;
  /** Writes one record; throws if it could not be written. */
  append(record: object): void;
}
