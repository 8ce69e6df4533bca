import { existsSync } from "node:fs";
import { connect } from "node:net";

/** Nothing accepts connections at a bridge endpoint: no bridge runs there (a stale connection file, a typo). */
export class BridgeNotRunning extends Error {
  override readonly name = "BridgeNotRunning";
}

/**
 * Rejects with BridgeNotRunning when nothing listens at a `tcp://` or `ipc://` endpoint.
 *
 * ZeroMQ connects lazily: a client of an endpoint nobody serves learns of it only when its first
 * request times out (a rollout's is 10 minutes). The operating system knows at once, so ask it.
 * Only a definite "nobody is there" (connection refused, unknown host, no socket file) rejects; a
 * slow or filtered host, and endpoints this cannot parse, are left to the request timeout.
 */
export async function checkReachable(endpoint: string, timeoutMs = 3000): Promise<void> {
  const hint = `is a bridge running at ${endpoint}? Start one with \`npx envscaler serve --connection-file FILE\` and pass that file`;
  if (endpoint.startsWith("ipc://")) {
    const path = endpoint.slice("ipc://".length);
    if (path && !path.startsWith("@") && !existsSync(path)) throw new BridgeNotRunning(`cannot reach the bridge: the socket ${path} does not exist; ${hint}`);
    return;
  }
  if (!endpoint.startsWith("tcp://")) return;
  let host: string;
  let port: number;
  try {
    const url = new URL(endpoint);
    host = url.hostname.replace(/^\[(.*)\]$/, "$1"); // [::1] -> ::1
    port = Number(url.port);
  } catch {
    return; // "tcp://*:*" and the like are for binding; ZeroMQ reports them
  }
  if (!host || host === "*" || !Number.isInteger(port) || port <= 0) return;
  await new Promise<void>((resolve, reject) => {
    const socket = connect({ host, port });
    const done = (e?: Error) => {
      socket.destroy();
      if (e) reject(e);
      else resolve();
    };
    socket.setTimeout(timeoutMs, () => done());
    socket.once("connect", () => done());
    socket.once("error", (e: NodeJS.ErrnoException) => {
      if (e.code === "ECONNREFUSED") done(new BridgeNotRunning(`cannot reach the bridge: connection to ${endpoint} refused; ${hint}`));
      else if (e.code === "ENOTFOUND" || e.code === "EAI_AGAIN") done(new BridgeNotRunning(`cannot reach the bridge: unknown host in ${endpoint}; ${hint}`));
      else done(); // a firewall, an unreachable network: the request timeout gives the verdict
    });
  });
}
