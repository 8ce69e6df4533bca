import { execFile } from "node:child_process";
import { appendFileSync, cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, statSync, writeFileSync, writeSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { pino } from "pino";
import { chromium } from "playwright-core";
import { expect, test } from "vitest";
import { EnvRuntime } from "../../bridge/core/engine/env-runtime.js";
import { episodePage } from "../../bridge/tools/record/episode-page.js";
import { replayAll } from "../../bridge/tools/record/replay.js";
import { filterProblem, selectForSft, toChat } from "../../bridge/tools/record/sft-export.js";
import { LEGACY_FORMAT, readTrajectories, TrajectoryFormatError } from "../../bridge/tools/record/trajectory-reader.js";
import { encodeRecord, RecordingUnavailableError, TRAJECTORY_FORMAT, TrajectoryWriter } from "../../bridge/tools/record/trajectory-writer.js";
import { Supervisor } from "../../bridge/fronts/zmq/supervisor.js";
import { BridgeClient } from "../../agent/bridge-client.js";
import { FIXTURES } from "../helpers.js";
import { OpenAIFixture } from "../openai-fixture.js";

const run = promisify(execFile);
const CLI = join(import.meta.dirname, "..", "..", "cli", "main.ts");
const tmp = () => mkdtempSync(join(tmpdir(), "envscaler-traj-"));
const ref = [
  { name: "add_note", arguments: { user_id: "u2", title: "todo", body: "call mom" } },
  { name: "delete_note", arguments: { note_id: "n1" } },
];

/** Records: notes-1 solved (text ending), notes-1 half done then finished by the client, notes-2 as a conversation with a simulated user. */
async function recordSome(file: string): Promise<void> {
  const user = await OpenAIFixture.start(["# Reply:\nHi, how many notes do I have? I'm u3.", "# Reply:\nThanks, now add 'x' with body 'y'.", "# Reply:\nGreat. ###STOP###"]);
  const writer = new TrajectoryWriter(file);
  const rt = await EnvRuntime.start({ envs: [FIXTURES], recorder: writer, user: { baseURL: user.baseURL, apiKey: "x", model: "m", maxRetries: 0 } });
  try {
    const a = await rt.reset("notes-1", 11, "ep-solved");
    for (const act of ref) await rt.step(a.episode_id, act);
    await rt.step(a.episode_id, "<think>both done</think>Task Completed: added and deleted.");
    const b = await rt.reset("notes-1", 12, "ep-finished");
    await rt.step(b.episode_id, [ref[0], { name: "nope", arguments: {} }]);
    await rt.finish(b.episode_id);
    const c = await rt.reset("notes-2", 13, "ep-conversation");
    await rt.step(c.episode_id, { name: "list_notes", arguments: { user_id: "u3" } });
    await rt.step(c.episode_id, "You have 1 note.");
    await rt.step(c.episode_id, { id: "call_9", type: "function", function: { name: "add_note", arguments: '{"user_id":"u3","title":"x","body":"y"}' } });
    const end = await rt.step(c.episode_id, "Added 'x'.");
    expect(end).toMatchObject({ terminated: true, info: { end_reason: "user_stop" } });
    await rt.closeEpisode(c.episode_id);
  } finally {
    await rt.close();
    writer.close();
    await user.close();
  }
}

test("recorded episodes replay exactly, without calling the LLM; a changed env shows its first divergent step", async () => {
  const dir = tmp();
  const file = join(dir, "t.jsonl");
  await recordSome(file);
  const t = readTrajectories(file);
  expect(t.skipped).toEqual([]);
  expect(t.episodes.map((e) => e.start.episode_id)).toEqual(["ep-solved", "ep-finished", "ep-conversation"]);
  expect(t.episodes[2]!.userReplies).toHaveLength(3);
  const results = await replayAll([FIXTURES], t.episodes);
  expect(results.map((r) => [r.episode_id, r.ok, r.steps])).toEqual([["ep-solved", true, 3], ["ep-finished", true, 1], ["ep-conversation", true, 4]]);

  // change what add_note stores: replay must point at step 1 of the episodes that call it
  const changed = join(dir, "envs", "notes");
  cpSync(join(FIXTURES, "notes"), changed, { recursive: true });
  const src = readFileSync(join(changed, "env.js"), "utf8").replace("const note = { user_id, title, body, tags: [] };", "const note = { user_id, title, body: body.toUpperCase(), tags: [] };");
  writeFileSync(join(changed, "env.js"), src);
  const after = await replayAll([join(dir, "envs")], t.episodes);
  expect(after[0]).toMatchObject({ ok: false, divergence: { step: 1, what: expect.stringMatching(/state/) } });
  expect(after[0]!.changed.join()).toMatch(/env notes-v1/);
  expect(after[0]!.divergence!.actual).toMatch(/CALL MOM/);
  expect(after[2]).toMatchObject({ ok: false, divergence: { step: 3 } });

  // the CLI says the same, with the exit code
  const ok = await run("npx", ["tsx", CLI, "replay", file, "--envs", FIXTURES]);
  expect(ok.stdout).toMatch(/3\/3 episodes replayed exactly/);
  const bad = await run("npx", ["tsx", CLI, "replay", file, "--envs", join(dir, "envs"), "--episode", "ep-solved"]).catch((e) => e);
  expect(bad.code).toBe(1);
  expect(bad.stdout).toMatch(/first divergence at step 1: state/);
});

test("forks and restores are recorded with their prefix and replay exactly from the seed", async () => {
  const file = join(tmp(), "forks.jsonl");
  const writer = new TrajectoryWriter(file);
  const rt = await EnvRuntime.start({ envs: [FIXTURES], recorder: writer });
  try {
    const a = await rt.reset("notes-1", 21, "ep-src");
    await rt.step(a.episode_id, ref[0]);
    const snap = await rt.snapshot(a.episode_id);
    await rt.step(a.episode_id, ref[1]);
    await rt.fork({ episode_id: a.episode_id }, "ep-fork");
    await rt.step("ep-fork", "Task Completed.");
    await rt.restoreSnapshot(a.episode_id, snap.snapshot_id);
    await rt.step(a.episode_id, { name: "delete_note", arguments: { note_id: "n2" } });
    await rt.finish(a.episode_id);
  } finally {
    await rt.close();
    writer.close();
  }
  const t = readTrajectories(file);
  expect(t.skipped).toEqual([]);
  // the source until its restore, the fork, the source after the restore (same id, a new run)
  expect(t.episodes.map((e) => [e.start.episode_id, e.start.prefix_actions?.length ?? 0, e.steps.length])).toEqual([["ep-src", 0, 2], ["ep-fork", 2, 1], ["ep-src", 1, 1]]);
  expect(t.episodes[1]!.start.forked_from).toEqual({ episode_id: "ep-src", step: 2 });
  expect((await replayAll([FIXTURES], t.episodes)).map((r) => r.ok)).toEqual([true, true, true]);
  // SFT export leaves a fork out (its turns before the fork are in its source's recording)
  expect(filterProblem(t.episodes[1]!, { onlyFinished: false })).toMatch(/a fork/);
  expect(filterProblem(t.episodes[2]!, { onlyFinished: false })).toMatch(/a fork/);
  // without its prefix the fork's start state is not the reset's: replay says where
  const cut = { ...t.episodes[1]!, start: { ...t.episodes[1]!.start, prefix_actions: [] } };
  expect((await replayAll([FIXTURES], [cut]))[0]).toMatchObject({ ok: false, divergence: { step: 0, what: expect.stringMatching(/state/) } });
});

test("a torn tail and a corrupted line are skipped with a reason; everything else is read", async () => {
  const file = join(tmp(), "t.jsonl");
  await recordSome(file);
  const whole = readTrajectories(file);
  const lines = readFileSync(file, "utf8").split("\n");
  // flip one character inside a step record in the middle
  const mid = lines.findIndex((l) => l.includes('"t":"step"') && l.includes("ep-finished"));
  lines[mid] = lines[mid]!.replace("add_note", "add_nobe");
  writeFileSync(file, lines.join("\n"));
  appendFileSync(file, encodeRecord({ t: "step", episode_id: "ep-solved" }).slice(0, 30));
  const t = readTrajectories(file);
  expect(t.skipped).toEqual([
    { line: mid + 1, reason: "checksum mismatch" },
    { line: lines.length, reason: "torn tail (the writer was stopped mid-record)" },
  ]);
  expect(t.episodes.map((e) => e.steps.length)).toEqual(whole.episodes.map((e, i) => e.steps.length - (i === 1 ? 1 : 0)));
  expect((await replayAll([FIXTURES], [t.episodes[0]!]))[0]!.ok).toBe(true);
});

test("kill -9 a bridge mid-run: every finished episode is on disk and replays", async () => {
  const dir = tmp();
  const sup = new Supervisor({ envs: [FIXTURES], endpoint: "tcp://127.0.0.1:*", replicas: 1, recordDir: join(dir, "rec"), logger: pino({ level: "silent" }) });
  const { endpoints } = await sup.start();
  const c = new BridgeClient(endpoints[0]!, { timeoutMs: 20_000 });
  try {
    for (let i = 0; i < 3; i++) {
      const { session_id } = await c.request<{ session_id: string }>("reset", { scenario_id: "notes-1", seed: i });
      for (const a of ref) await c.request("step", { session_id, action: a });
      await c.request("step", { session_id, action: "Done." });
    }
    const { session_id } = await c.request<{ session_id: string }>("reset", { scenario_id: "notes-1", seed: 9 });
    await c.request("step", { session_id, action: ref[0] });
    process.kill(sup.pids()[0]!, "SIGKILL");
  } finally {
    c.close();
    await sup.stop();
  }
  const files = readdirSync(join(dir, "rec"));
  expect(files.length).toBeGreaterThanOrEqual(1);
  const killed = readTrajectories(join(dir, "rec", files.sort()[0]!));
  const finished = killed.episodes.filter((e) => e.end?.how === "terminal");
  expect(finished).toHaveLength(3);
  expect(killed.episodes).toHaveLength(4); // the unfinished one is there too, as far as it got
  const results = await replayAll([FIXTURES], finished);
  expect(results.every((r) => r.ok && r.complete)).toBe(true);
  // the one cut by the kill is marked incomplete and replays up to its last record, not "exactly"
  const cut = killed.episodes.filter((e) => !e.end);
  expect(cut.map((e) => [e.complete, e.steps.length])).toEqual([[false, 1]]);
  expect(await replayAll([FIXTURES], cut)).toMatchObject([{ ok: true, complete: false, steps: 1 }]);
  const cli = await run("npx", ["tsx", CLI, "replay", join(dir, "rec", files.sort()[0]!), "--envs", FIXTURES]);
  expect(cli.stdout).toMatch(/◐ .* incomplete: the recording stops after step 1/);
  expect(cli.stdout).toMatch(/3\/4 episodes replayed exactly; 1 incomplete \(matched up to their last record\)/);
}, 120_000);

test("SFT export: OpenAI chat messages with tool calls, filters, and a round trip through the CLI", async () => {
  const dir = tmp();
  const file = join(dir, "t.jsonl");
  await recordSome(file);
  const t = readTrajectories(file);
  const chat = toChat(t.episodes[0]!);
  expect(chat.messages.map((m) => m.role)).toEqual(["system", "user", "assistant", "tool", "assistant", "tool", "assistant"]);
  expect(chat.messages[2]!.tool_calls![0]!.function).toEqual({ name: "add_note", arguments: JSON.stringify(ref[0]!.arguments) });
  expect(chat.messages[3]).toMatchObject({ role: "tool", tool_call_id: chat.messages[2]!.tool_calls![0]!.id, name: "add_note" });
  expect(chat.messages[6]).toMatchObject({ content: "Task Completed: added and deleted.", reasoning_content: "both done" });
  const conv = toChat(t.episodes[2]!);
  expect(conv.messages.map((m) => m.role)).toEqual(["system", "user", "assistant", "tool", "assistant", "user", "assistant", "tool", "assistant"]);
  expect(selectForSft(t.episodes, { minReward: 1 }).map((r) => r.episode_id)).toEqual(["ep-solved", "ep-conversation"]);
  expect(selectForSft(t.episodes, { maxTurns: 2 }).map((r) => r.episode_id)).toEqual(["ep-finished"]);

  const out = join(dir, "sft.jsonl");
  const { stdout } = await run("npx", ["tsx", CLI, "export", "sft", file, "-o", out, "--min-reward", "1"]);
  expect(stdout).toMatch(/^3 episodes read: 2 exported as 2 records → .*; 1 left out \(reward N.N < N ×1\)/);
  const back = readFileSync(out, "utf8").trim().split("\n").map((l) => JSON.parse(l));
  expect(back).toEqual(selectForSft(t.episodes, { minReward: 1 }));
  // every recorded call and result is in the export, in order
  type Call = { function: { name: string; arguments: string } };
  const calls = back[0].messages.flatMap((m: { tool_calls?: Call[] }) => m.tool_calls ?? []).map((c: Call) => ({ name: c.function.name, arguments: JSON.parse(c.function.arguments) }));
  expect(calls).toEqual(ref);
});

test("the episode page renders in headless Chromium: conversation, tool calls, diffs, checks, reward", async () => {
  const dir = tmp();
  const file = join(dir, "t.jsonl");
  await recordSome(file);
  const page = join(dir, "episode.html");
  await run("npx", ["tsx", CLI, "view", file, "--episode", "ep-solved", "-o", page]);
  const html = readFileSync(page, "utf8");
  expect(html).not.toMatch(/<script|https?:\/\//); // self-contained: nothing to fetch, nothing to run
  expect(episodePage(readTrajectories(file).episodes[0]!)).toBe(html);
  const browser = await chromium.launch({ executablePath: "/usr/bin/chromium", args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--no-first-run"] });
  try {
    const tab = await browser.newPage();
    await tab.goto(`file://${page}`);
    expect(await tab.textContent("h1")).toBe("notes-v1 · notes-1");
    expect(await tab.textContent("#reward")).toMatch(/reward 1 \(text_reply\)/);
    expect(await tab.locator("#checks tbody tr").count()).toBe(3);
    expect(await tab.locator("td.pass").count()).toBe(3);
    expect(await tab.locator(".diff li.op-remove").count()).toBe(1);
    expect(await tab.locator(".msg[data-step]").count()).toBe(3);
    const shot = join(dir, "episode.png");
    await tab.screenshot({ path: shot, fullPage: true });
    expect(existsSync(shot) && statSync(shot).size).toBeGreaterThan(5000);
  } finally {
    await browser.close();
  }
});

// ---------------------------------------------------------------- format version, incomplete and foreign files

/** Runs `envscaler replay` and returns its exit code and output (a non-zero exit is not thrown). */
async function replayCli(file: string): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const r = await run("npx", ["tsx", CLI, "replay", file, "--envs", FIXTURES]);
    return { code: 0, stdout: r.stdout, stderr: r.stderr };
  } catch (e) {
    const x = e as { code: number; stdout: string; stderr: string };
    return { code: x.code, stdout: x.stdout, stderr: x.stderr };
  }
}

test("every file starts with a format header; foreign, newer and empty files are refused with a clear message and exit 2", async () => {
  const dir = tmp();
  const file = join(dir, "t.jsonl");
  await recordSome(file);
  const first = JSON.parse(readFileSync(file, "utf8").split("\n")[0]!.slice(9));
  expect(first).toMatchObject({ t: "header", format: TRAJECTORY_FORMAT });
  expect(readTrajectories(file).format).toBe(TRAJECTORY_FORMAT);

  const newer = join(dir, "newer.jsonl");
  writeFileSync(newer, encodeRecord({ t: "header", format: "envscaler.trajectory/v7" }) + readFileSync(file, "utf8").split("\n").slice(1).join("\n"));
  expect(() => readTrajectories(newer)).toThrow(TrajectoryFormatError);
  const foreign = join(dir, "foreign.jsonl");
  writeFileSync(foreign, '{"messages": [{"role": "user", "content": "hi"}]}\n{"messages": []}\n');
  const other = join(dir, "other.jsonl");
  writeFileSync(other, encodeRecord({ t: "header", format: "someone-else/v1" }));
  const empty = join(dir, "empty.jsonl");
  writeFileSync(empty, "");
  const tornHeader = join(dir, "torn.jsonl");
  writeFileSync(tornHeader, encodeRecord({ t: "header", format: TRAJECTORY_FORMAT }).slice(0, 20));
  const checksummedButNotOurs = join(dir, "odd.jsonl");
  writeFileSync(checksummedButNotOurs, encodeRecord({ kind: "metric", value: 3 }));

  const cases: [string, RegExp][] = [
    [newer, /format "envscaler\.trajectory\/v7".*reads envscaler\.trajectory\/v1.*newer envscaler, upgrade/],
    [foreign, /not an envscaler trajectory file: its first line is not a checksummed record/],
    [other, /format "someone-else\/v1"/],
    [empty, /is empty/],
    [tornHeader, /holds no whole record/],
    [checksummedButNotOurs, /neither a format header nor an episode record/],
    [join(dir, "missing.jsonl"), /no file .*missing\.jsonl/],
  ];
  for (const [f, message] of cases) {
    const r = await replayCli(f);
    expect(r.code, f).toBe(2);
    expect(r.stderr, f).toMatch(message);
    expect(r.stdout, f).not.toMatch(/replayed/);
  }
}, 240_000); // seven CLI runs

test("an older file without a header is read as the unversioned format, says so, and replays", async () => {
  const dir = tmp();
  const file = join(dir, "t.jsonl");
  await recordSome(file);
  const old = join(dir, "old.jsonl");
  writeFileSync(old, readFileSync(file, "utf8").split("\n").slice(1).join("\n"));
  const t = readTrajectories(old);
  expect(t.format).toBe(LEGACY_FORMAT);
  expect(t.skipped).toEqual([]);
  expect(t.episodes).toHaveLength(3);
  const r = await replayCli(old);
  expect(r.code).toBe(0);
  expect(r.stderr).toMatch(/no format header: read as a file of the earlier, unversioned format/);
  expect(r.stdout).toMatch(/3\/3 episodes replayed exactly/);
}, 120_000);

test("an episode cut before its end is incomplete, replays up to its last record, and a malformed record is skipped, not a TypeError", async () => {
  const dir = tmp();
  const file = join(dir, "t.jsonl");
  await recordSome(file);
  // cut ep-solved after its second step: drop its terminal step and its episode_end
  const lines = readFileSync(file, "utf8").split("\n");
  const solved = lines.map((l, i) => [l, i] as const).filter(([l]) => l.includes('"episode_id":"ep-solved"') && (l.includes('"t":"step"') || l.includes('"t":"episode_end"')));
  const drop = new Set(solved.slice(2).map(([, i]) => i));
  // and a record with a valid checksum but missing fields, as another version might write
  const cut = join(dir, "cut.jsonl");
  writeFileSync(cut, lines.filter((_, i) => !drop.has(i)).join("\n") + encodeRecord({ t: "episode_start", episode_id: "ep-odd" }));
  const t = readTrajectories(cut);
  expect(t.skipped).toEqual([{ line: lines.length - drop.size, reason: expect.stringMatching(/^malformed episode_start record: env_id/) }]);
  expect(t.episodes.map((e) => [e.start.episode_id, e.complete, e.steps.length])).toEqual([["ep-solved", false, 2], ["ep-finished", true, 1], ["ep-conversation", true, 4]]);
  expect((await replayAll([FIXTURES], t.episodes)).map((r) => [r.ok, r.complete, r.steps])).toEqual([[true, false, 2], [true, true, 1], [true, true, 4]]);
  const r = await replayCli(cut);
  expect(r.code).toBe(0);
  expect(r.stdout).toMatch(/◐ ep-solved \(notes-1, 2 steps\) — incomplete/);
  expect(r.stdout).not.toMatch(/✓ ep-solved/);
  expect(r.stdout).toMatch(/2\/3 episodes replayed exactly; 1 incomplete/);
  expect(r.stderr).toMatch(/skipped: malformed episode_start record/);
}, 120_000);

// ---------------------------------------------------------------- recording fails closed

const rec = (i: number) => ({ t: "step", episode_id: "e", step: i, pad: "x".repeat(200) });

test("a short write is detected: the torn record is cut off, and with `refuse` every later step is refused before it runs", () => {
  const file = join(tmp(), "t.jsonl");
  let calls = 0;
  const reasons: string[] = [];
  // the 4th write(2) (header + 2 records, then this one) writes 50 bytes; the next makes no progress, as on a full disk
  const w = new TrajectoryWriter(file, {
    onUnavailable: (r) => reasons.push(r),
    write: (fd, data, offset) => {
      calls++;
      if (calls === 4) return writeSync(fd, data, offset, 50);
      if (calls > 4) throw Object.assign(new Error("no space left on device"), { code: "ENOSPC" });
      return writeSync(fd, data, offset);
    },
  });
  w.append(rec(1));
  w.append(rec(2));
  expect(w.healthy()).toBe(true);
  w.check();
  expect(() => w.append(rec(3))).toThrow(RecordingUnavailableError);
  expect(w.healthy()).toBe(false);
  expect(reasons).toHaveLength(1);
  expect(reasons[0]).toMatch(/failed after 50 of \d+ bytes of a record: ENOSPC/);
  let refused: unknown;
  try {
    w.check();
  } catch (e) {
    refused = e;
  }
  expect(refused).toBeInstanceOf(RecordingUnavailableError);
  expect((refused as RecordingUnavailableError).code).toBe("recording_unavailable");
  expect((refused as Error).message).toMatch(/the step was not run/);
  expect(() => w.append(rec(4))).toThrow(/recording unavailable/);
  w.close();
  // the file ends at the last whole record: nothing torn, nothing skipped
  const text = readFileSync(file, "utf8");
  expect(text.endsWith("\n")).toBe(true);
  expect(text.split("\n").filter(Boolean).map((l) => JSON.parse(l.slice(9)).step ?? "header")).toEqual(["header", 1, 2]);
  expect(w.records).toBe(2);
});

test("with `continue` a failed writer lets steps run and counts the records it could not write", () => {
  const file = join(tmp(), "t.jsonl");
  let calls = 0;
  const w = new TrajectoryWriter(file, {
    onFailure: "continue",
    write: (fd, data, offset) => {
      if (++calls === 3) throw Object.assign(new Error("file too large"), { code: "EFBIG" });
      return writeSync(fd, data, offset);
    },
  });
  w.append(rec(1));
  w.append(rec(2));
  expect(w.healthy()).toBe(false);
  w.check(); // does not throw: the policy is to go on unrecorded
  w.append(rec(3));
  expect([w.records, w.dropped]).toEqual([1, 2]);
  w.close();
  expect(readFileSync(file, "utf8").split("\n").filter(Boolean)).toHaveLength(2);
});

test.skipIf(!existsSync("/dev/full"))("a full disk (/dev/full): the writer is unavailable from its header on, and says why", () => {
  const w = new TrajectoryWriter("/dev/full");
  expect(w.healthy()).toBe(false);
  expect(w.unavailableReason()).toMatch(/ENOSPC/);
  expect(() => w.check()).toThrow(RecordingUnavailableError);
  w.close();
});

test("too little room left: check() refuses before the step runs, without a write failing", () => {
  const file = join(tmp(), "t.jsonl");
  // a reserve larger than any disk: the free-room check must say no
  const w = new TrajectoryWriter(file, { reserveBytes: 2 ** 60 });
  expect(() => w.check()).toThrow(/bytes are free on the file system.*the step was not run/);
  expect(w.healthy()).toBe(false);
  w.close();
  expect(new TrajectoryWriter(file).healthy()).toBe(true);
});

test.skipIf(!existsSync("/usr/bin/prlimit") && !existsSync("/bin/prlimit"))("a real file-size limit (RLIMIT_FSIZE): the short write is caught, the file holds only whole records, later steps are refused", async () => {
  const dir = tmp();
  const file = join(dir, "t.jsonl");
  const script = join(dir, "child.mts");
  const writer = join(import.meta.dirname, "..", "..", "bridge", "tools", "record", "trajectory-writer.ts");
  writeFileSync(
    script,
    `import { TrajectoryWriter } from ${JSON.stringify(writer)};
const w = new TrajectoryWriter(${JSON.stringify(file)}, { reserveBytes: 0 });
let refusedBefore = null, error = null, i = 0;
for (; i < 100; i++) {
  try { w.check(); } catch (e) { refusedBefore = e.code; break; }
  try { w.append({ t: "step", episode_id: "e", step: i, pad: "y".repeat(300) }); } catch (e) { error = e.code + ": " + e.message; }
}
console.log(JSON.stringify({ records: w.records, error, refusedBefore, healthy: w.healthy() }));
`,
  );
  // prlimit sets the limit on node alone; 4096 bytes cut the 12th-or-so record in the middle
  const { stdout } = await run("prlimit", ["--fsize=4096:4096", process.execPath, "--import", "tsx", script], { cwd: join(import.meta.dirname, "..", "..") });
  const out = JSON.parse(stdout.trim().split("\n").at(-1)!);
  expect(out.error).toMatch(/^recording_unavailable: .*failed after \d+ of \d+ bytes/);
  expect(out.refusedBefore).toBe("recording_unavailable");
  expect(out.healthy).toBe(false);
  const text = readFileSync(file, "utf8");
  expect(statSync(file).size).toBeLessThanOrEqual(4096);
  expect(text.endsWith("\n")).toBe(true);
  const lines = text.split("\n").filter(Boolean);
  expect(lines.length).toBe(out.records + 1); // the header and every acknowledged record, nothing torn
  for (const l of lines) expect(encodeRecord(JSON.parse(l.slice(9)))).toBe(`${l}\n`); // each line whole, its checksum right
});
