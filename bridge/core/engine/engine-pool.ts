import type { EnvRegistry } from "../../../envs/format/registry.js";
import type { CallMonitor } from "../sandbox/sandbox-host.js";
import type { Engine } from "./engine.js";
import { InThreadEngine } from "./in-thread-engine.js";
import type { EngineOp, RequestFields, ResultOf } from "./messages.js";
import type { EpisodeRecord } from "./records.js";
import { EpisodeLostError, RuntimeError } from "./runtime-error.js";
import { WorkerEngine } from "./worker-engine.js";
import type { EngineWorkerInput } from "./engine-worker.js";

export interface EnginePoolOptions {
  registry: EnvRegistry;
  envs: string[];
  /** Worker threads; 0: one engine in this thread. */
  workers: number;
  warmSessions: number;
  /** Told when a worker's thread ends without being stopped (a crash). */
  onExit: (engine: Engine) => void;
  /** With `workers: 0`: told of each guest call's deadline in this thread (RuntimeOptions.callMonitor). */
  callMonitor?: CallMonitor | undefined;
  /** RuntimeOptions.scorerThread. */
  scorerThread?: boolean;
}

/**
 * The engines, where each episode runs, and the one way a request reaches one: `request` waits
 * out a restore in progress, answers for an episode that was lost, and otherwise posts to the
 * episode's engine and unwraps the reply into its op's result.
 */
export class EnginePool {
  readonly engines: Engine[] = [];
  closed = false;

  constructor(private readonly options: EnginePoolOptions) {
    if (options.workers === 0) this.engines.push(new InThreadEngine(options.registry, options.warmSessions, options.callMonitor ?? null, options.scorerThread ? options.envs : null));
    else for (let i = 0; i < options.workers; i++) this.engines.push(this.spawn(i));
  }

  get ready(): Promise<void> {
    return Promise.all(this.engines.map((e) => e.ready)).then(() => undefined);
  }

  private spawn(index: number): Engine {
    const input: EngineWorkerInput = { envPaths: this.options.envs, warmSessions: Math.ceil(this.options.warmSessions / this.options.workers), scorerThread: this.options.scorerThread ?? false };
    const engine: Engine = new WorkerEngine(index, input, () => {
      if (!this.closed) this.options.onExit(engine);
    });
    return engine;
  }

  /** A fresh worker in `old`'s place (old is being stopped); the caller moves the episodes. */
  replace(old: Engine): Engine {
    const replacement = this.spawn(old.index);
    this.engines[old.index] = replacement;
    return replacement;
  }

  /** Where a new episode goes: the engine with the fewest. */
  leastLoaded(): Engine {
    return this.engines.reduce((a, b) => (b.episodes.size < a.episodes.size ? b : a));
  }

  /**
   * The engine to post to, once a replacement for a stopped one is in place: a request posted to a
   * stopping worker would never be answered. Null when there is nothing to post to: the episode
   * died with its worker, the pool closed, or the episode was forgotten (closed) before the
   * recovery reached it, so nothing of it remains anywhere.
   */
  async liveEngine(rec: EpisodeRecord): Promise<Engine | null> {
    for (;;) {
      if (rec.restoring) {
        await rec.restoring;
        continue;
      }
      if (rec.dead || this.closed) return null;
      if (!rec.engine.stopping) return rec.engine;
      if (!rec.engine.episodes.has(rec)) return null;
      await new Promise((r) => setTimeout(r, 5));
    }
  }

  /** Runs `op` for the episode on its engine: its result, or a RuntimeError with the engine's code. */
  async request<O extends EngineOp>(rec: EpisodeRecord, op: O, fields: RequestFields<O>): Promise<ResultOf<O>> {
    if (this.closed) throw new RuntimeError("closed", "the runtime is closed");
    const engine = await this.liveEngine(rec);
    if (rec.dead) throw lostError(rec);
    if (!engine) throw new RuntimeError("closed", "the runtime is closed");
    const reply = await engine.post(rec, op, fields);
    // a request the loss of its worker answered (or a restore that failed behind it) reports the loss
    if (!reply.ok) throw rec.dead ? lostError(rec) : new RuntimeError(reply.error.code, reply.error.message);
    if (reply.user_replies) rec.inputs.user_replies.push(...reply.user_replies);
    return reply.value;
  }

  /** Stops every engine; what they held unanswered is refused with `closed`. */
  async close(): Promise<void> {
    this.closed = true;
    await Promise.all(
      this.engines.map(async (e) => {
        await e.stop();
        for (const p of e.takeUnanswered()) p.resolve({ id: 0, ok: false, error: { code: "closed", message: "the runtime closed" } });
      }),
    );
  }
}

/** A lost episode's error: the loss itself until a step has reported it (see EpisodeTable.deathStep), then `episode_done`. */
function lostError(rec: EpisodeRecord): RuntimeError {
  const dead = rec.dead!;
  return rec.deathReported ? new RuntimeError("episode_done", `the episode ended: ${dead.message}`) : new EpisodeLostError(dead.code, dead.message);
}
