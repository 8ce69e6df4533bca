// `npm run bench [-- --quick]`: every figure next to a reference measured in the same run (the bare
// transport, or the original EnvScaler's way), because absolute times on shared 2-core machines
// are noise. Writes bench/results.json and bench/results.md, and the table into the README.
import { execFile, execFileSync } from "node:child_process";
import { promisify } from "node:util";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { cpus, tmpdir, totalmem } from "node:os";
import { join, resolve } from "node:path";
import { pino } from "pino";
import { Worker } from "node:worker_threads";
import { Router } from "zeromq";
import { PROTOCOL_VERSION } from "../protocol/messages.js";
import { portRows } from "./benchmark-ports.js";
import { EnvRuntime } from "../bridge/core/engine/env-runtime.js";
import { Supervisor } from "../bridge/fronts/zmq/supervisor.js";
import { BUNDLED_ENVS } from "../envs/bundled.js";
import { importTaubench } from "../envs/taubench/import-taubench.js";
import { decodeFrame, encodeFrame } from "../protocol/codec.js";
import { LlmClient } from "../synth/llm/llm-client.js";
import { mediumBundle } from "./medium-bundle.js";
import { startLatencyFixture } from "./latency-fixture.js";
import { libraryForBench, OPENENV_CORE, openEnvRows } from "./openenv-peer.js";
import { rolloutShareRows } from "./rollout-share.js";
import { forkGroupRows } from "./fork-group.js";
import { benchPython } from "./bench-venv.js";
import { fmt, median, type Row, spread, versus } from "./rows.js";

const execFileAsync = promisify(execFile);
const ROOT = resolve(import.meta.dirname, import.meta.url.endsWith(".ts") ? ".." : "../..");
const quick = process.argv.includes("--quick");
const silent = pino({ level: "silent" });

const rows: Row[] = [];
const raw: Record<string, unknown> = {};

/** The peer (OpenEnv) goes into the bench's own venv, pinned; nothing else uses it. Null when it installed; else why not. */
function installPeer(py: string): string | null {
  try {
    execFileSync(py, ["-m", "pip", "install", "-q", OPENENV_CORE], { stdio: ["ignore", "inherit", "pipe"] });
    return null;
  } catch (e) {
    return ((e as { stderr?: Buffer }).stderr?.toString() ?? String(e)).trim().split("\n").at(-1) ?? "pip failed";
  }
}

/** Runs the Python load generator; asynchronously, because the echo floor lives in this process's event loop. */
async function drive(py: string, args: string[]): Promise<Record<string, number>> {
  const { stdout } = await execFileAsync(py, [join(ROOT, "bench", "py", "driver.py"), ...args], { encoding: "utf8" });
  return JSON.parse(stdout.trim().split("\n").at(-1)!) as Record<string, number>;
}

/** The floor: a Node ROUTER that decodes each request and answers with a reply of the bridge's size, nothing else. */
async function echoServer(replyBytes: number): Promise<{ endpoint: string; close: () => void }> {
  const sock = new Router();
  await sock.bind("tcp://127.0.0.1:*");
  const pad = "x".repeat(Math.max(0, replyBytes - 40));
  void (async () => {
    try {
      for await (const [id, body] of sock) {
        const req = decodeFrame(body!) as { id: number };
        await sock.send([id!, encodeFrame({ v: PROTOCOL_VERSION, id: req.id, ok: true, result: { pad } })]);
      }
    } catch {
      /* closed */
    }
  })();
  return { endpoint: sock.lastEndpoint!, close: () => sock.close() };
}

/** A 2 KB state and an O(1) lookup tool: the wire rows measure our overhead, not an env's own work. */
function benchEnvs(): string {
  return mediumBundle(join(mkdtempSync(join(tmpdir(), "envscaler-bench-")), "small"), 2048).dir;
}

async function wire(py: string): Promise<void> {
  const seconds = quick ? "1.5" : "4";
  const n = quick ? "500" : "3000";
  const envs = benchEnvs();
  const scen = ["--scenario", "medium-1", "--action", JSON.stringify({ name: "get_record", arguments: { id: "R00003" } })];
  // recording on, as `envscaler serve` runs by default
  const recordDir = mkdtempSync(join(tmpdir(), "envscaler-bench-rec-"));
  const one = new Supervisor({ envs: [envs], endpoint: "tcp://127.0.0.1:*", replicas: 1, recordDir, logger: silent });
  const ep1 = (await one.start()).endpoints;
  let rtt: Record<string, number>, pipe: Record<string, number>, batch: Record<string, number>;
  try {
    rtt = await drive(py, ["rtt", ...scen, "--endpoints", ep1[0]!, "--n", n]);
    pipe = await drive(py, ["pipe", ...scen, "--endpoints", ep1[0]!, "--sessions", "64", "--seconds", seconds]);
    batch = await drive(py, ["batch", ...scen, "--endpoints", ep1[0]!, "--sessions", "64", "--seconds", seconds]);
  } finally {
    await one.stop();
  }
  const echo = await echoServer(rtt.reply_bytes!);
  let floorRtt: Record<string, number>, floorPipe: Record<string, number>;
  try {
    floorRtt = await drive(py, ["rtt", "--echo", "--endpoints", echo.endpoint, "--n", n]);
    floorPipe = await drive(py, ["pipe", "--echo", "--endpoints", echo.endpoint, "--sessions", "64", "--seconds", seconds]);
  } finally {
    echo.close();
  }
  const two = new Supervisor({ envs: [envs], endpoint: "tcp://127.0.0.1:*", replicas: 2, recordDir, logger: silent });
  const ep2 = (await two.start()).endpoints;
  let pipe2: Record<string, number>;
  try {
    pipe2 = await drive(py, ["pipe", ...scen, "--endpoints", ep2.join(","), "--sessions", "64", "--seconds", seconds]);
  } finally {
    await two.stop();
  }
  raw.wire = { rtt, pipe, batch, floorRtt, floorPipe, pipe2 };
  const r1 = rtt.p50_us! / floorRtt.p50_us!;
  rows.push({ what: "1 session, step round trip from Python, p50 (p99), 2 KB state, O(1) tool", ours: `${fmt(rtt.p50_us!)} µs (${fmt(rtt.p99_us!)})`, reference: `${fmt(floorRtt.p50_us!)} µs (${fmt(floorRtt.p99_us!)}) bare zmq+msgpack echo`, ratio: `${versus(rtt.p50_us!, floorRtt.p50_us!, false)} than the floor`, target: "≤ 1.5× the floor's time", met: r1 <= 1.5 });
  const rp = pipe.steps_per_s! / floorPipe.steps_per_s!;
  rows.push({ what: "64 sessions pipelined, env-steps/s (1 replica)", ours: fmt(pipe.steps_per_s!, 0), reference: `${fmt(floorPipe.steps_per_s!, 0)} msgs/s echo`, ratio: `${versus(pipe.steps_per_s!, floorPipe.steps_per_s!, true)} than the floor`, target: "≥ 0.6× the floor's rate", met: rp >= 0.6 });
  const rb = batch.steps_per_s! / floorPipe.steps_per_s!;
  rows.push({ what: "64 sessions, one step_batch per round, env-steps/s", ours: fmt(batch.steps_per_s!, 0), reference: `${fmt(floorPipe.steps_per_s!, 0)} msgs/s echo`, ratio: `${versus(batch.steps_per_s!, floorPipe.steps_per_s!, true)} than the floor`, target: "≥ 0.6× the floor's rate", met: rb >= 0.6 });
  rows.push({ what: "64 sessions pipelined over 2 replicas vs 1", ours: fmt(pipe2.steps_per_s!, 0), reference: `${fmt(pipe.steps_per_s!, 0)} on 1 replica`, ratio: versus(pipe2.steps_per_s!, pipe.steps_per_s!, true), target: "— (2 cores, shared with the client)", met: null });
}

/**
 * Where the wire's overhead goes: the same step through EnvRuntime with its episodes in this
 * thread (`workers: 0`, what a replica's serving thread does by default) and on an engine worker
 * thread (`workers: 1`: this thread → worker → this thread), next to a bare postMessage round trip.
 */
async function threadHop(): Promise<void> {
  const n = quick ? 500 : 3000;
  const envs = benchEnvs();
  const action = { name: "get_record", arguments: { id: "R00003" } };
  const timeSteps = async (workers: number): Promise<number[]> => {
    const rt = await EnvRuntime.start({ envs: [envs], workers });
    const out: number[] = [];
    try {
      const { episode_id } = await rt.reset("medium-1", 0);
      for (let i = 0; i < n + 200; i++) {
        const t = performance.now();
        await rt.step(episode_id, action);
        if (i >= 200) out.push((performance.now() - t) * 1000); // the first 200 warm the JIT
      }
    } finally {
      await rt.close();
    }
    return out;
  };
  const inThread = await timeSteps(0);
  const viaWorker = await timeSteps(1);
  const echo = new Worker("require('node:worker_threads').parentPort.on('message', (m) => require('node:worker_threads').parentPort.postMessage(m));", { eval: true });
  const bare: number[] = [];
  try {
    const reply = () => new Promise((r) => echo.once("message", r));
    for (let i = 0; i < n + 100; i++) {
      const t = performance.now();
      const p = reply();
      echo.postMessage([{ op: "step", episode: "x", action, id: i, slot: 1 }]);
      await p;
      if (i >= 100) bare.push((performance.now() - t) * 1000);
    }
  } finally {
    await echo.terminate();
  }
  const [w, h, b] = [median(viaWorker), median(inThread), median(bare)];
  raw.thread_hop = { step_via_worker_us: w, step_in_thread_us: h, bare_post_message_rt_us: b };
  rows.push({ what: "one step through EnvRuntime on an engine worker (`--workers 1`) vs in the serving thread (`--workers 0`, the default), p50 (bare postMessage round trip)", ours: `${fmt(w)} µs`, reference: `${fmt(h)} µs in-thread (${fmt(b)} µs)`, ratio: `${versus(w, h, false)} than in-thread`, target: "— (explains the wire rows)", met: null });
}

/**
 * What the sandbox's fuel checks (bridge/core/sandbox/wasm-fuel.ts) cost: the peer rows' four read tools
 * stepped in process, in child processes with and without them, interleaved, 3 repetitions.
 */
async function fuelCost(): Promise<void> {
  const script = join(ROOT, "dist", "bench", "fuel-probe.js");
  const lib = libraryForBench();
  const n = quick ? "1500" : "4000";
  const run = async (fuel: boolean) => {
    const { stdout } = await execFileAsync(process.execPath, [script, lib, n], { encoding: "utf8", env: { ...process.env, ENVSCALER_NO_FUEL: fuel ? "0" : "1" } });
    return JSON.parse(stdout.trim().split("\n").at(-1)!) as { step_us: number; reset_us: number };
  };
  const on: { step_us: number; reset_us: number }[] = [];
  const off: { step_us: number; reset_us: number }[] = [];
  for (let rep = 0; rep < 3; rep++) {
    // alternate who goes first
    if (rep % 2 === 0) {
      on.push(await run(true));
      off.push(await run(false));
    } else {
      off.push(await run(false));
      on.push(await run(true));
    }
  }
  raw.fuel = { on, off };
  const [s1, s0] = [on.map((r) => r.step_us), off.map((r) => r.step_us)];
  const [r1, r0] = [on.map((r) => r.reset_us), off.map((r) => r.reset_us)];
  rows.push({ what: "fuel checks' cost: library-1 step p50 in process (four read tools), with the checks vs without (ENVSCALER_NO_FUEL=1)", ours: `${spread(s1)} µs`, reference: `${spread(s0)} µs without`, ratio: `${versus(median(s1), median(s0), false)}`, target: "— (the price of stopping native builtins at the deadline)", met: null });
  rows.push({ what: "fuel checks' cost: library-1 reset p50 in process, with the checks vs without", ours: `${spread(r1)} µs`, reference: `${spread(r0)} µs without`, ratio: `${versus(median(r1), median(r0), false)}`, target: "—", met: null });
}

async function timeRuntime(envs: string, scenario: string, action: unknown, resets: number, steps: number): Promise<{ reset_ms: number; step_ms: number }> {
  const rt = await EnvRuntime.start({ envs: [envs] });
  const rs: number[] = [];
  const ss: number[] = [];
  try {
    for (let i = 0; i < resets + 1; i++) {
      let t = performance.now();
      const { episode_id } = await rt.reset(scenario, i);
      if (i > 0) rs.push(performance.now() - t); // the first reset also loads the env's code and base state
      for (let j = 0; j < steps; j++) {
        t = performance.now();
        await rt.step(episode_id, action);
        ss.push(performance.now() - t);
      }
      await rt.closeEpisode(episode_id);
    }
  } finally {
    await rt.close();
  }
  return { reset_ms: median(rs), step_ms: median(ss) };
}

async function stateSizes(py: string): Promise<void> {
  const n = quick ? 3 : 8;
  const cases: { name: string; envs: string; scenario: string; action: unknown; state: string; table: string; key: string }[] = [];
  const dir = mkdtempSync(join(tmpdir(), "envscaler-bench-"));
  const lib = JSON.parse(readFileSync(join(BUNDLED_ENVS, "library", "manifest.json"), "utf8")) as { default_state: unknown };
  writeFileSync(join(dir, "library.json"), JSON.stringify(lib.default_state));
  cases.push({ name: `small (library-v1, ${fmt(JSON.stringify(lib.default_state).length / 1024)} KB)`, envs: join(BUNDLED_ENVS, "library"), scenario: "library-1", action: { name: "get_book", arguments: { book_id: "B001" } }, state: join(dir, "library.json"), table: "books", key: "B001" });
  const medium = mediumBundle(join(dir, "medium"), 200 * 1024);
  cases.push({ name: "medium (200 KB)", envs: medium.dir, scenario: "medium-1", action: { name: "get_record", arguments: { id: "R00042" } }, state: medium.stateFile, table: "records", key: "R00042" });
  const tau = join(ROOT, "..", "shared", "benchmarks", "taubench");
  if (existsSync(join(tau, "airline")) && existsSync(join(ROOT, "envs", "taubench", "airline-env.js"))) {
    importTaubench(tau, join(dir, "tau"), ["airline"]);
    cases.push({ name: "tau-bench airline (5 MB)", envs: join(dir, "tau", "taubench-airline"), scenario: "airline-test-0", action: { name: "get_reservation_details", arguments: { reservation_id: "4WQ150" } }, state: join(dir, "tau", "taubench-airline", "state.json"), table: "reservations", key: "4WQ150" });
  } else raw.airline = "not measured: tau-bench data or the airline env is missing";
  for (const c of cases) {
    const ours = await timeRuntime(c.envs, c.scenario, c.action, n, 5);
    const orig = JSON.parse(execFileSync(py, [join(ROOT, "bench", "py", "original_style.py"), "--state", c.state, "--table", c.table, "--key", c.key, "--resets", String(n), "--steps", "5"], { encoding: "utf8" })) as { reset_ms: number; step_ms: number };
    raw[`state ${c.name}`] = { ours, original: orig };
    const big = c.name.startsWith("tau");
    const rr = orig.reset_ms / ours.reset_ms;
    const sr = orig.step_ms / ours.step_ms;
    rows.push({ what: `reset, ${c.name}`, ours: `${fmt(ours.reset_ms, 2)} ms`, reference: `${fmt(orig.reset_ms, 2)} ms original-style Python`, ratio: versus(ours.reset_ms, orig.reset_ms, false), target: big ? "≥ 10× faster" : "—", met: big ? rr >= 10 : null });
    rows.push({ what: `step, ${c.name}`, ours: `${fmt(ours.step_ms, 3)} ms`, reference: `${fmt(orig.step_ms, 3)} ms original-style Python`, ratio: versus(ours.step_ms, orig.step_ms, false), target: big ? "≥ 10× faster" : "—", met: big ? sr >= 10 : null });
  }
}

async function memory(): Promise<void> {
  const k = quick ? 200 : 2000;
  const rt = await EnvRuntime.start({ envs: [join(BUNDLED_ENVS, "library")] });
  try {
    await rt.closeEpisode((await rt.reset("library-1", 0)).episode_id);
    global.gc?.();
    const before = process.memoryUsage().rss;
    for (let i = 0; i < k; i++) await rt.reset("library-1", i);
    const per = (process.memoryUsage().rss - before) / k;
    const fits = Math.floor((2 * 1024 ** 3) / per);
    raw.memory = { sessions: k, bytes_per_session: per };
    rows.push({ what: `memory per live session (library-v1, ${k} open)`, ours: `${fmt(per / 1024 ** 2, 2)} MB`, reference: `→ ${fits} sessions in 2 GB`, ratio: "—", target: "≥ 2,000 per replica in 2 GB", met: fits >= 2000 });
  } finally {
    await rt.close();
  }
}

async function checkerTime(): Promise<void> {
  const lib = JSON.parse(readFileSync(join(BUNDLED_ENVS, "library", "scenarios.json"), "utf8")) as { id: string; reference_actions: unknown[] }[];
  const rt = await EnvRuntime.start({ envs: [join(BUNDLED_ENVS, "library")] });
  const ends: number[] = [];
  const steps: number[] = [];
  try {
    for (let i = 0; i < (quick ? 3 : 10); i++) {
      const { episode_id } = await rt.reset(lib[0]!.id, i);
      for (const a of lib[0]!.reference_actions) {
        const t = performance.now();
        await rt.step(episode_id, a);
        steps.push(performance.now() - t);
      }
      const t = performance.now();
      await rt.step(episode_id, "Task Completed");
      ends.push(performance.now() - t);
    }
  } finally {
    await rt.close();
  }
  raw.checker = { end_ms: median(ends), step_ms: median(steps) };
  rows.push({ what: "scoring an episode (library-1: 4 checks incl. reference state)", ours: `${fmt(median(ends), 2)} ms`, reference: `${fmt(median(steps), 3)} ms per tool step`, ratio: `takes ${(median(ends) / median(steps)).toFixed(0)}× a step's time`, target: "—", met: null });
}

async function synthThroughput(): Promise<void> {
  const latency = 100;
  const fixture = await startLatencyFixture(latency);
  const calls = quick ? 32 : 96;
  const results: Record<number, number> = {};
  try {
    for (const concurrency of [1, 8, 32]) {
      const llm = new LlmClient({ endpoints: { default: { model: "m", baseURL: fixture.baseURL, apiKey: "x" } }, cacheDir: mkdtempSync(join(tmpdir(), "envscaler-bench-cache-")), concurrency });
      const t = performance.now();
      await Promise.all(Array.from({ length: calls }, (_, i) => llm.chat("plan", [{ role: "user", content: `call ${i}` }])));
      results[concurrency] = calls / ((performance.now() - t) / 1000);
    }
  } finally {
    await fixture.close();
  }
  raw.synth = { latency_ms: latency, calls_per_s: results };
  rows.push({ what: `synth LLM calls/s against a ${latency} ms endpoint, 8 (32) in flight`, ours: `${fmt(results[8]!)} (${fmt(results[32]!)})`, reference: `${fmt(results[1]!)} one at a time`, ratio: `${versus(results[8]!, results[1]!, true)} (${versus(results[32]!, results[1]!, true)})`, target: "—", met: null });
}

/** The sections, in the order they run; `--only peer,wire` runs some of them (and leaves README and results.* alone). */
const SECTIONS: Record<string, (py: string) => Promise<void>> = {
  peer: async (py) => {
    const missing = installPeer(py);
    if (missing) {
      rows.push({ what: "OpenEnv reference rows", ours: "—", peer: `n/a: ${OPENENV_CORE} could not be installed (${missing})`, reference: "—", ratio: "—", target: "—", met: null });
      return;
    }
    const r = await openEnvRows({ root: ROOT, py, quick, echo: echoServer, logger: silent });
    rows.push(...r.rows);
    raw.openenv = r.raw;
  },
  wire,
  ports: async () => {
    // the originals' classes: bfcl-eval from the test venv (scripts/test-all.sh pins it there) and ACEBench from ../shared
    const testPy = join(ROOT, ".venv", "bin", "python");
    const acebench = join(ROOT, "..", "shared", "benchmarks", "acebench");
    let missing = existsSync(acebench) ? null : `${acebench} is not there`;
    if (!missing) {
      try {
        execFileSync(testPy, ["-c", "import bfcl_eval"], { stdio: "ignore" });
      } catch {
        missing = `${testPy} cannot import bfcl_eval (npm test installs it)`;
      }
    }
    if (missing) {
      rows.push({ what: "BFCL and ACEBench ports vs the original executors", ours: "—", reference: `n/a: ${missing}`, ratio: "—", target: "—", met: null });
      return;
    }
    try {
      rows.push(...(await portRows({ py: testPy, acebench })));
    } catch (e) {
      rows.push({ what: "BFCL and ACEBench ports vs the original executors", ours: `failed: ${(e as Error).message.split("\n")[0]!.slice(0, 160)}`, reference: "—", ratio: "—", target: "—", met: false });
    }
  },
  hop: () => threadHop(),
  fuel: () => fuelCost(),
  states: stateSizes,
  memory: () => memory(),
  checker: () => checkerTime(),
  synth: () => synthThroughput(),
  fork: async () => {
    const r = await forkGroupRows({ root: ROOT, quick, logger: silent });
    rows.push(...r.rows);
    raw.fork_group = r.raw;
  },
  rollout: async () => {
    const r = await rolloutShareRows({ quick, logger: silent });
    rows.push(...r.rows);
    raw.rollout = r.raw;
  },
};

async function main(): Promise<void> {
  const onlyArg = process.argv.find((a) => a.startsWith("--only="))?.slice(7) ?? (process.argv.includes("--only") ? process.argv[process.argv.indexOf("--only") + 1] : undefined);
  const only = onlyArg?.split(",");
  const unknown = only?.filter((s) => !(s in SECTIONS));
  if (unknown?.length) throw new Error(`unknown bench section(s) ${unknown.join(", ")}: choose from ${Object.keys(SECTIONS).join(", ")}`);
  const py = benchPython(ROOT);
  for (const [name, run] of Object.entries(SECTIONS)) if (!only || only.includes(name)) await run(py);
  const machine = `${cpus().length} × ${cpus()[0]?.model ?? "cpu"}, ${Math.round(totalmem() / 1024 ** 3)} GB, Node ${process.version}${quick ? ", quick mode" : ""}`;
  const md = [
    `Measured ${new Date().toISOString().slice(0, 10)} on ${machine}. Each figure is next to references measured in the same run: OpenEnv (${OPENENV_CORE}, the same env logic ported to Python, one uvicorn process, its rows interleaved with ours; figures are median [min–max] of the repetitions), the bare transport (echo floor), or the original EnvScaler's way.`,
    "",
    "| measure | ours | OpenEnv | other reference | ratio | target | met |",
    "| --- | --- | --- | --- | --- | --- | --- |",
    ...rows.map((r) => `| ${r.what} | ${r.ours} | ${r.peer ?? "—"} | ${r.reference} | ${r.ratio} | ${r.target} | ${r.met === null ? "" : r.met ? "yes" : "**no**"} |`),
  ].join("\n");
  mkdirSync(join(ROOT, "bench"), { recursive: true });
  if (only) {
    // a partial run must not replace the full table
    writeFileSync(join(ROOT, "bench", "results-partial.json"), `${JSON.stringify({ machine, quick, only, rows, raw }, null, 1)}\n`);
    console.log(md);
    return;
  }
  writeFileSync(join(ROOT, "bench", "results.json"), `${JSON.stringify({ machine, quick, rows, raw }, null, 1)}\n`);
  writeFileSync(join(ROOT, "bench", "results.md"), `${md}\n`);
  const readme = join(ROOT, "README.md");
  const text = readFileSync(readme, "utf8");
  const start = "<!-- bench:start -->";
  const end = "<!-- bench:end -->";
  if (text.includes(start) && text.includes(end)) writeFileSync(readme, `${text.slice(0, text.indexOf(start) + start.length)}\n${md}\n${text.slice(text.indexOf(end))}`);
  console.log(md);
}

await main();
