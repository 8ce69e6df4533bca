import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { Worker } from "node:worker_threads";
import type { Logger } from "pino";
import { runRollout } from "../agent/rollout.js";
import { BridgeClient } from "../agent/bridge-client.js";
import type { EpisodeOutcome } from "../agent/run-episode.js";
import { Supervisor } from "../bridge/fronts/zmq/supervisor.js";
import { BUNDLED_ENVS } from "../envs/bundled.js";
import { EnvRegistry } from "../envs/format/registry.js";
import { fmt, type Row } from "./rows.js";

/**
 * The agent's model for this row: an OpenAI-compatible endpoint that plays each task scenario's
 * reference actions as tool calls, one per reply, then says its reference messages and "Task
 * Completed", every reply after a
 * fixed delay. It runs on its own thread, so its JSON parsing is not charged to the rollout's
 * event loop (a real model is elsewhere too); it counts the most requests it held at once.
 */
const FIXTURE_SOURCE = `
const { parentPort, workerData } = require("node:worker_threads");
const { createServer } = require("node:http");
const { latencyMs, jitter, plans } = workerData;
let open = 0, maxOpen = 0, calls = 0;
const server = createServer((req, res) => {
  let body = "";
  req.on("data", (c) => (body += c));
  req.on("end", () => {
    open++; calls++; maxOpen = Math.max(maxOpen, open);
    const r = JSON.parse(body);
    const first = r.messages.find((m) => m.role === "user")?.content ?? "";
    const plan = plans.find((p) => first.includes(p.task)) ?? { actions: [] };
    const n = r.messages.filter((m) => m.role === "assistant").length;
    const a = plan.actions[n];
    const message = a
      ? { role: "assistant", content: null, tool_calls: [{ id: "call_" + n, type: "function", function: { name: a.name, arguments: JSON.stringify(a.arguments ?? {}) } }] }
      : { role: "assistant", content: [...(plan.say ?? []), "Task Completed"].join("\\n") };
    const payload = JSON.stringify({ id: "x" + calls, object: "chat.completion", created: 0, model: r.model, choices: [{ index: 0, finish_reason: a ? "tool_calls" : "stop", message }], usage: { prompt_tokens: 100, completion_tokens: 20, total_tokens: 120 } });
    const delay = latencyMs * (1 + jitter * (2 * Math.random() - 1));
    setTimeout(() => { open--; res.writeHead(200, { "content-type": "application/json" }).end(payload); }, delay);
  });
});
server.listen(0, "127.0.0.1", () => parentPort.postMessage({ port: server.address().port }));
parentPort.on("message", (m) => { if (m === "stats") parentPort.postMessage({ maxOpen, calls }); });
`;

export interface RolloutShareOptions {
  /** How long the fixture model takes per reply. @unit ms @default 1000 */
  latencyMs?: number;
  /** Each reply takes latencyMs × (1 ± jitter), uniformly; 0: every reply takes exactly latencyMs. @default 0 */
  jitter?: number;
  concurrency?: number;
  replicas?: number;
  /** Engine worker threads per replica (`serve --workers`). @default 0 */
  workers?: number;
  /** Episodes per task scenario (distinct seeds). */
  trials?: number;
  logger: Logger;
}

export interface RolloutShare {
  episodes: number;
  model_calls: number;
  /** The most requests the fixture held at once (the episodes really in flight). */
  max_in_flight: number;
  /** Summed over episodes. @unit ms */
  episode_ms: number;
  /** Summed over episodes: time waiting on the model. @unit ms */
  model_ms: number;
  /** Summed over episodes: time waiting on the bridge's replies (reset, step, finish, close). @unit ms */
  bridge_ms: number;
  /** bridge_ms / episode_ms. */
  bridge_share: number;
  /** The rest: the agent loop's own work (building requests, the call cache, the episode log). */
  agent_share: number;
  /** Bridge time per agent step (the reset and close included), averaged. @unit ms */
  bridge_ms_per_step: number;
  wall_s: number;
  mean_reward: number;
  /** Before the run: one reset of every env on every replica (each loads and compiles its env once). @unit ms */
  warm_up_ms: number;
  /** Starting the replicas, each readying sandboxes for its share of the episodes (as `envscaler rollout` starts its bridge). @unit ms */
  start_ms: number;
  /**
   * CPU time the replica processes used during the run, per agent step: what the bridge costs
   * whatever else the machine runs (the wall-time share also holds queueing behind other load).
   * Null where /proc or ps is missing. @unit ms
   */
  bridge_cpu_ms_per_step: number | null;
  /** The machine's 1-minute load average before and after the run (2 cores: above 2 means queueing). */
  load: [number, number];
}

/** CPU time (user + system) of this process's child processes so far, from /proc; null where unavailable. @unit ms */
function childrenCpuMs(): number | null {
  try {
    const tick = 1000 / Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim());
    const pids = execFileSync("ps", ["-o", "pid=", "--ppid", String(process.pid)], { encoding: "utf8" }).split(/\s+/).filter(Boolean);
    let ms = 0;
    let seen = 0;
    for (const pid of pids) {
      let stat: string;
      try {
        stat = readFileSync(`/proc/${pid}/stat`, "utf8");
      } catch {
        continue; // ps itself, gone by now
      }
      // fields after the command's closing parenthesis; utime and stime are the 12th and 13th
      const f = stat.split(")").at(-1)!.trim().split(" ");
      ms += (Number(f[11]) + Number(f[12])) * tick;
      seen++;
    }
    return seen ? ms : null;
  } catch {
    return null;
  }
}

/**
 * The issue-15 target: `envscaler rollout`'s own loop (runRollout against a bridge with recording
 * on, as the command starts it) plays every bundled task scenario with a model that answers in
 * `latencyMs`. Each episode's wall time splits into waiting on the model, waiting on the bridge
 * (from sending a request to its reply reaching the client's socket reader: queueing in the
 * replicas and on the wire counts, see BridgeClient.requestTimed) and the agent loop's own work
 * (which includes waiting for its own busy event loop to resume an episode whose reply is in).
 */
export async function measureRolloutShare(o: RolloutShareOptions): Promise<RolloutShare> {
  const latencyMs = o.latencyMs ?? 1000;
  const tasks = EnvRegistry.load([BUNDLED_ENVS])
    .list()
    .flatMap((b) => [...b.scenarios.values()])
    .filter((s) => s.mode === "task" && (s.reference_actions?.length ?? 0) > 0);
  const plans = tasks.map((s) => ({ task: s.task, actions: s.reference_actions, say: s.reference_messages }));
  const worker = new Worker(FIXTURE_SOURCE, { eval: true, workerData: { latencyMs, jitter: o.jitter ?? 0, plans } });
  const dir = mkdtempSync(join(tmpdir(), "envscaler-bench-rollout-"));
  const replicas = o.replicas ?? 2;
  // as `envscaler rollout` starts its bridge: each replica readies sandboxes for its share of the episodes
  const supervisor = new Supervisor({ envs: [BUNDLED_ENVS], endpoint: "tcp://127.0.0.1:*", replicas, workers: o.workers ?? 0, warmSessions: Math.ceil((o.concurrency ?? 64) / replicas), recordDir: join(dir, "trajectories"), logger: o.logger });
  try {
    const { port } = await new Promise<{ port: number }>((resolve, reject) => worker.once("message", resolve).once("error", reject));
    const s0 = performance.now();
    const endpoints = (await supervisor.start()).endpoints;
    const start_ms = performance.now() - s0;
    // a replica loads an env's code on its first reset; that start-up cost is reported on its own,
    // since a rollout of any length pays it once, not per episode
    const w0 = performance.now();
    await Promise.all(endpoints.map((e) => warm(e, [...new Map(tasks.map((s) => [s.env_id, s.id])).values()])));
    const warm_up_ms = performance.now() - w0;
    const load0 = loadavg()[0]!;
    const cpu0 = childrenCpuMs();
    const outcomes: EpisodeOutcome[] = [];
    const run = await runRollout({
      endpoints,
      scenarios: tasks.map((s) => s.id),
      trials: o.trials ?? 2,
      seed: 0,
      concurrency: o.concurrency ?? 64,
      agent: { agentMode: "fc" },
      model: { baseURL: `http://127.0.0.1:${port}/v1`, apiKey: "x", model: "fixture", timeoutMs: 10 * latencyMs + 30_000, maxRetries: 0 },
      out: join(dir, "run"),
      trajectoriesDir: join(dir, "trajectories"),
      settings: { benchmark: null, user: null },
      progress: false,
      onEpisode: (x) => outcomes.push(x),
    });
    const cpu1 = childrenCpuMs();
    const load1 = loadavg()[0]!;
    const stats = await new Promise<{ maxOpen: number; calls: number }>((resolve) => {
      worker.once("message", resolve);
      worker.postMessage("stats");
    });
    const episode_ms = outcomes.reduce((a, x) => a + x.wall_ms, 0);
    const model_ms = outcomes.reduce((a, x) => a + x.model_ms, 0);
    const bridge_ms = outcomes.reduce((a, x) => a + x.bridge_ms, 0);
    const steps = outcomes.reduce((a, x) => a + x.turns.length, 0);
    const failed = outcomes.filter((x) => x.failures.some((f) => f.kind === "endpoint_error" || f.kind === "bridge_error"));
    if (failed.length) throw new Error(`${failed.length} episode(s) cut short (${failed[0]!.failures.map((f) => f.message).join("; ")}): the share would not be measured on full episodes`);
    return {
      episodes: outcomes.length,
      model_calls: stats.calls,
      max_in_flight: stats.maxOpen,
      episode_ms,
      model_ms,
      bridge_ms,
      bridge_share: bridge_ms / episode_ms,
      agent_share: (episode_ms - model_ms - bridge_ms) / episode_ms,
      bridge_ms_per_step: bridge_ms / steps,
      wall_s: run.results.totals.wall_s,
      mean_reward: run.results.totals.mean_reward,
      warm_up_ms,
      start_ms,
      bridge_cpu_ms_per_step: cpu0 !== null && cpu1 !== null ? (cpu1 - cpu0) / steps : null,
      load: [load0, load1],
    };
  } finally {
    await supervisor.stop();
    await worker.terminate();
    rmSync(dir, { recursive: true, force: true });
  }
}

async function warm(endpoint: string, scenarioIds: string[]): Promise<void> {
  const client = new BridgeClient(endpoint, { timeoutMs: 120_000 });
  try {
    for (const id of scenarioIds) {
      const r = await client.request<{ session_id: string }>("reset", { scenario_id: id, seed: 0 });
      await client.request("close", { session_id: r.session_id });
    }
  } finally {
    client.close();
  }
}

/**
 * The bench rows (`npm run bench -- --only rollout`): the issue's setting (every reply takes
 * exactly 1 s, so the 64 episodes move in lockstep and their steps reach the bridge in bursts of
 * 64: the worst case for queueing), then the same with replies taking 1 s ± 50 %, as a real
 * model's do. Each setting runs REPEATS times, interleaved; a row gives the median run (by share)
 * and the range.
 */
const REPEATS = 3;

export async function rolloutShareRows(o: { quick: boolean; logger: Logger }): Promise<{ rows: Row[]; raw: Record<string, RolloutShare[]> }> {
  process.env.ENVSCALER_LOG_LEVEL ??= "warn"; // as `envscaler rollout` runs its bridge
  const settings = [0, 0.5];
  const raw: Record<string, RolloutShare[]> = Object.fromEntries(settings.map((j) => [`jitter ${j}`, []]));
  for (let rep = 0; rep < REPEATS; rep++) {
    for (const jitter of settings) raw[`jitter ${jitter}`]!.push(await measureRolloutShare({ latencyMs: 1000, jitter, concurrency: 64, replicas: 2, trials: o.quick ? 2 : 3, logger: o.logger }));
  }
  const rows = settings.map((jitter): Row => {
    const runs = raw[`jitter ${jitter}`]!;
    const m = [...runs].sort((a, b) => a.bridge_share - b.bridge_share)[Math.floor(runs.length / 2)]!;
    const pct = (x: number) => `${(100 * x).toFixed(2)} %`;
    const shares = runs.map((r) => r.bridge_share);
    return {
      what: `rollout: bridge's share of episode wall time, ${m.max_in_flight} episodes in flight on 2 replicas, fixture model answering in ${jitter ? `1 s ± ${100 * jitter} %` : "exactly 1 s (lockstep)"} (${m.episodes} task episodes, ${m.model_calls} calls; median of ${runs.length} runs)`,
      ours: `${pct(m.bridge_share)} [${pct(Math.min(...shares))}–${pct(Math.max(...shares))}] (${fmt(m.bridge_ms_per_step, 1)} ms per step; bridge CPU ${m.bridge_cpu_ms_per_step === null ? "n/a" : `${fmt(m.bridge_cpu_ms_per_step, 2)} ms`} per step)`,
      reference: `${pct(1 - m.bridge_share - m.agent_share)} waiting on the model, ${pct(m.agent_share)} the agent loop's own work; run wall ${fmt(m.wall_s)} s after a ${fmt(m.start_ms / 1000, 2)} s bridge start (${Math.ceil(m.max_in_flight / 2)} sandboxes readied per replica) and a ${fmt(m.warm_up_ms / 1000, 2)} s warm-up, load average ${m.load[0].toFixed(1)} → ${m.load[1].toFixed(1)}, mean reward ${m.mean_reward.toFixed(3)}`,
      ratio: "—",
      target: "< 2 %",
      met: m.bridge_share < 0.02,
    };
  });
  return { rows, raw };
}
