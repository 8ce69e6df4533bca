// Can the watchdog stop a worker thread that owns a zeromq socket? The engine's watchdog stops the
// thread of a guest call that ignores its deadline (worker.terminate()); if that thread also owned
// the replica's socket, a receive would be pending on it. This starts a worker that binds a
// ROUTER, leaves a receive pending and then hangs (as a stuck guest call would), and terminates it.
// Usage: node bench/experiments/zmq-worker-terminate.mjs; echo $?
// With zeromq 6.8.0 and Node 20 the whole process aborts ("terminate called after throwing an
// instance of 'Napi::Error'", exit 134; zeromq.js issue #411). Without the pending receive the
// same terminate works (PENDING=0).
import { isMainThread, parentPort, Worker } from "node:worker_threads";
import { Router } from "zeromq";

if (!isMainThread) {
  const sock = new Router();
  await sock.bind("tcp://127.0.0.1:*");
  const pending = process.env.PENDING === "0" ? null : sock.receive();
  pending?.catch(() => undefined);
  parentPort.postMessage(sock.lastEndpoint);
  setTimeout(() => {
    for (;;); // the stuck guest call
  }, 50);
  await pending;
} else {
  const worker = new Worker(new URL(import.meta.url));
  const endpoint = await new Promise((resolve) => worker.once("message", resolve));
  await new Promise((resolve) => setTimeout(resolve, 200));
  console.log(`terminating the worker that owns ${endpoint}`);
  await worker.terminate();
  console.log("terminated; the process lives on");
}
