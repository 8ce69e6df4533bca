// The suite's loopback guard (tests/loopback-guard.ts, a vitest setup file): which addresses it
// refuses (pure checks, nothing sent), and that its wrappers are installed on net and zmq sockets,
// proven with a loopback address refused for the test, so a missing wrapper still sends nothing
// off this host.
import net from "node:net";
import { afterEach, expect, test } from "vitest";
import * as zmq from "zeromq";
import { checkEndpoint, checkHost, NonLoopbackTraffic, refusedForTest } from "../loopback-guard.js";

afterEach(() => refusedForTest.clear());

test("addresses outside loopback are refused; loopback passes; a wildcard may be bound, never reached", () => {
  for (const host of ["192.0.2.1", "10.0.0.5", "172.16.0.1", "192.168.1.2", "8.8.8.8", "example.com", "2001:db8::1", "128.0.0.1"]) {
    expect(() => checkHost(host, "test"), host).toThrow(NonLoopbackTraffic);
    expect(() => checkEndpoint(`tcp://${host.includes(":") ? `[${host}]` : host}:5555`, "test"), host).toThrow(NonLoopbackTraffic);
  }
  for (const ep of ["tcp://127.0.0.1:5555", "tcp://127.3.4.5:1", "tcp://localhost:1", "tcp://[::1]:1", "ipc:///tmp/x", "inproc://x"]) checkEndpoint(ep, "test");
  for (const ep of ["tcp://*:*", "tcp://0.0.0.0:0", "tcp://[::]:0"]) {
    expect(() => checkEndpoint(ep, "test", true)).not.toThrow();
    expect(() => checkEndpoint(ep, "test")).toThrow(NonLoopbackTraffic);
  }
});

test("net.connect, net.Socket#connect, fetch and every zmq socket's connect and bind go through the guard", async () => {
  refusedForTest.add("127.0.0.2");
  expect(() => net.connect({ host: "127.0.0.2", port: 9 })).toThrow(NonLoopbackTraffic);
  expect(() => new net.Socket().connect(9, "127.0.0.2")).toThrow(NonLoopbackTraffic);
  await expect(fetch("http://127.0.0.2:9999/")).rejects.toMatchObject({ cause: expect.any(NonLoopbackTraffic) });
  for (const Cls of [zmq.Dealer, zmq.Router, zmq.Request, zmq.Reply, zmq.Pair, zmq.Push, zmq.Pull, zmq.Publisher, zmq.Subscriber]) {
    const s = new Cls();
    try {
      expect(() => s.connect("tcp://127.0.0.2:5555"), Cls.name).toThrow(NonLoopbackTraffic);
      expect(() => s.bind("tcp://127.0.0.2:*"), Cls.name).toThrow(NonLoopbackTraffic);
    } finally {
      s.close();
    }
  }
  refusedForTest.clear();
  const r = new zmq.Router();
  try {
    await r.bind("tcp://127.0.0.1:*"); // loopback passes through to the real bind
    expect(r.lastEndpoint).toMatch(/^tcp:\/\/127\.0\.0\.1:\d+$/);
  } finally {
    r.close();
  }
});
