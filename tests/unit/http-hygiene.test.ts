// Issue 32: the HTTP fronts bound how long a request may take to arrive (set explicitly, not
// Node's 300 s), and a client that aborts its upload is logged as a client abort, not an error.
import { spawn, spawnSync } from "node:child_process";
import { connect, type Socket } from "node:net";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { Writable } from "node:stream";
import { pino } from "pino";
import { afterAll, beforeAll, expect, test } from "vitest";
import { EnvRuntime } from "../../bridge/core/engine/env-runtime.js";
import { McpHttpServer } from "../../bridge/fronts/mcp/mcp-http-server.js";
import { ScenarioPicker } from "../../bridge/fronts/mcp/scenario-picker.js";
import { FIXTURES } from "../helpers.js";

const logs: { level: number; msg: string }[] = [];
let runtime: EnvRuntime;
let server: McpHttpServer;
let port: number;

beforeAll(async () => {
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString().split("\n").filter(Boolean)) logs.push(JSON.parse(line) as { level: number; msg: string });
      done();
    },
  });
  runtime = await EnvRuntime.start({ envs: [FIXTURES], workers: 0 });
  server = new McpHttpServer({ runtime, picker: new ScenarioPicker(runtime.registry, {}), limits: { requestTimeoutMs: 1000 }, logger: pino({ level: "info" }, sink) });
  port = Number(new URL(await server.start()).port);
});
afterAll(async () => {
  await server.stop();
  await runtime.close();
});

function openUpload(): Socket {
  const s = connect(port, "127.0.0.1");
  s.write(`POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: 1000\r\n\r\n{`);
  return s;
}

test("a drip-fed body is cut at the request timeout (408, connection closed)", async () => {
  const s = openUpload();
  let answer = "";
  s.on("data", (d: Buffer) => (answer += d.toString()));
  const drip = setInterval(() => s.write(" "), 100);
  // bounded by the test's own timeout, not a timing threshold: under load it may take longer, never forever
  await new Promise<void>((resolve) => s.once("close", () => resolve()));
  clearInterval(drip);
  expect(answer).toMatch(/^HTTP\/1\.1 408/);
}, 30_000);

test("an aborted upload is logged as a client abort, not as an internal error", async () => {
  const before = logs.length;
  const s = openUpload();
  await new Promise((r) => setTimeout(r, 100));
  s.destroy();
  for (let i = 0; i < 100 && !logs.slice(before).some((l) => l.msg === "client aborted the request"); i++) await new Promise((r) => setTimeout(r, 20));
  const mine = logs.slice(before);
  expect(mine.map((l) => l.msg)).toContain("client aborted the request");
  expect(mine.filter((l) => l.level >= 50)).toEqual([]);
});

test("`envscaler mcp --request-timeout` sets the cut-off (reported by /control/stats); 0 is refused naming the flag", async () => {
  const cli = join(import.meta.dirname, "..", "..", "cli", "main.ts");
  const refused = spawnSync(process.execPath, ["--import", "tsx", cli, "mcp", "--envs", FIXTURES, "--port", "0", "--no-record", "--request-timeout", "0"], { encoding: "utf8" });
  expect(refused.status).not.toBe(0);
  expect(refused.stderr).toContain("--request-timeout must be a positive number of seconds");
  const child = spawn(process.execPath, ["--import", "tsx", cli, "mcp", "--envs", FIXTURES, "--port", "0", "--no-record", "--request-timeout", "1.5"], { stdio: ["ignore", "pipe", "ignore"] });
  try {
    const line = await new Promise<string>((resolve, reject) => {
      createInterface({ input: child.stdout }).on("line", (l) => { if (l.startsWith("{")) resolve(l); });
      child.once("exit", (code) => reject(new Error(`mcp exited (${code}) before serving`)));
    });
    const info = JSON.parse(line) as { control: string; control_token: string };
    const stats = await fetch(`${info.control.replace(/\/$/, "")}/stats`, { headers: { authorization: `Bearer ${info.control_token}` } });
    expect(stats.status).toBe(200);
    expect(((await stats.json()) as { limits: { request_timeout_s: number } }).limits.request_timeout_s).toBe(1.5);
  } finally {
    child.kill("SIGTERM");
  }
}, 60_000);
