import { appendFileSync, existsSync, readFileSync } from "node:fs";
import { crc32 } from "node:zlib";
import { TrajectoryWriter } from "../bridge/tools/record/trajectory-writer.js";
import type { EpisodeOutcome } from "./run-episode.js";

/**
 * The rollout's own record, `episodes.jsonl` in the run folder: one checksummed line per played
 * episode (the trajectory file's line format), appended when the episode is over. A run killed
 * mid-write leaves at most a torn last line, which reading skips; the newest line of a key wins.
 */
export class OutcomeLog {
  private readonly writer: TrajectoryWriter;

  constructor(readonly path: string) {
    // end a torn tail first, so the next record starts a line of its own
    if (existsSync(path)) {
      const text = readFileSync(path, "utf8");
      if (text.length && !text.endsWith("\n")) appendFileSync(path, "\n");
    }
    this.writer = new TrajectoryWriter(path);
  }

  static read(path: string): Map<string, EpisodeOutcome> {
    const out = new Map<string, EpisodeOutcome>();
    if (!existsSync(path)) return out;
    for (const line of readFileSync(path, "utf8").split("\n")) {
      const m = /^([0-9a-f]{8}) (.*)$/s.exec(line);
      if (!m || crc32(m[2]!) !== parseInt(m[1]!, 16)) continue;
      const o = JSON.parse(m[2]!) as Partial<EpisodeOutcome>;
      // the writer may put a format header first; only episode records have a key
      if (typeof o.key === "string") out.set(o.key, o as EpisodeOutcome);
    }
    return out;
  }

  append(o: EpisodeOutcome): void {
    this.writer.append(o);
  }

  close(): void {
    this.writer.close();
  }
}
