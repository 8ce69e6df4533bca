// The Engine seam: where the runtime's episodes run. Two implementations: InThreadEngine (an
// EngineHost in this thread, `workers: 0`) and WorkerEngine (an EngineHost on a worker thread).
// The runtime talks to engines only through this interface; `post` is typed by EngineOps, so the
// reply's value type follows from the op.
import type { EngineOp, ReplyOf, RequestFields } from "./messages.js";
import type { EpisodeRecord } from "./records.js";
import type { DeadlineBoard } from "./watchdog.js";

/** Who a request is for: the engine orders an episode's requests by `id` and counts them in flight. */
export interface EngineOwner {
  readonly id: string;
  /** A number naming the episode to the watchdog (it fits the shared deadline board). */
  readonly slot: number;
  /** Requests posted and not answered yet. */
  inFlight?: number;
}

/** A request posted and not answered yet: what re-posting it elsewhere (a restore) needs. */
export interface Pending<O extends EngineOp = EngineOp> {
  op: O;
  fields: RequestFields<O>;
  episode: EpisodeRecord;
  // a method, so a Pending of one op is a Pending of any (the reply is always its own op's)
  resolve(reply: ReplyOf<O>): void;
}

export interface Engine {
  /** Its place in the pool (a replacement takes the same). */
  readonly index: number;
  /** Settles once it can take requests (its thread started, its sandboxes warmed). */
  readonly ready: Promise<void>;
  /** Episodes placed on it (the pool's placement; a restore moves them). */
  readonly episodes: Set<EpisodeRecord>;
  /** Being stopped, or stopped: a request posted now would never be answered. */
  readonly stopping: boolean;
  /** The board its thread's guest calls publish their deadlines on; null in this thread (the sandbox's fuel checks stop a call at its deadline, and nothing could stop this thread). */
  readonly board: DeadlineBoard | null;
  /** Posts a request; the reply always comes (a refusal if it could not be handed over). */
  post<O extends EngineOp>(episode: EpisodeRecord, op: O, fields: RequestFields<O>): Promise<ReplyOf<O>>;
  /** Stops it (a worker's thread is terminated); requests posted from now on are held unanswered too. */
  stop(): Promise<void>;
  /** The requests it holds unanswered (once stopped: they never will be), handed over for the caller to answer. */
  takeUnanswered(): Pending[];
}

/** A refusal for a request that could not be handed to its engine (structured clone refused it): that request only; nothing ran. */
export function notHandedOver(id: number, e: unknown): { id: number; ok: false; error: { code: "bad_request"; message: string } } {
  const why = e instanceof Error ? e.message : String(e);
  return { id, ok: false, error: { code: "bad_request", message: `the request could not be handed to its engine (${why}); nothing ran` } };
}

/**
 * Registers a request being posted in its engine's `pending` map, counted in flight on its episode
 * until its reply comes; returns the promise that reply settles. Both engines post through it, so
 * the accounting a restore relies on (what is unanswered, per episode) is the same for both.
 */
export function track<O extends EngineOp>(pending: Map<number, Pending>, id: number, episode: EpisodeRecord, op: O, fields: RequestFields<O>): Promise<ReplyOf<O>> {
  episode.inFlight = (episode.inFlight ?? 0) + 1;
  return new Promise<ReplyOf<O>>((answer) => {
    const resolve = (r: ReplyOf<O>) => {
      episode.inFlight!--;
      answer(r);
    };
    pending.set(id, { op, fields, episode, resolve });
  });
}
