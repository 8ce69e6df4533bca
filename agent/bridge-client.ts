import { Dealer } from "zeromq";
import { decodeFrame, encodeFrame } from "../protocol/codec.js";
import type { ErrorCode } from "../protocol/error-codes.js";
import { PROTOCOL_VERSION } from "../protocol/messages.js";
import { expandStep } from "../protocol/step-wire.js";

/** An error reply from the bridge. */
export class BridgeError extends Error {
  override readonly name = "BridgeError";
  constructor(
    readonly code: ErrorCode | "timeout",
    message: string,
  ) {
    super(`${code}: ${message}`);
  }
}

export interface BridgeClientOptions {
  /** Per-request timeout. @unit ms @default 60000 */
  timeoutMs?: number;
  curve?: { serverPublicKey: string; publicKey: string; secretKey: string };
}

type Result = Record<string, unknown>;

/**
 * A TypeScript client of the bridge (the demo, tests and benchmarks use it; trainers use the
 * Python one). One DEALER socket, any number of requests in flight, replies matched by id.
 */
export class BridgeClient {
  private readonly socket = new Dealer();
  private readonly pending = new Map<number, { resolve: (r: Result) => void; reject: (e: Error) => void; timer: NodeJS.Timeout; arrived?: (at: number) => void }>();
  private nextId = 1;
  private sendTail: Promise<void> = Promise.resolve();
  private readonly loop: Promise<void>;
  private readonly timeoutMs: number;

  constructor(readonly endpoint: string, options: BridgeClientOptions = {}) {
    this.timeoutMs = options.timeoutMs ?? 60_000;
    this.socket.linger = 0;
    if (options.curve) {
      this.socket.curveServerKey = options.curve.serverPublicKey;
      this.socket.curvePublicKey = options.curve.publicKey;
      this.socket.curveSecretKey = options.curve.secretKey;
    }
    this.socket.connect(endpoint);
    this.loop = this.receive();
  }

  private async receive(): Promise<void> {
    try {
      for await (const frames of this.socket) {
        const reply = decodeFrame(frames[frames.length - 1]!) as { id: number; ok: boolean; result?: Result; error?: { code: ErrorCode; message: string } };
        const p = this.pending.get(reply.id);
        if (!p) continue;
        this.pending.delete(reply.id);
        clearTimeout(p.timer);
        p.arrived?.(performance.now());
        if (reply.ok) p.resolve(expandStep(reply.result!));
        else p.reject(new BridgeError(reply.error!.code, reply.error!.message));
      }
    } catch {
      /* closed */
    }
  }

  request<T = Result>(op: string, fields: Record<string, unknown> = {}): Promise<T> {
    return this.send<T>(op, fields);
  }

  /**
   * A request, and how long its reply took to reach this client: from the call to the moment the
   * socket reader took the reply in. Unlike timing the awaited promise, that leaves out the time
   * this process's event loop was busy with other work before the caller resumed.
   */
  async requestTimed<T = Result>(op: string, fields: Record<string, unknown> = {}): Promise<{ value: T; ms: number }> {
    const t = performance.now();
    let at = NaN;
    const value = await this.send<T>(op, fields, (x) => (at = x));
    return { value, ms: at - t };
  }

  private send<T>(op: string, fields: Record<string, unknown>, arrived?: (at: number) => void): Promise<T> {
    const id = this.nextId++;
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new BridgeError("timeout", `no reply to ${op} within ${this.timeoutMs} ms`));
      }, this.timeoutMs);
      this.pending.set(id, { resolve: resolve as (r: Result) => void, reject, timer, ...(arrived ? { arrived } : {}) });
      this.sendTail = this.sendTail.then(() => this.socket.send(encodeFrame({ v: PROTOCOL_VERSION, id, op, ...fields }))).catch((e: unknown) => {
        clearTimeout(timer);
        this.pending.delete(id);
        reject(e instanceof Error ? e : new Error(String(e)));
      });
    });
  }

  close(): void {
    for (const p of this.pending.values()) {
      clearTimeout(p.timer);
      p.reject(new BridgeError("timeout", "client closed"));
    }
    this.pending.clear();
    this.socket.close();
    void this.loop;
  }
}
