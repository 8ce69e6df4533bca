import { execFile, spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, readdirSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { chromium } from "playwright-core";
import { expect, test } from "vitest";
import type { RolloutResults } from "../../agent/summarize.js";
import { FIXTURES } from "../helpers.js";
import { OpenAIFixture, type FixtureRequest } from "../openai-fixture.js";
import { haveShared, needsShared, sharedPath } from "../shared-data.js";

const run = promisify(execFile);
const CLI = join(import.meta.dirname, "..", "..", "cli", "main.ts");
const TAUBENCH = sharedPath("benchmarks", "taubench");
const CHROMIUM = "/usr/bin/chromium";
/** The run folder of the first test, whose report the browser test opens. */
let reportRun: string | null = null;
const tmp = () => mkdtempSync(join(tmpdir(), "envscaler-rollout-cli-"));
const cli = (args: string[]) => run(process.execPath, ["--import", "tsx", CLI, ...args], { maxBuffer: 1 << 24 });
const readResults = (out: string) => JSON.parse(readFileSync(join(out, "results.json"), "utf8")) as RolloutResults;
/** The episode records of a run's episodes.jsonl (whole lines only; the format header left out). */
const episodeLines = (out: string) =>
  existsSync(join(out, "episodes.jsonl"))
    ? readFileSync(join(out, "episodes.jsonl"), "utf8")
        .split("\n")
        .filter((l) => {
          if (!/^[0-9a-f]{8} \{"key"/.test(l)) return false;
          try {
            return Boolean(JSON.parse(l.slice(9)));
          } catch {
            return false; // a torn last line of a killed run
          }
        })
    : [];

/** An agent that solves notes-1 (both calls in one step) and answers text otherwise; a user that asks once and stops. */
function notesResponder(r: FixtureRequest) {
  if (r.model === "user-sim") return r.messages.some((m) => m.role === "assistant") ? "# Thought:\nok\n# Reply:\n###STOP###" : "# Thought:\nask\n# Reply:\nHow many notes do I have? I am Carol (u3).";
  if (r.messages.some((m) => m.role === "tool")) return "Task Completed";
  if (/Add a note titled 'todo'/.test(r.messages[1]!.content))
    return { content: null, tool_calls: [{ id: "a", type: "function" as const, function: { name: "add_note", arguments: '{"user_id":"u2","title":"todo","body":"call mom"}' } }, { id: "b", type: "function" as const, function: { name: "delete_note", arguments: '{"note_id":"n1"}' } }] };
  return "You have 1 note.";
}

test("envscaler rollout from the command line: results.json, a self-contained report with episode pages; replay, view and export read the run", async () => {
  const fixture = await OpenAIFixture.start(notesResponder);
  const out = tmp();
  try {
    const { stdout, stderr } = await cli(["rollout", "--envs", FIXTURES, "--scenarios", "notes-*", "--trials", "2", "--model", "agent", "--base-url", fixture.baseURL, "--api-key", "k", "--user-model", "user-sim", "--user-base-url", fixture.baseURL, "--temperature", "0.3", "--extra-body", '{"chat_template_kwargs":{"enable_thinking":false}}', "--out", out]);
    expect(stdout).toMatch(/4\/4 episodes \(4 played, 0 already done\) · mean reward 0\.750 · success 50\.0% · pass\^1 0\.500 · pass\^2 0\.500/);
    // stderr is not a terminal here: no bar, a line per finished episode instead
    expect(stderr.match(/^episode notes-[12]#[01] done: reward [01]\.\d{3}, \d+ steps, \w+/gm)).toHaveLength(4);
    // sampling passed through as given, extra_body merged into the body
    const agentReq = fixture.requests.find((q) => q.model === "agent")!;
    expect(agentReq).toMatchObject({ temperature: 0.3, chat_template_kwargs: { enable_thinking: false } });
    expect(agentReq.top_p).toBeUndefined();

    const r = readResults(out);
    expect(r.settings).toMatchObject({ model: "agent", agent_mode: "fc", trials: 2, user: { model: "user-sim" }, benchmark: null });
    expect(r.per_scenario.map((s) => [s.scenario_id, s.successes])).toEqual([["notes-1", 2], ["notes-2", 0]]);

    // the report: self-contained, and it renders
    const report = join(out, "report.html");
    const html = readFileSync(report, "utf8");
    expect(html).not.toMatch(/<script|https?:\/\/(?!127\.0\.0\.1)/);
    expect(html.match(/<tr id="ep-/g)).toHaveLength(4);
    reportRun = out;

    // the bridge's trajectories of the run: replay re-executes them exactly, view and export read them
    const traj = join(out, "trajectories");
    const replay = await cli(["replay", traj, "--envs", FIXTURES]);
    expect(replay.stdout).toMatch(/4\/4 episodes replayed exactly/);
    const sft = join(out, "sft.jsonl");
    await cli(["export", "sft", traj, "-o", sft, "--min-reward", "1"]);
    expect(readFileSync(sft, "utf8").trim().split("\n")).toHaveLength(2);
    const page = join(out, "one.html");
    await cli(["view", traj, "--episode", r.episodes[0]!.episode_id!, "-o", page]);
    expect(readFileSync(page, "utf8")).toContain(r.episodes[0]!.episode_id!);
  } finally {
    await fixture.close();
  }
}, 120_000);

test("a run folder made with other settings is refused, an endpoint that cannot be reached exits 3 naming the cause, --limit must be a positive whole number", async () => {
  const fixture = await OpenAIFixture.start(notesResponder);
  const out = tmp();
  const failure = (p: Promise<unknown>) => p.then(() => null, (e: { code: number; stderr: string }) => e);
  try {
    const base = ["rollout", "--envs", FIXTURES, "--scenarios", "notes-1", "--model", "agent", "--base-url", fixture.baseURL, "--api-key", "k", "--out", out];
    await cli(base);
    // the same folder, another model and temperature: the earlier episodes must not be reported under them
    const other = await failure(cli([...base.slice(0, 6), "other", ...base.slice(7), "--temperature", "0.9"]));
    expect(other?.code).toBe(1);
    expect(other?.stderr).toMatch(/holds a run made with other settings \(model: "agent" there, "other" now; sampling: .*\); .*use another --out/);
    // the same settings resume (nothing left to play)
    expect((await cli(base)).stdout).toMatch(/1\/1 episodes \(0 played, 1 already done\)/);
  } finally {
    await fixture.close();
  }
  // nothing listens there: every model call fails, which is not a score of 0
  const dead = await failure(cli(["rollout", "--envs", FIXTURES, "--scenarios", "notes-1", "--model", "agent", "--base-url", "http://127.0.0.1:9/v1", "--api-key", "k", "--retries", "0", "--out", tmp()]));
  expect(dead?.code).toBe(3);
  expect(dead?.stderr).toMatch(/1 of 1 episodes could not finish \(endpoint_error: http:\/\/127\.0\.0\.1:9\/v1 \(model agent\): .*\); .*played again/);
  for (const limit of ["0", "-1", "1.5"]) {
    const bad = await failure(cli(["eval", "taubench", "--model", "m", "--base-url", "http://127.0.0.1:9/v1", "--limit", limit, "--out", tmp()]));
    expect(bad?.stderr).toContain(`--limit takes a whole number of tasks per domain, at least 1 (got ${limit})`);
  }
}, 120_000);

test.skipIf(!existsSync(CHROMIUM))(`the rollout report renders in headless Chromium (${CHROMIUM}): numbers, tables, links to episode pages`, async () => {
  expect(reportRun, "the command-line rollout test must run first").not.toBeNull();
  const out = reportRun!;
  const report = join(out, "report.html");
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--no-first-run"] });
  try {
    const tab = await browser.newPage();
    await tab.goto(`file://${report}`);
    expect(await tab.textContent("#mean-reward .v")).toBe("0.750");
    expect(await tab.textContent("#pass-2 .v")).toBe("50.0%");
    expect(await tab.locator("#episodes tbody tr").count()).toBe(4);
    expect(await tab.locator("#per-scenario tbody tr").count()).toBe(2);
    expect(await tab.locator("#failures tbody tr").count()).toBe(7);
    const shot = join(out, "report.png");
    await tab.screenshot({ path: shot, fullPage: true });
    expect(statSync(shot).size).toBeGreaterThan(5000);
    // an episode row links to its own page, which opens
    await tab.locator("#episodes tbody tr a").first().click();
    expect(await tab.textContent("h1")).toBe("notes-v1 · notes-1");
  } finally {
    await browser.close();
  }
}, 60_000);

test("a rollout killed with SIGKILL and started again skips finished episodes and repeats no finished model call", async () => {
  // every call is slow, so the kill lands mid-run; each episode is one call ("Task Completed")
  const fixture = await OpenAIFixture.start(() => ({ content: "Task Completed", delayMs: 250 }));
  const out = tmp();
  const args = ["--import", "tsx", CLI, "rollout", "--scenarios", "library-v1", "--concurrency", "1", "--model", "agent", "--base-url", fixture.baseURL, "--api-key", "k", "--out", out];
  try {
    const child = spawn(process.execPath, args, { stdio: "ignore" });
    let gone = false;
    const exited = new Promise((r) => child.once("exit", r)).then(() => (gone = true));
    while (episodeLines(out).length < 2 && !gone) await new Promise((r) => setTimeout(r, 50));
    expect(gone, "the rollout exited before it could be killed").toBe(false);
    child.kill("SIGKILL");
    await exited;
    const first = fixture.requests.map((q) => JSON.stringify(q));
    const finished = episodeLines(out).map((l) => JSON.parse(l.slice(9)) as { key: string; messages: { content: string }[] });
    expect(finished.length).toBeGreaterThanOrEqual(2);
    const planned = 7;
    expect(finished.length).toBeLessThan(planned);

    const { stdout } = await run(process.execPath, args);
    expect(stdout).toContain(`${planned}/${planned} episodes (${planned - finished.length} played, ${finished.length} already done)`);
    const second = fixture.requests.slice(first.length).map((q) => JSON.stringify(q));
    // no request of a finished episode again (its task is in its first user message)
    for (const f of finished) expect(second.filter((b) => b.includes(JSON.stringify(f.messages[1]!.content).slice(1, -1)))).toEqual([]);
    // at most the one call in flight at the kill is asked twice; every other call exactly once
    expect(second.filter((b) => first.includes(b)).length).toBeLessThanOrEqual(1);
    expect(new Set([...first, ...second]).size).toBe(planned);
    expect(readResults(out).episodes.map((e) => e.key)).toHaveLength(planned);
    // the report of the resumed run covers the episodes of both runs
    expect(readFileSync(join(out, "report.html"), "utf8").match(/<tr id="ep-/g)).toHaveLength(planned);
    // the bridge of each run recorded into the same folder, one file per process
    expect(readdirSync(join(out, "trajectories")).length).toBe(2);
  } finally {
    await fixture.close();
  }
}, 120_000);

/**
 * A conversation the simulated user numbers by its own call count (a repeated user call would say
 * a different number), and an agent that repeats what it heard; with `hangAt`, the agent's call
 * made after that many user calls hangs once (the moment the test kills the run: no call in flight
 * but that one).
 */
function numberedConversation(hangAt?: number) {
  const state = { userCalls: 0, hung: false };
  const respond = (r: FixtureRequest) => {
    if (r.model === "user-sim") {
      state.userCalls++;
      return r.messages.filter((m) => m.role === "assistant").length >= 2 ? "# Thought:\ndone\n# Reply:\n###STOP###" : `# Thought:\nt\n# Reply:\nmessage ${state.userCalls}`;
    }
    if (hangAt !== undefined && state.userCalls === hangAt && !state.hung) {
      state.hung = true;
      return { hang: true };
    }
    return `Noted: ${r.messages.at(-1)!.content}`;
  };
  return { state, respond };
}

test("a conversation rollout killed with SIGKILL and resumed replays the simulated user's finished replies from the cache: every episode equals an uninterrupted run's, no user call is made twice", async () => {
  const base = ["--import", "tsx", CLI, "rollout", "--envs", FIXTURES, "--scenarios", "notes-2", "--trials", "3", "--concurrency", "1", "--model", "agent", "--api-key", "k", "--user-model", "user-sim"];
  const messagesByKey = (out: string) => Object.fromEntries(episodeLines(out).map((l) => JSON.parse(l.slice(9)) as { key: string; messages: unknown[] }).map((e) => [e.key, e.messages]));

  const plain = numberedConversation();
  const fixtureA = await OpenAIFixture.start(plain.respond);
  const outA = tmp();
  try {
    await run(process.execPath, [...base, "--base-url", fixtureA.baseURL, "--user-base-url", fixtureA.baseURL, "--out", outA]);
  } finally {
    await fixtureA.close();
  }
  const uninterrupted = messagesByKey(outA);
  expect(Object.keys(uninterrupted)).toHaveLength(3);
  expect(plain.state.userCalls).toBe(9); // opening, one answer, ###STOP### per episode

  // the second episode's second agent call hangs (after user calls 4 and 5): the run is killed there
  const killed = numberedConversation(5);
  const fixtureB = await OpenAIFixture.start(killed.respond);
  const outB = tmp();
  const args = [...base, "--base-url", fixtureB.baseURL, "--user-base-url", fixtureB.baseURL, "--out", outB];
  try {
    const child = spawn(process.execPath, args, { stdio: "ignore" });
    let gone = false;
    const exited = new Promise((r) => child.once("exit", r)).then(() => (gone = true));
    while (!killed.state.hung && !gone) await new Promise((r) => setTimeout(r, 50));
    expect(gone, "the rollout exited before it could be killed").toBe(false);
    child.kill("SIGKILL");
    await exited;
    expect(Object.keys(messagesByKey(outB))).toEqual(["notes-2#0"]);
    expect(killed.state.userCalls).toBe(5);

    const { stdout } = await run(process.execPath, args);
    expect(stdout).toContain("3/3 episodes (2 played, 1 already done)");
    // the interrupted episode's opening and answer (user calls 4 and 5) came from the cache, so
    // the user was asked exactly as often as in the uninterrupted run and said the same things
    expect(killed.state.userCalls).toBe(9);
    expect(messagesByKey(outB)).toEqual(uninterrupted);
    expect(readdirSync(join(outB, "user-cache")).length).toBeGreaterThan(0);
  } finally {
    await fixtureB.close();
  }
}, 120_000);

test.skipIf(!haveShared(TAUBENCH))(`envscaler eval taubench runs end to end on the fixture: the imported test split, the simulated user, all-or-nothing reward, pass^k, the data version named (${needsShared(TAUBENCH)})`, async () => {
  const fixture = await OpenAIFixture.start((r) =>
    r.model === "user-sim" ? (r.messages.some((m) => m.role === "assistant") ? "# Thought:\nno help\n# Reply:\n###STOP###" : "# Thought:\nstart\n# Reply:\nHi, I need to change an order.") : "Sorry, I cannot help with that.",
  );
  const out = tmp();
  try {
    const { stdout } = await cli(["eval", "taubench", "--from", TAUBENCH, "--domain", "retail", "--limit", "2", "--trials", "2", "--model", "agent", "--base-url", fixture.baseURL, "--api-key", "k", "--user-model", "user-sim", "--user-base-url", fixture.baseURL, "--out", out]);
    expect(stdout).toMatch(/4\/4 episodes/);
    const r = readResults(out);
    expect(r.settings.benchmark).toMatchObject({ name: "taubench", split: "retail test (first 2 tasks per domain only)" });
    expect(r.settings.benchmark!.data_version).toMatch(/taubench-retail-v1.*sha256 [0-9a-f]{16}/);
    expect(r.settings.max_steps).toBe(30);
    expect(r.per_scenario.map((s) => s.scenario_id)).toEqual(["retail-test-0", "retail-test-1"]);
    expect(r.episodes.every((e) => e.end_reason === "user_stop" && e.reward === 0 && !e.success)).toBe(true);
    expect(Object.keys(r.totals.pass_hat_k)).toEqual(["1", "2"]);
    // tau-bench's reward: all-or-nothing over the database check and the required outputs
    const mine = episodeLines(out).map((l) => JSON.parse(l.slice(9)) as { reward_info: { mode: string } });
    expect(mine.every((e) => e.reward_info.mode === "all")).toBe(true);
    expect(readFileSync(join(out, "report.html"), "utf8")).toContain(r.settings.benchmark!.data_version);
  } finally {
    await fixture.close();
  }
}, 180_000);
