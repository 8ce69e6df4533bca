import { readFileSync } from "node:fs";
import { crc32 } from "node:zlib";
import { z } from "zod";
import type { PatchOp } from "../../core/state/json-patch.js";
import type { EpisodeError, Observation, RewardInfo, EndReason } from "../../core/episode/episode.js";
import { jsonTextTooDeep } from "../../core/episode/action-limits.js";
import { TRAJECTORY_FORMAT } from "./trajectory-writer.js";

export interface EpisodeStartRecord {
  t: "episode_start";
  episode_id: string;
  env_id: string;
  scenario_id: string;
  seed: number;
  env_hash: string;
  scenario_hash: string;
  state_hash: string;
  observation: Observation;
  introduction: string;
  rules: string[];
  tools: unknown[];
  user_replies: string[];
  time: string;
  /** A fork's start: where it came from, and every action before it (from the reset; replay re-executes them first). */
  forked_from?: { episode_id?: string; snapshot_id?: string; step: number };
  prefix_actions?: unknown[];
}

export interface StepRecord {
  t: "step";
  episode_id: string;
  step: number;
  action: unknown;
  observation: Observation;
  reward: number;
  terminated: boolean;
  truncated: boolean;
  state_hash: string;
  diff: PatchOp[];
  tool_calls: { id: string; name: string; arguments: Record<string, unknown> }[];
  user_replies: string[];
  end_reason?: EndReason;
  reward_info?: RewardInfo;
  error?: EpisodeError;
  ms: number;
}

export interface EpisodeEndRecord {
  t: "episode_end";
  episode_id: string;
  /** `finish`: ended on the client's request (its scoring step is in `result`); `closed`: closed without an ending. */
  how: "terminal" | "finish" | "closed";
  result?: Omit<StepRecord, "t" | "episode_id" | "action" | "user_replies" | "ms">;
}

/** The first line of every file since the format was versioned. */
export interface TrajectoryHeaderRecord {
  t: "header";
  format: string;
  created: string;
  pid: number;
}

export type TrajectoryRecord = EpisodeStartRecord | StepRecord | EpisodeEndRecord;

export interface RecordedEpisode {
  start: EpisodeStartRecord;
  steps: StepRecord[];
  end?: EpisodeEndRecord;
  /**
   * False when the recording stops mid-episode: no episode_end and no terminal step (the server
   * was killed, or the file was cut). Such an episode can be replayed only up to its last record.
   */
  complete: boolean;
  /** The simulated user's replies in order (the first one opens a conversation). */
  userReplies: string[];
}

export interface TrajectoryFile {
  /** The file's format: TRAJECTORY_FORMAT, or LEGACY_FORMAT for a file written before files had a header. */
  format: string;
  episodes: RecordedEpisode[];
  /** Lines that could not be used, and why (a torn tail, a checksum mismatch, a malformed record). The rest is still read. */
  skipped: { line: number; reason: string }[];
}

/**
 * Files written before the format header existed (envscaler 0.1.0 up to this change): the same
 * records, only without the first line. They are read as they are, and say so (`format`).
 */
export const LEGACY_FORMAT = "envscaler.trajectory/v0 (no header)";

/** The file is not a trajectory file this version can read; the message says what it is instead. */
export class TrajectoryFormatError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "TrajectoryFormatError";
  }
}

/**
 * Nesting a record may have. A file is untrusted input (another tool's, a hand edit, a crafted
 * one): a value nested 100,000 deep would overflow the stack of whatever renders or re-encodes it
 * (the page, replay, export), so such a line is skipped, naming its line, before it is parsed.
 * Recorded actions nest at most 64 (max_action_depth) inside a few levels of record.
 */
export const MAX_RECORD_DEPTH = 256;

// Every field the reader, replay, the page and the SFT export use is checked, field by field, so a
// mistyped one skips its record (with the line and field) instead of failing the page; extra fields pass.
const observation = z.looseObject({ role: z.string(), content: z.string() });
const check = z.looseObject({ passed: z.boolean(), description: z.string().optional(), error: z.string().optional() });
const stepFields = {
  step: z.number().int(),
  observation,
  reward: z.number(),
  terminated: z.boolean(),
  truncated: z.boolean(),
  state_hash: z.string(),
  diff: z.array(z.unknown()),
  tool_calls: z.array(z.looseObject({ id: z.string().optional(), name: z.string(), arguments: z.record(z.string(), z.unknown()).optional(), error: z.string().optional() })),
  end_reason: z.string().optional(),
  reward_info: z.looseObject({ checks: z.array(check), passed: z.number(), total: z.number() }).optional(),
  error: z.looseObject({ code: z.string(), message: z.string() }).optional(),
};
const RECORDS = {
  episode_start: z.looseObject({
    episode_id: z.string(), env_id: z.string(), scenario_id: z.string(), seed: z.number().int(), env_hash: z.string(), scenario_hash: z.string(),
    state_hash: z.string(), observation, introduction: z.string(), rules: z.array(z.string()), tools: z.array(z.unknown()), user_replies: z.array(z.string()),
    prefix_actions: z.array(z.unknown()).optional(), time: z.string(),
    forked_from: z.looseObject({ episode_id: z.string().optional(), snapshot_id: z.string().optional(), step: z.number().int() }).optional(),
  }),
  step: z.looseObject({ episode_id: z.string(), ...stepFields, action: z.unknown(), user_replies: z.array(z.string()), ms: z.number().optional() }),
  episode_end: z.looseObject({ episode_id: z.string(), how: z.enum(["terminal", "finish", "closed"]), result: z.looseObject(stepFields).optional() }),
} as const;

/** A line's record, or why it is not one. */
function parseLine(line: string): { record: Record<string, unknown> } | { reason: string } {
  const m = /^([0-9a-f]{8}) (.*)$/s.exec(line);
  if (!m || crc32(m[2]!) !== parseInt(m[1]!, 16)) return { reason: "checksum mismatch" };
  if (jsonTextTooDeep(m[2]!, MAX_RECORD_DEPTH)) return { reason: `a value nested deeper than ${MAX_RECORD_DEPTH} levels (MAX_RECORD_DEPTH)` };
  try {
    const r = JSON.parse(m[2]!) as unknown;
    if (r && typeof r === "object" && !Array.isArray(r)) return { record: r as Record<string, unknown> };
  } catch {
    /* below */
  }
  return { reason: "not a JSON object" };
}

/** The format a file's first record declares, or a TrajectoryFormatError saying why it has none we read. */
function formatOf(path: string, first: string | undefined): string {
  if (first === undefined) throw new TrajectoryFormatError(`${path} is empty: it holds no trajectory records`);
  const p = parseLine(first);
  if ("reason" in p) {
    throw new TrajectoryFormatError(`${path} is not an envscaler trajectory file: its first line is not a checksummed record ("<crc32> <JSON>"; ${p.reason}). Is it another tool's file?`);
  }
  const r = p.record;
  if (r.t === "header") {
    if (r.format === TRAJECTORY_FORMAT) return TRAJECTORY_FORMAT;
    const newer = typeof r.format === "string" && /^envscaler\.trajectory\/v(\d+)$/.exec(r.format);
    throw new TrajectoryFormatError(
      `${path} is in format ${JSON.stringify(r.format)}; this envscaler reads ${TRAJECTORY_FORMAT} and older files without a header` +
        (newer && Number(newer[1]) > 1 ? ": it was written by a newer envscaler, upgrade to read it" : ""),
    );
  }
  if (typeof r.t === "string" && r.t in RECORDS) return LEGACY_FORMAT;
  throw new TrajectoryFormatError(`${path} is not an envscaler trajectory file: its first record is neither a format header nor an episode record (t = ${JSON.stringify(r.t)})`);
}

/**
 * Reads a trajectory file, skipping (and reporting) damaged lines instead of failing on them.
 * Throws TrajectoryFormatError for a file of another or unknown format (or an empty one).
 */
export function readTrajectories(path: string): TrajectoryFile {
  const text = readFileSync(path, "utf8");
  const lines = text.split("\n");
  const torn = !text.endsWith("\n") && text.length > 0;
  if (torn && lines.length === 1) throw new TrajectoryFormatError(`${path} holds no whole record: the writer was stopped while writing its first line`);
  const format = formatOf(path, lines.find((l) => l !== ""));
  const skipped: TrajectoryFile["skipped"] = [];
  const byId = new Map<string, RecordedEpisode>();
  // in the order they started; an episode id started again (a restore: the episode continues from a
  // snapshot under its id) is a new run, and later records belong to it
  const episodes: RecordedEpisode[] = [];
  let sawHeader = false;
  lines.forEach((line, i) => {
    if (line === "") return;
    if (torn && i === lines.length - 1) return void skipped.push({ line: i + 1, reason: "torn tail (the writer was stopped mid-record)" });
    const p = parseLine(line);
    if ("reason" in p) return void skipped.push({ line: i + 1, reason: p.reason });
    const t = p.record.t;
    if (t === "header") {
      if (sawHeader || format === LEGACY_FORMAT) skipped.push({ line: i + 1, reason: "a second format header" });
      sawHeader = true;
      return;
    }
    const schema = typeof t === "string" && Object.hasOwn(RECORDS, t) ? RECORDS[t as keyof typeof RECORDS] : undefined;
    if (!schema) return void skipped.push({ line: i + 1, reason: `unknown record type ${JSON.stringify(t)}` });
    const checked = schema.safeParse(p.record);
    if (!checked.success) {
      const issue = checked.error.issues[0]!;
      return void skipped.push({ line: i + 1, reason: `malformed ${String(t)} record: ${issue.path.join(".") || "(record)"}: ${issue.message}` });
    }
    const r = p.record as unknown as TrajectoryRecord;
    if (r.t === "episode_start") {
      const ep: RecordedEpisode = { start: r, steps: [], complete: false, userReplies: [...r.user_replies] };
      byId.set(r.episode_id, ep);
      episodes.push(ep);
    } else {
      const ep = byId.get(r.episode_id);
      if (!ep) return void skipped.push({ line: i + 1, reason: `record for episode ${r.episode_id} before its start` });
      if (r.t === "step") {
        ep.steps.push(r);
        ep.userReplies.push(...r.user_replies);
      } else ep.end = r;
    }
  });
  for (const ep of episodes) {
    const last = ep.steps.at(-1);
    ep.complete = ep.end !== undefined || Boolean(last && (last.terminated || last.truncated));
  }
  return { format, episodes, skipped };
}
