// Commands that start processes never leave them behind: `npx envscaler serve` ends with npx,
// `serve --parent-pid` ends with that process, `rollout` takes its replicas with it, and
// `--envs` takes bundled env ids. The pids checked are read from the connection file and /proc.
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterEach, expect, test } from "vitest";
import { BUNDLED_ENVS } from "../../envs/bundled.js";
import { bundledEnvs, resolveEnvFolders } from "../../cli/env-folders.js";
import { npmChain, watchProcesses } from "../../cli/parent-watch.js";
import { FIXTURES } from "../helpers.js";
import { OpenAIFixture } from "../openai-fixture.js";

const ROOT = resolve(import.meta.dirname, "..", "..");
const CLI = join(ROOT, "cli", "main.ts");
/** A liveness bound, not a timing threshold: how long a process may take to notice and stop. */
const GONE_WITHIN_MS = 15_000;
const started: ChildProcess[] = [];
const dirs: string[] = [];

afterEach(() => {
  for (const p of started.splice(0)) if (p.exitCode === null && p.signalCode === null) p.kill("SIGKILL");
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

const tmp = () => {
  const d = mkdtempSync(join(tmpdir(), "envscaler-lifetime-"));
  dirs.push(d);
  return d;
};
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The process's start time (field 22 of /proc/PID/stat), which tells it from a later one with its pid. */
function startTime(pid: number): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return f[0] === "Z" ? null : f[19]!; // a zombie has ended; only its parent's wait is missing
  } catch {
    return null;
  }
}
const children = (pid: number) =>
  readdirSync("/proc")
    .filter((e) => /^\d+$/.test(e))
    .filter((e) => {
      try {
        const stat = readFileSync(`/proc/${e}/stat`, "utf8");
        return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1] === String(pid);
      } catch {
        return false;
      }
    })
    .map(Number);
const cmdline = (pid: number) => {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").replaceAll("\0", " ");
  } catch {
    return "";
  }
};

/** Processes as they are now, and a check that each of them has ended within the bound. */
function identities(pids: number[]): { pid: number; start: string }[] {
  return pids.map((pid) => ({ pid, start: startTime(pid)! })).filter((p) => p.start !== null);
}
async function expectGone(procs: { pid: number; start: string }[], what: string): Promise<void> {
  const deadline = Date.now() + GONE_WITHIN_MS;
  let left = procs;
  while ((left = left.filter((p) => startTime(p.pid) === p.start)).length && Date.now() < deadline) await sleep(100);
  const lines = left.map((p) => `${p.pid} ${cmdline(p.pid)}`);
  for (const p of left) process.kill(p.pid, "SIGKILL"); // a failing run leaves nothing behind either
  expect(lines, `${what} still running ${GONE_WITHIN_MS / 1000} s later`).toEqual([]);
}
async function waitFor<T>(get: () => T | null | undefined, ms: number, what: string): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = get();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`${what} within ${ms / 1000} s`);
    await sleep(100);
  }
}
const connection = (file: string) => (existsSync(file) ? (JSON.parse(readFileSync(file, "utf8")) as { pid: number; endpoints: string[] }) : null);

test("watchProcesses: calls back once a watched process has ended, not while it runs", async () => {
  const sleeper = spawn("sleep", ["600"]);
  started.push(sleeper);
  let gone: number | null = null;
  const unwatch = watchProcesses([sleeper.pid!, process.pid], (pid) => (gone = pid), 20);
  await sleep(200);
  expect(gone).toBeNull();
  sleeper.kill("SIGKILL");
  await waitFor(() => gone, 5_000, "no callback");
  expect(gone).toBe(sleeper.pid);
  unwatch();
  // a process already gone (or never there) is reported at once
  let already: number | null = null;
  watchProcesses([2 ** 22 + 1], (pid) => (already = pid));
  await waitFor(() => already, 5_000, "no callback for a pid that does not exist");
});

test("npmChain: only npm's own shells and npm itself, and nothing when npm did not start us", () => {
  expect(npmChain({})).toEqual([]);
  // this test runner inherited npm's environment perhaps, but its parent is no `sh -c` of npm's
  expect(npmChain({ npm_execpath: "/usr/lib/node_modules/npm/bin/npm-cli.js" })).toEqual([]);
});

test("--envs: a path as it is, a bundled env by folder name or env id, and an error naming where it looked and the ids", () => {
  const library = join(BUNDLED_ENVS, "library");
  expect(resolveEnvFolders([FIXTURES, "library", "library-v1", "bank"])).toEqual([FIXTURES, library, library, join(BUNDLED_ENVS, "bank")]);
  expect(bundledEnvs().map((b) => b.id)).toContain("library-v1");
  let message = "";
  try {
    resolveEnvFolders(["libary"]);
  } catch (e) {
    message = (e as Error).message;
  }
  expect(message).toContain(`no folder ${resolve("libary")}`);
  expect(message).toContain(`(looked in ${BUNDLED_ENVS})`);
  expect(message).toMatch(/library \(library-v1\)/);
  expect(message).toMatch(/bank \(bank-v1\)/);
  // a path that is not there is a missing folder, never taken for an id
  expect(() => resolveEnvFolders(["./library"])).toThrow(`--envs ./library: there is no folder ${resolve("library")}; the bundled envs are: `);
});

test("`npx envscaler serve`: a SIGTERM (or SIGKILL) to npx ends the serve process and its replicas", async () => {
  expect(existsSync(join(ROOT, "dist", "cli", "main.js")), "npx runs the build: `npm run build` first (npm test does)").toBe(true);
  for (const signal of ["SIGTERM", "SIGKILL"] as const) {
    const conn = join(tmp(), "bridge.json");
    let log = "";
    const npx = spawn("npx", ["envscaler", "serve", "--endpoint", "tcp://127.0.0.1:*", "--replicas", "2", "--no-record", "--connection-file", conn], { cwd: ROOT, stdio: ["ignore", "pipe", "pipe"] });
    started.push(npx);
    npx.stdout.on("data", (d: Buffer) => (log += d.toString()));
    npx.stderr.on("data", (d: Buffer) => (log += d.toString()));
    // the first npx run in a fresh checkout links (and builds) the package: a generous bound
    const info = await waitFor(() => connection(conn), 180_000, `npx envscaler serve wrote no connection file (${signal}); log:\n${log}`);
    const serve = info.pid;
    const replicas = children(serve).filter((p) => cmdline(p).includes("replica-main"));
    expect(replicas).toHaveLength(2);
    // the real serve process is not npx's child: npm runs it under `sh -c`
    expect(children(npx.pid!)).not.toContain(serve);
    const procs = identities([serve, ...replicas]);
    expect(procs).toHaveLength(3);
    npx.kill(signal);
    await expectGone(procs, `after ${signal} to npx: serve and its replicas`);
    expect(existsSync(conn), "serve stopped cleanly: its connection file is removed").toBe(false);
  }
}, 420_000);

test("`npx envscaler ui`: a SIGTERM to npx ends the ui process (its replays and episodes run on threads, no child processes)", async () => {
  expect(existsSync(join(ROOT, "dist", "cli", "main.js")), "npx runs the build: `npm run build` first (npm test does)").toBe(true);
  let out = "";
  const npx = spawn("npx", ["envscaler", "ui", "--port", "0", "--envs", FIXTURES, "--trajectories", tmp()], { cwd: ROOT, stdio: ["ignore", "pipe", "ignore"] });
  started.push(npx);
  npx.stdout.on("data", (d: Buffer) => (out += d.toString()));
  await waitFor(() => out.includes('{"ui":'), 180_000, "npx envscaler ui printed no url");
  // npm -> sh -c -> node …/envscaler ui
  const ui = children(npx.pid!).flatMap(children).filter((p) => / ui --port 0/.test(cmdline(p)));
  expect(ui).toHaveLength(1);
  expect(children(ui[0]!)).toEqual([]);
  const procs = identities(ui);
  npx.kill("SIGTERM");
  await expectGone(procs, "after SIGTERM to npx: the ui process");
}, 240_000);

test("`serve --parent-pid`: serve stops when that process ends, and removes its --remove-if-orphaned folder", async () => {
  const owner = spawn("sleep", ["600"]);
  started.push(owner);
  const folder = join(tmp(), "launcher-tmp");
  mkdirSync(folder);
  const conn = join(folder, "bridge.json");
  const serve = spawn(process.execPath, ["--import", "tsx", CLI, "serve", "--envs", FIXTURES, "--endpoint", "tcp://127.0.0.1:*", "--no-record", "--connection-file", conn, "--parent-pid", String(owner.pid), "--remove-if-orphaned", folder], { stdio: "ignore" });
  started.push(serve);
  const info = await waitFor(() => connection(conn), 60_000, "serve wrote no connection file");
  expect(info.pid).toBe(serve.pid);
  const procs = identities([serve.pid!, ...children(serve.pid!).filter((p) => cmdline(p).includes("replica-main"))]);
  expect(procs).toHaveLength(2);
  owner.kill("SIGKILL");
  await expectGone(procs, "after its --parent-pid ended: serve and its replica");
  expect(existsSync(folder)).toBe(false);
}, 120_000);

test("`envscaler rollout` ended by SIGTERM or SIGKILL mid-episode: its replicas end too and close the episode's recording", async () => {
  // the model never answers: the episode is open on a replica when the rollout is ended
  const fixture = await OpenAIFixture.start(() => ({ hang: true }));
  try {
    for (const signal of ["SIGTERM", "SIGKILL"] as const) {
      const out = tmp();
      const rollout = spawn(process.execPath, ["--import", "tsx", CLI, "rollout", "--envs", FIXTURES, "--scenarios", "notes-1", "--model", "agent", "--base-url", fixture.baseURL, "--api-key", "k", "--retries", "0", "--out", out], { stdio: "ignore" });
      started.push(rollout);
      const before = fixture.requests.length;
      await waitFor(() => fixture.requests.length > before, 60_000, "the rollout asked the model nothing");
      const replicas = children(rollout.pid!).filter((p) => cmdline(p).includes("replica-main"));
      expect(replicas).toHaveLength(1);
      const procs = identities(replicas);
      rollout.kill(signal);
      await expectGone(procs, `after ${signal} to rollout: its replica`);
      const records = readdirSync(join(out, "trajectories")).flatMap((f) => readFileSync(join(out, "trajectories", f), "utf8").split("\n").filter(Boolean));
      const ends = records.map((l) => JSON.parse(l.slice(9)) as { t: string; how?: string }).filter((r) => r.t === "episode_end");
      expect(ends, "the replica closed the open episode in its recording as it stopped").toEqual([expect.objectContaining({ how: "closed" })]);
    }
  } finally {
    await fixture.close();
  }
}, 240_000);
