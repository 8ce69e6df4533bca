// The reference rows of `npm run bench`: the same env logic as envs/library, served by our bridge
// and by OpenEnv (openenv-core, bench/py/openenv_library.py: a Python port of the tools as an
// OpenEnv Environment behind its FastAPI + WebSocket server), both driven from Python
// (bench/py/peer.py) twice: at the wire level (raw pyzmq+msgpack / raw WebSocket JSON, what each
// server costs) and through each system's own Python client (EnvScalerEnv and EnvScalerVectorEnv /
// OpenEnv's EnvClient, what a user gets), interleaved within each repetition, median and min–max
// of the repetitions.
import { execFile, spawn } from "node:child_process";
import { closeSync, cpSync, mkdtempSync, openSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { promisify } from "node:util";
import type { Logger } from "pino";
import { Supervisor } from "../bridge/fronts/zmq/supervisor.js";
import { BUNDLED_ENVS } from "../envs/bundled.js";
import { BridgeClient } from "../agent/bridge-client.js";
import { fmt, median, type Row, spread, versus } from "./rows.js";

const execFileAsync = promisify(execFile);

/** The OpenEnv release the rows were written against; pinned so a rerun measures the same peer. */
export const OPENENV_CORE = "openenv-core==0.3.0";

export interface PeerOptions {
  root: string;
  /** The bench venv's python, with OPENENV_CORE installed. */
  py: string;
  quick: boolean;
  /** A bare zmq+msgpack echo server answering with replies of `replyBytes` (the floor). */
  echo: (replyBytes: number) => Promise<{ endpoint: string; close: () => void }>;
  logger: Logger;
}

/** envs/library with every scenario's max_steps raised, so the timing episodes are never truncated. */
export function libraryForBench(): string {
  const dir = join(mkdtempSync(join(tmpdir(), "envscaler-bench-lib-")), "library");
  cpSync(join(BUNDLED_ENVS, "library"), dir, { recursive: true });
  const file = join(dir, "scenarios.json");
  const scenarios = JSON.parse(readFileSync(file, "utf8")) as Record<string, unknown>[];
  writeFileSync(file, JSON.stringify(scenarios.map((s) => ({ ...s, max_steps: 100_000_000 }))));
  return dir;
}

/** Starts the OpenEnv server (one uvicorn process) and waits for the port it prints. */
async function startOpenEnv(root: string, py: string): Promise<{ url: string; pid: number; close: () => Promise<void> }> {
  // its log goes to a file: uvicorn prints a traceback for every WebSocket that EnvClient's way of closing ends
  const log = openSync(join(mkdtempSync(join(tmpdir(), "envscaler-bench-openenv-")), "server.log"), "w");
  const child = spawn(py, [join(root, "bench", "py", "openenv_library.py"), "serve", "--max-sessions", "8192"], { cwd: join(root, "bench", "py"), stdio: ["ignore", "pipe", log] });
  closeSync(log);
  const exited = new Promise<void>((r) => child.once("exit", () => r()));
  const line = await new Promise<string>((resolve, reject) => {
    const rl = createInterface({ input: child.stdout! });
    rl.once("line", resolve);
    child.once("exit", (code) => reject(new Error(`the OpenEnv server exited (${code}) before listening`)));
  });
  const { port } = JSON.parse(line) as { port: number };
  return {
    url: `http://127.0.0.1:${port}`,
    pid: child.pid!,
    close: async () => {
      child.kill("SIGTERM");
      await exited;
    },
  };
}

async function peer(o: PeerOptions, args: string[]): Promise<Record<string, number> & Record<string, unknown>> {
  const { stdout } = await execFileAsync(o.py, [join(o.root, "bench", "py", "peer.py"), ...args], { encoding: "utf8", cwd: join(o.root, "bench", "py"), maxBuffer: 16 << 20 });
  return JSON.parse(stdout.trim().split("\n").at(-1)!) as Record<string, number> & Record<string, unknown>;
}

async function floorDrive(o: PeerOptions, args: string[]): Promise<Record<string, number>> {
  const { stdout } = await execFileAsync(o.py, [join(o.root, "bench", "py", "driver.py"), ...args], { encoding: "utf8" });
  return JSON.parse(stdout.trim().split("\n").at(-1)!) as Record<string, number>;
}

type Sys = "ours" | "openenv";

export async function openEnvRows(o: PeerOptions): Promise<{ rows: Row[]; raw: Record<string, unknown> }> {
  const reps = o.quick ? 3 : 5;
  const n = o.quick ? 500 : 2000;
  const seconds = o.quick ? "1.5" : "4";
  const resets = o.quick ? 60 : 300;
  const burst = 512;
  const live = o.quick ? 256 : 1000;
  const longSteps = 1000;
  const rows: Row[] = [];
  const raw: Record<string, unknown> = { reps };

  const sup = new Supervisor({ envs: [libraryForBench()], endpoint: "tcp://127.0.0.1:*", replicas: 1, recordDir: mkdtempSync(join(tmpdir(), "envscaler-bench-rec-")), limits: { maxSessions: 8192 }, logger: o.logger });
  const ours = (await sup.start()).endpoints[0]!;
  const oursPid = sup.pids()[0]!;
  const oe = await startOpenEnv(o.root, o.py);
  const at: Record<Sys, string> = { ours, openenv: oe.url };
  const pid: Record<Sys, number> = { ours: oursPid, openenv: oe.pid };
  try {
    // the two serve the same logic: every tool result of the same calls must be equal
    const check = await peer(o, ["verify", "--ours", ours, "--openenv", oe.url]);
    raw.verify = check;
    rows.push({
      what: "same env logic: tool results of the same calls (library-1's reference solution, the read mix, the long episode's cycle)",
      ours: `${check.identical}/${check.compared} identical`, peer: "OpenEnv port (bench/py/library_env.py)", reference: "—", ratio: "—", target: "all identical", met: check.identical === check.compared,
    });

    // memory first, on fresh servers: later rows free memory the allocator then reuses
    const mem: Record<Sys, number> = { ours: 0, openenv: 0 };
    for (const sys of ["ours", "openenv"] as const) {
      mem[sys] = (await peer(o, ["memory", "--system", sys, "--endpoint", at[sys], "--sessions", String(live), "--server-pid", String(pid[sys])])).bytes_per_session!;
    }
    raw.memory = { sessions: live, bytes_per_session: mem };

    const pair = () => ({ ours: [] as number[], openenv: [] as number[] });
    const m = { cpu: pair(), rtt: pair(), p99: pair(), pipe: pair(), reset: pair(), burst: pair(), early: pair(), late: pair() };
    // the same measures through the clients users call (peer.py --client)
    const c = { rtt: pair(), p99: pair(), rttCpu: pair(), reset: pair(), resetMean: pair(), resetP90: pair(), pipe: pair(), pipeCpu: pair(), pipeServerCpu: pair(), burst: pair() };
    const floor = { rtt: [] as number[], pipe: [] as number[] };
    let replyBytes = 0;
    for (let rep = 0; rep < reps; rep++) {
      // alternate who goes first, so neither always runs on a warmer (or more tired) machine
      const order: Sys[] = rep % 2 === 0 ? ["ours", "openenv"] : ["openenv", "ours"];
      for (const sys of order) {
        const r = await peer(o, ["rtt", "--system", sys, "--endpoint", at[sys], "--n", String(n)]);
        m.rtt[sys].push(r.p50_us!);
        m.p99[sys].push(r.p99_us!);
        if (sys === "ours") replyBytes = r.reply_bytes!;
      }
      const echo = await o.echo(replyBytes);
      try {
        floor.rtt.push((await floorDrive(o, ["rtt", "--echo", "--endpoints", echo.endpoint, "--n", String(n)])).p50_us!);
        floor.pipe.push((await floorDrive(o, ["pipe", "--echo", "--endpoints", echo.endpoint, "--sessions", "64", "--seconds", seconds])).steps_per_s!);
      } finally {
        echo.close();
      }
      for (const sys of order) {
        const r = await peer(o, ["pipe", "--system", sys, "--endpoint", at[sys], "--sessions", "64", "--seconds", seconds, "--server-pid", String(pid[sys])]);
        m.pipe[sys].push(r.steps_per_s!);
        m.cpu[sys].push(r.server_cpu_us_per_step!);
      }
      for (const sys of order) m.reset[sys].push((await peer(o, ["reset", "--system", sys, "--endpoint", at[sys], "--n", String(resets)])).p50_ms!);
      for (const sys of order) m.burst[sys].push((await peer(o, ["burst", "--system", sys, "--endpoint", at[sys], "--sessions", String(burst)])).resets_per_s!);
      for (const sys of order) {
        const r = await peer(o, ["long", "--system", sys, "--endpoint", at[sys], "--steps", String(longSteps)]);
        if (r.failed_calls) throw new Error(`the long episode on ${sys} had ${r.failed_calls} failed tool calls`);
        m.early[sys].push(r.early_p50_us!);
        m.late[sys].push(r.late_p50_us!);
      }
      for (const sys of order) {
        const r = await peer(o, ["rtt", "--client", "--system", sys, "--endpoint", at[sys], "--n", String(n)]);
        c.rtt[sys].push(r.p50_us!);
        c.p99[sys].push(r.p99_us!);
        c.rttCpu[sys].push(r.client_cpu_us_per_step!);
      }
      for (const sys of order) {
        const r = await peer(o, ["reset", "--client", "--system", sys, "--endpoint", at[sys], "--n", String(resets)]);
        c.reset[sys].push(r.p50_ms!);
        c.resetMean[sys].push(r.mean_ms!);
        c.resetP90[sys].push(r.p90_ms!);
      }
      for (const sys of order) {
        const r = await peer(o, ["pipe", "--client", "--system", sys, "--endpoint", at[sys], "--sessions", "64", "--seconds", seconds, "--server-pid", String(pid[sys])]);
        c.pipe[sys].push(r.steps_per_s!);
        c.pipeCpu[sys].push(r.client_cpu_us_per_step!);
        c.pipeServerCpu[sys].push(r.server_cpu_us_per_step!);
      }
      for (const sys of order) c.burst[sys].push((await peer(o, ["burst", "--client", "--system", sys, "--endpoint", at[sys], "--sessions", String(burst)])).resets_per_s!);
    }
    raw.runs = { ...m, floor, reply_bytes: replyBytes };
    raw.client_runs = c;
    const md = (k: keyof typeof m, s: Sys) => median(m[k][s]);

    const rtt = md("rtt", "ours");
    rows.push({
      what: "wire level (raw pyzmq+msgpack / raw WebSocket JSON, no client library), library-v1, 1 session: step round trip p50 (p99), four read tools on the real state",
      ours: `${spread(m.rtt.ours)} µs (${fmt(md("p99", "ours"))})`, peer: `${spread(m.rtt.openenv)} µs (${fmt(md("p99", "openenv"))})`,
      reference: `${spread(floor.rtt)} µs bare zmq+msgpack echo of the same size`,
      ratio: `${versus(rtt, md("rtt", "openenv"), false)} than OpenEnv; ${versus(rtt, median(floor.rtt), false)} than the floor`,
      target: "≤ 1.0× OpenEnv's time and ≤ 2× the floor's", met: rtt <= md("rtt", "openenv") && rtt <= 2 * median(floor.rtt),
    });
    const pipe = md("pipe", "ours");
    rows.push({
      what: "wire level, 64 sessions, one step in flight each: env-steps/s (1 replica vs 1 OpenEnv server process)",
      ours: spread(m.pipe.ours, 0), peer: spread(m.pipe.openenv, 0), reference: `${spread(floor.pipe, 0)} msgs/s echo`,
      ratio: `${versus(pipe, md("pipe", "openenv"), true)} than OpenEnv; ${versus(pipe, median(floor.pipe), true)} than the floor`,
      target: "≥ 1.5× OpenEnv's rate", met: pipe >= 1.5 * md("pipe", "openenv"),
    });
    const cpu = md("cpu", "ours");
    rows.push({
      what: "wire level: server CPU per step at 64 sessions (all threads of the replica / of the uvicorn process)",
      ours: `${spread(m.cpu.ours, 0)} µs`, peer: `${spread(m.cpu.openenv, 0)} µs`, reference: "—",
      ratio: `${versus(cpu, md("cpu", "openenv"), false, ["less", "more"])} than OpenEnv`, target: "—", met: null,
    });
    const reset = md("reset", "ours");
    rows.push({
      what: "wire level: reset p50 (a session reset in place, library-1)",
      ours: `${spread(m.reset.ours, 2)} ms`, peer: `${spread(m.reset.openenv, 2)} ms`, reference: `${fmt(median(floor.rtt) / 1000, 2)} ms echo round trip`,
      ratio: `${versus(reset, md("reset", "openenv"), false)} than OpenEnv`, target: "≤ 1.0× OpenEnv's time", met: reset <= md("reset", "openenv"),
    });
    const b = md("burst", "ours");
    rows.push({
      what: `wire level: ${burst} open sessions reset at once: resets/s`,
      ours: spread(m.burst.ours, 0), peer: spread(m.burst.openenv, 0), reference: "—",
      ratio: `${versus(b, md("burst", "openenv"), true)} than OpenEnv`, target: "≥ 2× OpenEnv's rate", met: b >= 2 * md("burst", "openenv"),
    });
    rows.push({
      what: `memory per live session (${live} open, each stepped once; growth of the server process's RSS, fresh servers, 1 run)`,
      ours: `${fmt(mem.ours / 1024 ** 2, 2)} MB`, peer: `${fmt(mem.openenv / 1024 ** 2, 2)} MB`, reference: "—",
      ratio: `${versus(mem.ours, mem.openenv, false, ["less", "more"])} than OpenEnv`, target: "≤ 0.4 MB", met: mem.ours <= 0.4 * 1024 ** 2,
    });
    const [e, l] = [md("early", "ours"), md("late", "ours")];
    const [pe, pl] = [md("early", "openenv"), md("late", "openenv")];
    rows.push({
      what: `one ${longSteps}-step episode (checkout, get_member, return, search, repeated): step p50 over steps 1–20 → over the last 20`,
      ours: `${spread(m.early.ours, 0)} → ${spread(m.late.ours, 0)} µs (${versus(l, e, false)} at the end)`,
      peer: `${spread(m.early.openenv, 0)} → ${spread(m.late.openenv, 0)} µs (${versus(pl, pe, false)} at the end)`,
      reference: "—", ratio: `at the end ${versus(l, pl, false)} than OpenEnv`, target: "ours: last ≤ 1.2× first", met: l <= 1.2 * e,
    });
    rows.push(...clientRows(c, md("rtt", "ours"), burst));
    rows.push(...(await forkRows(ours, o.quick)));
  } finally {
    await oe.close();
    await sup.stop();
  }
  return { rows, raw };
}

type Pairs = Record<string, Record<Sys, number[]>>;

/**
 * The rows through each system's own Python client (peer.py --client): what a user of either gets,
 * next to the wire-level rows above, which measure the servers with the client libraries left out.
 */
function clientRows(c: Pairs, wireRtt: number, burst: number): Row[] {
  const md = (k: string, s: Sys) => median(c[k]![s]);
  const rtt = md("rtt", "ours");
  const reset = md("reset", "ours");
  const pipe = md("pipe", "ours");
  const b = md("burst", "ours");
  return [
    {
      what: "through the clients, library-v1, 1 session: step p50 (p99): `EnvScalerEnv.step` vs `await EnvClient.step` (OpenEnv's client is asyncio; its `.sync()` wrapper adds a thread hop per call)",
      ours: `${spread(c.rtt!.ours)} µs (${fmt(md("p99", "ours"))})`, peer: `${spread(c.rtt!.openenv)} µs (${fmt(md("p99", "openenv"))})`,
      reference: `client CPU per step ${fmt(md("rttCpu", "ours"), 0)} µs ours vs ${fmt(md("rttCpu", "openenv"), 0)} µs OpenEnv's; ours at the wire level ${fmt(wireRtt)} µs`,
      ratio: `${versus(rtt, md("rtt", "openenv"), false)} than OpenEnv`, target: "≤ 1.0× OpenEnv's time", met: rtt <= md("rtt", "openenv"),
    },
    {
      what: "through the clients: reset p50 of a live episode, resets back to back (`EnvScalerEnv.reset()` while the previous reset's episode runs, which ends it and has it scored on the replica's scorer thread after the reply, vs `await EnvClient.reset(...)`, which scores nothing)",
      ours: `${spread(c.reset!.ours, 2)} ms`, peer: `${spread(c.reset!.openenv, 2)} ms`,
      // with no pause between resets the scorer thread can fall behind; past 64 waiting scores a reset scores in line: the mean and p90 show it
      reference: `mean ${fmt(md("resetMean", "ours"), 2)} ms ours vs ${fmt(md("resetMean", "openenv"), 2)} ms OpenEnv's; p90 ${fmt(md("resetP90", "ours"), 2)} vs ${fmt(md("resetP90", "openenv"), 2)} ms`,
      ratio: `${versus(reset, md("reset", "openenv"), false)} than OpenEnv`, target: "≤ 1.0× OpenEnv's time", met: reset <= md("reset", "openenv"),
    },
    {
      what: "through the clients, 64 sessions: env-steps/s (`EnvScalerVectorEnv(num_envs=64).step` in lockstep, 1 replica, vs 64 EnvClients stepping under `asyncio.gather`, 1 OpenEnv server process)",
      ours: spread(c.pipe!.ours, 0), peer: spread(c.pipe!.openenv, 0),
      reference: `CPU per env-step: client ${fmt(md("pipeCpu", "ours"), 0)} µs ours vs ${fmt(md("pipeCpu", "openenv"), 0)} µs OpenEnv's; server ${fmt(md("pipeServerCpu", "ours"), 0)} µs vs ${fmt(md("pipeServerCpu", "openenv"), 0)} µs`,
      ratio: `${versus(pipe, md("pipe", "openenv"), true)} than OpenEnv`, target: "≥ 1.5× OpenEnv's rate", met: pipe >= 1.5 * md("pipe", "openenv"),
    },
    {
      what: `through the clients: ${burst} live episodes reset at once, resets/s (\`EnvScalerVectorEnv(num_envs=${burst}).reset()\` vs ${burst} EnvClients' resets under \`asyncio.gather\`)`,
      ours: spread(c.burst!.ours, 0), peer: spread(c.burst!.openenv, 0), reference: "—",
      ratio: `${versus(b, md("burst", "openenv"), true)} than OpenEnv`, target: "≥ 2× OpenEnv's rate", met: b >= 2 * md("burst", "openenv"),
    },
  ];
}

// ---------------------------------------------------------------------------------------------
// FORK / SNAPSHOT / RESTORE ROWS. They run only when the bridge's `hello` reply lists the ops
// (`ops: [...]`); until then they print "n/a (not in this build)". The request and result
// shapes below are the ones issue 12 proposes (snapshot(session) -> snapshot_id; fork(session)
// -> a new session; restore(session, snapshot_id)): adjust them here to the final docs/protocol.md.
// ---------------------------------------------------------------------------------------------
const FORK_OPS = ["snapshot", "fork", "restore"] as const;

async function forkRows(endpoint: string, quick: boolean): Promise<Row[]> {
  const what = {
    snapshot: "snapshot of a mid-episode session (library-1, after 5 steps), p50",
    fork: "fork of a mid-episode session into a new one (library-1, after 5 steps), p50",
    restore: "restore of a session to a snapshot (library-1), p50",
  };
  const c = new BridgeClient(endpoint, { timeoutMs: 30_000 });
  try {
    const hello = await c.request<{ ops?: unknown }>("hello", { client: "bench" });
    const ops = Array.isArray(hello.ops) ? (hello.ops as string[]) : [];
    if (!FORK_OPS.every((op) => ops.includes(op))) {
      return FORK_OPS.map((op) => ({ what: what[op], ours: "n/a (not in this build)", peer: "— (OpenEnv has none)", reference: "—", ratio: "—", target: op === "fork" ? "≤ 1 ms" : "—", met: null }));
    }
    const reads = [
      { name: "get_member", arguments: { member_id: "M013" } },
      { name: "search_books", arguments: { query: "the" } },
    ];
    const { session_id } = await c.request<{ session_id: string }>("reset", { scenario_id: "library-1", seed: 0 });
    for (let i = 0; i < 5; i++) await c.request("step", { session_id, action: reads[i % 2] });
    const t: Record<(typeof FORK_OPS)[number], number[]> = { snapshot: [], fork: [], restore: [] };
    let snap = "";
    for (let i = 0; i < (quick ? 50 : 300); i++) {
      let t0 = performance.now();
      snap = (await c.request<{ snapshot_id: string }>("snapshot", { session_id })).snapshot_id;
      t.snapshot.push(performance.now() - t0);
      t0 = performance.now();
      const child = (await c.request<{ session_id: string }>("fork", { session_id })).session_id;
      t.fork.push(performance.now() - t0);
      await c.request("close", { session_id: child });
      t0 = performance.now();
      await c.request("restore", { session_id, snapshot_id: snap });
      t.restore.push(performance.now() - t0);
      // an episode holds at most max_snapshots_per_episode (32 by default): a user drops what it is done with
      await c.request("drop_snapshot", { snapshot_id: snap });
    }
    await c.request("close", { session_id });
    return FORK_OPS.map((op) => ({ what: `${what[op]} (from Node)`, ours: `${fmt(median(t[op]), 2)} ms`, peer: "— (OpenEnv has none)", reference: "—", ratio: "—", target: op === "fork" ? "≤ 1 ms" : "—", met: op === "fork" ? median(t.fork) <= 1 : null }));
  } catch (e) {
    return FORK_OPS.map((op) => ({ what: what[op], ours: `failed: ${(e as Error).message.slice(0, 120)}`, reference: "—", ratio: "—", target: "—", met: false }));
  } finally {
    c.close();
  }
}
