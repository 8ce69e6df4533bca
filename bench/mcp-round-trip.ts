// By hand, not part of `npm run bench`: `npm run build && node dist/bench/mcp-round-trip.js`.
// One tool call's round trip over MCP (Streamable HTTP, `envscaler mcp`) against the same step
// over the ZeroMQ bridge (`envscaler serve`), both servers in their own process in this run; then
// 500 MCP sessions calling tools at once (calls/s), with the bridge doing the same for reference.
// MCP_BENCH_LOG=FILE: the MCP server's log goes to FILE and the phases are printed on stderr.
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, openSync, readFileSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { pino } from "pino";
import { Supervisor } from "../bridge/fronts/zmq/supervisor.js";
import { BUNDLED_ENVS } from "../envs/bundled.js";
import { BridgeClient } from "../agent/bridge-client.js";

const REPS = 5;
const CALLS = 200;
// MCP_BENCH_SESSIONS=2000 checks thousands of sessions in one process
const SESSIONS = Number(process.env.MCP_BENCH_SESSIONS ?? 500);
const PER_SESSION = 20;
const CALL = { name: "get_book", arguments: { book_id: "B001" } };
const median = (a: number[]) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)]!;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** CPU seconds (user + system, every thread) a process has used: what a call costs the server, whatever else the machine runs. */
function cpuS(pid: number): number {
  const f = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
  return (Number(f[11]) + Number(f[12])) / 100;
}

function rssMb(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return m ? Math.round(Number(m[1]) / 1024) : NaN;
}

async function startMcp(): Promise<{ url: string; pid: number; stop: () => void }> {
  const dir = mkdtempSync(join(tmpdir(), "mcp-bench-"));
  const conn = join(dir, "conn.json");
  const cli = join(import.meta.dirname, "..", "cli", "main.js");
  const child = spawn(process.execPath, [cli, "mcp", "--envs", BUNDLED_ENVS, "--port", "0", "--no-record", "--max-sessions", String(SESSIONS + 10), "--connection-file", conn], { stdio: ["ignore", "ignore", process.env.MCP_BENCH_LOG ? openSync(process.env.MCP_BENCH_LOG, "w") : "ignore"], env: { ...process.env, ENVSCALER_LOG_LEVEL: "warn" } });
  while (!existsSync(conn)) await sleep(50);
  await sleep(50);
  const info = JSON.parse(readFileSync(conn, "utf8")) as { mcp: string; pid: number };
  return { url: info.mcp, pid: info.pid, stop: () => child.kill("SIGTERM") };
}

async function mcpSession(url: string, seed: number): Promise<{ client: Client; transport: StreamableHTTPClientTransport }> {
  const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { "X-EnvScaler-Scenario": "library-1", "X-EnvScaler-Seed": String(seed) } } });
  const client = new Client({ name: "bench", version: "0" });
  await client.connect(transport);
  return { client, transport };
}

async function main(): Promise<void> {
  const silent = pino({ level: "silent" });
  const bridge = new Supervisor({ envs: [BUNDLED_ENVS], endpoint: "tcp://127.0.0.1:*", replicas: 1, recordDir: null, logger: silent });
  const { endpoints } = await bridge.start();
  const mcp = await startMcp();
  const zmq = new BridgeClient(endpoints[0]!, { timeoutMs: 600_000 }); // a thousand resets at once queue for a while
  try {
    // --- one session at a time, sequential calls; a fresh session every 25 calls (scenarios stop at 30 steps)
    type Caller = { call: () => Promise<unknown>; done: () => Promise<void> };
    const zmqCaller = async (): Promise<Caller> => {
      const { session_id } = await zmq.request<{ session_id: string }>("reset", { scenario_id: "library-1", seed: 0 });
      return { call: () => zmq.request("step", { session_id, action: CALL }), done: async () => void (await zmq.request("close", { session_id })) };
    };
    const sdkCaller = async (): Promise<Caller> => {
      const s = await mcpSession(mcp.url, 0);
      return { call: () => s.client.callTool(CALL), done: async () => { await s.transport.terminateSession(); await s.client.close(); } };
    };
    // the same tools/call without the SDK client: what the server side costs
    const rawCaller = async (): Promise<Caller> => {
      const s = await mcpSession(mcp.url, 0);
      const headers = { "content-type": "application/json", accept: "application/json, text/event-stream", "mcp-session-id": s.transport.sessionId!, "mcp-protocol-version": s.transport.protocolVersion ?? "2025-06-18" };
      let id = 1_000_000; // JSON-RPC ids are per session: clear of the SDK client's
      return {
        call: async () => (await fetch(mcp.url, { method: "POST", headers, body: JSON.stringify({ jsonrpc: "2.0", id: id++, method: "tools/call", params: CALL }) })).text(),
        done: async () => { await s.transport.terminateSession(); await s.client.close(); },
      };
    };
    const measure = async (make: () => Promise<Caller>, n: number): Promise<number> => {
      const t: number[] = [];
      while (t.length < n) {
        const c = await make();
        for (let i = 0; i < 25 && t.length < n; i++) {
          const s0 = performance.now();
          await c.call();
          t.push((performance.now() - s0) * 1000);
        }
        await c.done();
      }
      return median(t);
    };
    const phase = (what: string) => process.env.MCP_BENCH_LOG !== undefined && console.error(`[${new Date().toISOString()}] ${what}`);
    for (const make of [zmqCaller, sdkCaller, rawCaller]) {
      phase(`warm ${make.name}`);
      await measure(make, 100);
    }
    const replicaPid = bridge.pids()[0]!;
    const zmqUs: number[] = [], sdkUs: number[] = [], rawUs: number[] = [];
    const cpu = { zmq: 0, sdk: 0 };
    for (let r = 0; r < REPS; r++) {
      phase(`rep ${r}`);
      let c0 = cpuS(replicaPid);
      zmqUs.push(await measure(zmqCaller, CALLS));
      cpu.zmq += cpuS(replicaPid) - c0;
      c0 = cpuS(mcp.pid);
      sdkUs.push(await measure(sdkCaller, CALLS));
      cpu.sdk += cpuS(mcp.pid) - c0;
      rawUs.push(await measure(rawCaller, CALLS));
    }
    const [z, s, w] = [median(zmqUs), median(sdkUs), median(rawUs)];

    // --- SESSIONS sessions at once
    phase("sessions");
    const rssBefore = rssMb(mcp.pid);
    let t0 = performance.now();
    const many = await Promise.all(Array.from({ length: SESSIONS }, (_, i) => mcpSession(mcp.url, i)));
    const connectS = (performance.now() - t0) / 1000;
    const rssWith = rssMb(mcp.pid);
    t0 = performance.now();
    let c0 = cpuS(mcp.pid);
    let errors = 0;
    await Promise.all(many.map(async ({ client }) => {
      for (let i = 0; i < PER_SESSION; i++) if ((await client.callTool(CALL)).isError) errors++;
    }));
    const mcpRate = (SESSIONS * PER_SESSION) / ((performance.now() - t0) / 1000);
    const mcpCpuMs = ((cpuS(mcp.pid) - c0) * 1000) / (SESSIONS * PER_SESSION);
    phase(`mcp: ${SESSIONS} sessions, ${Math.round(mcpRate)} calls/s, ${errors} errors, ${rssWith} MB`);
    await Promise.all(many.map(async ({ client, transport }) => {
      await transport.terminateSession();
      await client.close();
    }));

    // the bridge's reference stays at 500 sessions (its limit is 1024 per replica; a run with a
    // thousand resets at once crawled on the shared machine and was not finished)
    const zn = Math.min(SESSIONS, 500);
    const zsessions = await Promise.all(Array.from({ length: zn }, (_, i) => zmq.request<{ session_id: string }>("reset", { scenario_id: "library-1", seed: i })));
    t0 = performance.now();
    c0 = cpuS(replicaPid);
    await Promise.all(zsessions.map(async ({ session_id: id }) => {
      for (let i = 0; i < PER_SESSION; i++) await zmq.request("step", { session_id: id, action: CALL });
    }));
    const zmqRate = (zn * PER_SESSION) / ((performance.now() - t0) / 1000);
    const zmqCpuMs = ((cpuS(replicaPid) - c0) * 1000) / (zn * PER_SESSION);
    await Promise.all(zsessions.map(({ session_id: id }) => zmq.request("close", { session_id: id })));

    const out = {
      round_trip_us: {
        zmq_bridge: Math.round(z), mcp_sdk_client: Math.round(s), mcp_raw_http: Math.round(w), ratio_sdk: +(s / z).toFixed(2), ratio_raw: +(w / z).toFixed(2), reps: REPS, calls_per_rep: CALLS,
        server_cpu_ms_per_call: { zmq_replica: +((cpu.zmq * 1000) / (REPS * CALLS)).toFixed(2), mcp: +((cpu.sdk * 1000) / (REPS * CALLS)).toFixed(2) },
      },
      concurrent: {
        sessions: SESSIONS, calls_per_session: PER_SESSION, connect_s: +connectS.toFixed(1), mcp_calls_per_s: Math.round(mcpRate), zmq_steps_per_s: Math.round(zmqRate), zmq_sessions: zn,
        server_cpu_ms_per_call: { mcp: +mcpCpuMs.toFixed(2), zmq_replica: +zmqCpuMs.toFixed(2) }, load_average: loadavg().map((x) => +x.toFixed(1)), errors, rss_mb_before: rssBefore, rss_mb_with_sessions: rssWith,
      },
    };
    console.log(JSON.stringify(out, null, 2));
  } finally {
    zmq.close();
    mcp.stop();
    await bridge.stop();
  }
}

await main();
