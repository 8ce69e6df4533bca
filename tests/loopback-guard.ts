// Keeps the suite's traffic on loopback (vitest setupFiles): a connect, or a bind to a specific
// address, outside 127.0.0.0/8 and ::1 throws before anything is sent. It wraps the two ways a test
// process opens connections: net.Socket (http, fetch, the MCP SDK, the OpenAI fixture clients) and
// ZeroMQ sockets (the bridge's clients and servers). A wildcard bind (0.0.0.0, ::, `tcp://*`) is
// allowed: it listens and sends nothing; connecting to a wildcard is not. Child processes the tests
// start (serve, mcp, ui) get their addresses from the tests themselves.
import net, { isIP } from "node:net";
import * as zmq from "zeromq";

export class NonLoopbackTraffic extends Error {}

const WILDCARDS = new Set(["0.0.0.0", "::", "*", ""]);

export function isLoopbackHost(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, "").split("%")[0]!.toLowerCase();
  if (h === "localhost") return true;
  if (isIP(h) === 4) return h.startsWith("127.");
  if (isIP(h) === 6) return h === "::1" || h === "0:0:0:0:0:0:0:1" || /^::ffff:127\./.test(h);
  return false; // a host name: it could resolve anywhere
}

/** Loopback hosts refused all the same: lets the guard's own test prove a wrapper is installed
 * without ever aiming at an address outside loopback, should the wrapper be missing. */
export const refusedForTest = new Set<string>();

export function checkHost(host: string, what: string, bind = false): void {
  if (refusedForTest.has(host)) throw new NonLoopbackTraffic(`${what} ${JSON.stringify(host)}: refused for this test`);
  if (isLoopbackHost(host) || (bind && WILDCARDS.has(host.replace(/^\[|\]$/g, "")))) return;
  throw new NonLoopbackTraffic(`${what} ${JSON.stringify(host)}: tests send traffic only to 127.0.0.1 (loopback)`);
}

export function checkEndpoint(endpoint: string, what: string, bind = false): void {
  const m = /^(?:tcp|udp|ws|wss):\/\/(.*)$/.exec(endpoint);
  if (!m) return; // ipc:// and inproc:// stay on this host
  const target = m[1]!.split(";").pop()!; // tcp://source;target: the target is what is reached
  const host = target.startsWith("[") ? target.slice(0, target.indexOf("]") + 1) : target.split(":")[0]!;
  checkHost(host, what, bind);
}

/** The host a net.Socket#connect call reaches (undefined: a Unix socket path). */
function connectHost(args: unknown[]): string | undefined {
  // net.connect hands the socket its arguments already normalised: [[options, cb]]
  const first = Array.isArray(args[0]) ? (args[0] as unknown[])[0] : args[0];
  if (typeof first === "object" && first !== null) {
    const o = first as { path?: string; host?: string };
    if (o.path !== undefined) return undefined;
    return o.host ?? "localhost";
  }
  if (typeof first === "number" || (typeof first === "string" && /^\d+$/.test(first))) return typeof args[1] === "string" ? args[1] : "localhost";
  return undefined; // a path
}

let installed = false;

export function installLoopbackGuard(): void {
  if (installed) return;
  installed = true;
  // the originals, read as property values (they are called with the socket as `this` below)
  const connect = Reflect.get(net.Socket.prototype, "connect") as (this: net.Socket, ...a: unknown[]) => net.Socket;
  Object.defineProperty(net.Socket.prototype, "connect", {
    value(this: net.Socket, ...args: unknown[]) {
      const host = connectHost(args);
      if (host !== undefined) checkHost(host, "socket connect");
      return connect.apply(this, args);
    },
    configurable: true,
    writable: true,
  });
  // the native Socket's methods are read-only: each socket class gets its own wrapping property
  for (const cls of [zmq.Dealer, zmq.Router, zmq.Request, zmq.Reply, zmq.Pair, zmq.Push, zmq.Pull, zmq.Publisher, zmq.Subscriber]) {
    const proto: zmq.Socket = cls.prototype;
    const zconnect = Reflect.get(proto, "connect");
    const zbind = Reflect.get(proto, "bind");
    Object.defineProperty(proto, "connect", { value(this: zmq.Socket, address: string) { checkEndpoint(address, "zmq connect"); zconnect.call(this, address); }, configurable: true, writable: true });
    Object.defineProperty(proto, "bind", { value(this: zmq.Socket, address: string) { checkEndpoint(address, "zmq bind", true); return zbind.call(this, address); }, configurable: true, writable: true });
  }
}

installLoopbackGuard();
