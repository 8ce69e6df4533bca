// Which thread should own a replica's socket? A Python DEALER's echo round trip (bench/py/driver.py
// rtt --echo: p50 of N) against three ROUTERs in one process, interleaved, repeated:
//   main    the main thread receives and answers (the floor of today's design),
//   hop     the main thread receives, hands each message to a worker thread and answers with its
//           reply (today's step path: main thread -> engine worker -> main thread),
//   worker  a worker thread owns the socket and answers (no hop).
// Usage: node bench/experiments/socket-owner.mjs   (N=3000 REPS=3; needs the test venv's python)
// Not part of `npm run bench`: it explains the step row (README, "Where a target is missed").
import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { isMainThread, parentPort, Worker, workerData } from "node:worker_threads";
import { pack, unpack } from "msgpackr";
import { Router } from "zeromq";

const echo = (msg) => pack(unpack(msg));

async function serve(sock, handle) {
  for await (const [id, msg] of sock) await sock.send([id, await handle(msg)]);
}

if (!isMainThread) {
  if (workerData.mode === "own") {
    const sock = new Router();
    await sock.bind("tcp://127.0.0.1:*");
    parentPort.postMessage(sock.lastEndpoint);
    // closed from inside before the thread ends: see zmq-worker-terminate.mjs for why
    parentPort.once("message", () => sock.close());
    await serve(sock, echo).catch(() => undefined);
    parentPort.close();
  } else {
    parentPort.on("message", (m) => parentPort.postMessage({ k: m.k, b: echo(m.b) }));
  }
} else {
  const root = fileURLToPath(new URL("../..", import.meta.url));
  const run = promisify(execFile);
  const rtt = async (endpoint) => {
    const { stdout } = await run(`${root}.venv/bin/python`, [`${root}bench/py/driver.py`, "rtt", "--echo", "--endpoints", endpoint, "--n", process.env.N ?? "3000"]);
    return JSON.parse(stdout.trim().split("\n").at(-1)).p50_us;
  };
  const main = new Router();
  await main.bind("tcp://127.0.0.1:*");
  void serve(main, echo);
  const hopWorker = new Worker(new URL(import.meta.url), { workerData: { mode: "hop" } });
  const waiting = new Map();
  let next = 0;
  hopWorker.on("message", (m) => {
    waiting.get(m.k)(m.b);
    waiting.delete(m.k);
  });
  const hop = new Router();
  await hop.bind("tcp://127.0.0.1:*");
  void serve(hop, (b) => new Promise((resolve) => {
    const k = next++;
    waiting.set(k, resolve);
    hopWorker.postMessage({ k, b });
  }));
  const owner = new Worker(new URL(import.meta.url), { workerData: { mode: "own" } });
  const ownerEndpoint = await new Promise((resolve) => owner.once("message", resolve));
  const p50 = { main: [], hop: [], worker: [] };
  for (let rep = 0; rep < Number(process.env.REPS ?? 3); rep++) {
    p50.main.push(await rtt(main.lastEndpoint));
    p50.hop.push(await rtt(hop.lastEndpoint));
    p50.worker.push(await rtt(ownerEndpoint));
  }
  console.log(JSON.stringify({ p50_us: p50 }));
  owner.postMessage("close");
  await new Promise((resolve) => owner.once("exit", resolve));
  await hopWorker.terminate();
  main.close();
  hop.close();
}
