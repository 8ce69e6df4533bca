import type { Worker } from "node:worker_threads";
import { notHandedOver, track, type Engine, type Pending } from "./engine.js";
import type { EngineOp, EngineReply, ReplyOf, RequestFields, RequestOf } from "./messages.js";
import type { EpisodeRecord } from "./records.js";
import { DeadlineBoard } from "./watchdog.js";
import { startWorker } from "./worker-thread.js";
import type { EngineWorkerInput } from "./engine-worker.js";

/**
 * An engine on a worker thread (engine-worker.ts). Requests made in the same turn of the event
 * loop cross in one message, and so do the worker's replies: a thread hop costs ~100 µs, so 64
 * pipelined steps must not pay it 64 times. Its guest calls publish their deadlines on `board`
 * for the Restarter's watchdog. `onExit` is told when the thread ends without being stopped.
 */
export class WorkerEngine implements Engine {
  readonly ready: Promise<void>;
  readonly episodes = new Set<EpisodeRecord>();
  readonly board = new DeadlineBoard();
  stopping = false;
  private readonly worker: Worker;
  private readonly pending = new Map<number, Pending>();
  private outbox: RequestOf<EngineOp>[] = [];
  private nextId = 1;

  constructor(
    readonly index: number,
    input: EngineWorkerInput,
    onExit: () => void,
  ) {
    // not the parent's flags: the engine needs none of them
    const worker = (this.worker = startWorker({ base: import.meta.url, name: "engine-worker", data: input, board: this.board, execArgv: [] }));
    this.ready = new Promise<void>((resolve, reject) => {
      worker.once("message", (m: { ready?: boolean }) => {
        if (!m.ready) return;
        worker.off("error", reject);
        resolve();
      });
      worker.once("error", reject);
    });
    worker.on("message", (m: EngineReply[] | { ready: true }) => {
      if (!Array.isArray(m)) return;
      for (const reply of m) {
        const p = this.pending.get(reply.id);
        if (!p) continue;
        this.pending.delete(reply.id);
        p.resolve(reply);
      }
    });
    worker.on("error", () => {
      /* followed by "exit", handled there */
    });
    worker.on("exit", () => {
      if (!this.stopping) onExit();
    });
  }

  post<O extends EngineOp>(episode: EpisodeRecord, op: O, fields: RequestFields<O>): Promise<ReplyOf<O>> {
    const id = this.nextId++;
    const reply = track(this.pending, id, episode, op, fields);
    this.outbox.push({ id, op, episode: episode.id, slot: episode.slot, ...fields });
    if (this.outbox.length === 1) setImmediate(() => this.flush());
    return reply;
  }

  /**
   * Hands the turn's requests to the worker. Copying them (structured clone) can throw; this runs
   * from setImmediate, where a throw would end the process, so a batch that cannot be copied is
   * sent one request at a time and only the request that cannot be copied is refused.
   */
  private flush(): void {
    if (this.outbox.length === 0 || this.stopping) return;
    const batch = this.outbox;
    this.outbox = [];
    try {
      this.worker.postMessage(batch);
      return;
    } catch {
      /* one of them could not be copied: find it below */
    }
    for (const req of batch) {
      try {
        this.worker.postMessage([req]);
      } catch (e) {
        const p = this.pending.get(req.id);
        this.pending.delete(req.id);
        p?.resolve(notHandedOver(req.id, e));
      }
    }
  }

  async stop(): Promise<void> {
    this.stopping = true;
    await this.worker.terminate();
  }

  takeUnanswered(): Pending[] {
    const left = [...this.pending.values()];
    this.pending.clear();
    return left;
  }
}
