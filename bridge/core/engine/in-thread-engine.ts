import type { EnvRegistry } from "../../../envs/format/registry.js";
import type { CallMonitor } from "../sandbox/sandbox-host.js";
import { notHandedOver, track, type Engine, type Pending } from "./engine.js";
import { EngineHost } from "./engine-host.js";
import type { EngineOp, EngineReply, ReplyOf, RequestFields } from "./messages.js";
import type { EpisodeRecord } from "./records.js";

/**
 * The engine of `workers: 0`: an EngineHost in this thread. A request goes straight in, with no
 * batching (there is no hop to amortise) and no copy; the reply comes back through the same
 * pending map a worker's would, so the runtime sees one kind of engine.
 */
export class InThreadEngine implements Engine {
  readonly index = 0;
  readonly ready: Promise<void>;
  readonly episodes = new Set<EpisodeRecord>();
  readonly board = null;
  stopping = false;
  private readonly host: EngineHost;
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;

  constructor(registry: EnvRegistry, warmSessions: number, monitor: CallMonitor | null = null, scorerEnvs: string[] | null = null) {
    this.host = new EngineHost({ registry, reply: (reply) => this.answer(reply), monitor, scorerEnvs });
    this.ready = this.host.warm(warmSessions);
  }

  post<O extends EngineOp>(episode: EpisodeRecord, op: O, fields: RequestFields<O>): Promise<ReplyOf<O>> {
    const id = this.nextId++;
    const reply = track(this.pending, id, episode, op, fields);
    try {
      this.host.accept({ id, op, episode: episode.id, slot: episode.slot, ...fields });
    } catch (e) {
      this.answer(notHandedOver(id, e));
    }
    return reply;
  }

  private answer(reply: EngineReply): void {
    const p = this.pending.get(reply.id);
    if (!p) return;
    this.pending.delete(reply.id);
    p.resolve(reply);
  }

  stop(): Promise<void> {
    // there is no thread to end: its host closes its episodes and disposes its sandboxes
    if (!this.stopping) this.host.close();
    this.stopping = true;
    return Promise.resolve();
  }

  takeUnanswered(): Pending[] {
    const left = [...this.pending.values()];
    this.pending.clear();
    return left;
  }
}
