// Issue 32: trajectory files are untrusted input. Every record is checked field by field before
// replay, view, export or the UI use it; one bad file or record is reported and skipped, never
// fails the listing; symlinks out of the folder are refused; deep values are bounded, naming the line.
import { crc32 } from "node:zlib";
import { mkdirSync, mkdtempSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { beforeAll, expect, test } from "vitest";
import { readTrajectories } from "../../bridge/tools/record/trajectory-reader.js";
import { encodeRecord, TRAJECTORY_FORMAT } from "../../bridge/tools/record/trajectory-writer.js";
import { TrajectoryLibrary } from "../../bridge/fronts/ui/trajectory-library.js";
import { FIXTURES } from "../helpers.js";
import { recordEpisodes } from "../ui-fixtures.js";

let root: string;
const header = encodeRecord({ t: "header", format: TRAJECTORY_FORMAT, created: "2026-01-01T00:00:00Z", pid: 1 });
const start = (id: string, extra: Record<string, unknown> = {}) =>
  encodeRecord({ t: "episode_start", episode_id: id, env_id: "notes-v1", scenario_id: "notes-1", seed: 1, env_hash: "h", scenario_hash: "h", state_hash: "s", observation: { role: "user", content: "task" }, introduction: "", rules: [], tools: [], user_replies: [], time: "2026-01-01T00:00:00Z", ...extra });
/** A checksummed line whose JSON is written by hand (a value too deep for JSON.stringify). */
const rawLine = (json: string) => `${crc32(json).toString(16).padStart(8, "0")} ${json}\n`;

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), "traj-files-"));
  await recordEpisodes(join(root, "good", "t.jsonl"));
  // a link to a system file, named like a trajectory
  symlinkSync("/etc/hostname", join(root, "system.jsonl"));
  mkdirSync(join(root, "outside"));
  symlinkSync(join(FIXTURES, "notes"), join(root, "linked-dir"));
  writeFileSync(join(root, "newer.jsonl"), encodeRecord({ t: "header", format: "envscaler.trajectory/v9", created: "x", pid: 1 }));
  writeFileSync(join(root, "mistyped.jsonl"), header + start("ep-time-number", { time: 5 }) + start("ep-fine"));
  const deep = '{"a":'.repeat(100_000) + "1" + "}".repeat(100_000);
  const deepStart = JSON.stringify({ t: "episode_start", episode_id: "ep-deep" }).slice(0, -1) + `,"pad":${deep}}`;
  writeFileSync(join(root, "deep.jsonl"), header + rawLine(deepStart) + start("ep-after-deep"));
});

test("the listing lists every good episode and reports (never fails on) bad files, links out and bad records", () => {
  const lib = new TrajectoryLibrary(root, [FIXTURES]);
  const { episodes, skipped } = lib.list();
  const ids = episodes.map((e) => e.episode_id).sort();
  expect(ids).toEqual(["ep-after-deep", "ep-fine", "ep-finished", "ep-open", "ep-solved"]);
  const why = (file: string) => skipped.filter((s) => s.file === file).map((s) => `${s.line}: ${s.reason}`).join(" | ");
  expect(why("system.jsonl")).toMatch(/outside the trajectories folder/);
  expect(why("newer.jsonl")).toMatch(/newer envscaler/);
  expect(why("newer.jsonl")).not.toContain(root); // the file by its name in the folder, not the server's path
  expect(why("mistyped.jsonl")).toMatch(/^2: malformed episode_start record: time/);
  expect(why("deep.jsonl")).toMatch(/^2: .*nested deeper than 256 levels/);
  // nothing was read through the link out of the folder
  expect(lib.files()).not.toContain("system.jsonl");
  expect(lib.files().some((f) => f.startsWith("linked-dir"))).toBe(false);
});

test("a file named by a request is refused when it leads out of the folder; a mistyped record's episode is not served", () => {
  const lib = new TrajectoryLibrary(root, [FIXTURES]);
  expect(() => lib.read("system.jsonl")).toThrow(/outside the trajectories folder/);
  expect(() => lib.read("newer.jsonl")).toThrow(expect.objectContaining({ code: "bad_trajectory_file" }));
  expect(() => lib.page("mistyped.jsonl", "ep-time-number")).toThrow(expect.objectContaining({ code: "unknown_episode" }));
  expect(lib.page("mistyped.jsonl", "ep-fine")).toMatch(/notes-1/);
  expect(lib.page("deep.jsonl", "ep-after-deep")).toMatch(/notes-1/);
});

test("the reader (replay, view and export use it) skips a deep record, naming its line", () => {
  const t = readTrajectories(join(root, "deep.jsonl"));
  expect(t.skipped).toEqual([{ line: 2, reason: expect.stringMatching(/MAX_RECORD_DEPTH/) }]);
  expect(t.episodes.map((e) => e.start.episode_id)).toEqual(["ep-after-deep"]);
});
