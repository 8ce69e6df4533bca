import { Router } from "zeromq";
import { z85Encode } from "./z85.js";

export const ZAP_DOMAIN = "envscaler";

/**
 * The ZAP (RFC 27) authenticator for CurveZMQ: without one, a CURVE server accepts any client that
 * knows the server's public key. Only client public keys in `allow` get through. One per process,
 * bound where libzmq looks for it; close() unbinds it.
 */
export class ZapHandler {
  private readonly socket = new Router();
  private done: Promise<void> = Promise.resolve();
  rejected = 0;

  private constructor(private readonly allow: ReadonlySet<string>) {}

  /** Resolves once the handler is bound: a CURVE socket must not accept a handshake before that. */
  static async start(allow: Iterable<string>): Promise<ZapHandler> {
    const h = new ZapHandler(new Set(allow));
    await h.socket.bind("inproc://zeromq.zap.01");
    h.done = h.serve();
    return h;
  }

  private async serve(): Promise<void> {
    try {
      for await (const [path, delimiter, version, id, domain, , , mechanism, ...credentials] of this.socket) {
        let status: [string, string] = ["200", "OK"];
        if (version?.toString() !== "1.0") status = ["500", "unsupported ZAP version"];
        else if (mechanism?.toString() !== "CURVE" || credentials.length !== 1 || credentials[0]!.length !== 32) status = ["400", "CURVE required"];
        else if (domain?.toString() !== ZAP_DOMAIN) status = ["400", "unknown domain"];
        else if (!this.allow.has(z85Encode(credentials[0]!))) status = ["400", "client key not allowed"];
        if (status[0] !== "200") this.rejected++;
        await this.socket.send([path!, delimiter!, "1.0", id!, ...status, "", ""]);
      }
    } catch {
      /* closed */
    }
  }

  async close(): Promise<void> {
    this.socket.close();
    await this.done;
  }
}
