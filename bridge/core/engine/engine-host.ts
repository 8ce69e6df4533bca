// The episodes of one engine: requests in, replies out, each episode's requests in order. It runs
// wherever guest code runs: inside an engine worker thread (engine-worker.ts), or in the thread
// that owns the replica's socket (EnvRuntime with `workers: 0`, the serve default), where the fuel
// checks of the sandbox's wasm (wasm-fuel.ts) stop a call at its deadline without a watchdog.
import { EnvRegistry } from "../../../envs/format/registry.js";
import { Episode, EpisodeStateError, type EpisodeSnapshot } from "../episode/episode.js";
import { EnvLoadError, localEnvImage, warmEnv } from "../episode/env-session.js";
import { fromPortable, toPortable, type PortableSnapshot } from "../episode/portable-snapshot.js";
import { bundleStateBase } from "../state/bundle-state.js";
import { ReferenceCache } from "../episode/reference-state.js";
import { OpenAIUserSimulator, UserSimulatorError, type UserConversation, type UserSimulator, type UserSimulatorConfig } from "../episode/user-simulator.js";
import { SandboxFault } from "../sandbox/sandbox-fault.js";
import type { CoreErrorCode } from "../../../protocol/error-codes.js";
import type { StepResult } from "../episode/episode.js";
import type { EngineError, EngineOp, EngineReply, RequestOf, ResultOf } from "./messages.js";
import { SandboxHost, type CallMonitor } from "../sandbox/sandbox-host.js";
import { Scorer } from "./scorer.js";

interface Hosted {
  episode: Episode;
  /** How many of the episode's simulated user replies the runtime has been sent already. */
  repliesSent: number;
}

/** Tells one episode's simulated-user calls apart in the user cache: the same for the episode resumed from a checkpoint. */
const userSalt = (scenarioId: string, seed: number): string => `${scenarioId}|${seed}`;

/** What a handler answers: its op's result, and the simulated user's replies it produced. */
interface Handled<O extends EngineOp> {
  value: ResultOf<O>;
  user_replies?: string[];
}

/** One handler per op: the table the compiler checks against EngineOps (`score` is taken apart, see acceptScore). */
type HandledOp = Exclude<EngineOp, "score">;
type Handlers = { [O in HandledOp]: (req: RequestOf<O>) => Promise<Handled<O>> | Handled<O> };

/** An episode ended by `finish_later`, its score not yet handed out. */
interface Unscored {
  score: (pause?: () => Promise<void>) => Promise<StepResult>;
  slot: number;
  /** The score requests waiting for it (each gets the result). */
  waiting: number[];
  running: boolean;
  /** An urgent request came: the scoring stops yielding to other requests. */
  urgent: boolean;
  /** Its result, when it came before any score request (kept for the first one). */
  done: { ok: true; value: StepResult } | { ok: false; error: EngineError } | null;
}

class RequestError extends Error {
  constructor(
    readonly code: CoreErrorCode,
    message: string,
  ) {
    super(message);
  }
}

export interface EngineHostOptions {
  registry: EnvRegistry;
  /** Where each reply goes, in the order the requests of an episode were accepted. */
  reply: (r: EngineReply) => void;
  /** Wraps the handling of each request (the worker notes whose guest call is running, for its watchdog). */
  around?: <T>(slot: number, run: () => T) => T;
  /** Told of each guest call's deadline (the thread's watchdog), through this engine's sandbox host. */
  monitor?: CallMonitor | null;
  /** The env folders a scorer thread loads: finish_later episodes are scored there (see Scorer); null: in idle turns here. */
  scorerEnvs?: string[] | null;
}

export class EngineHost {
  private readonly registry: EnvRegistry;
  /** This engine's wasm instances and sandboxes: made with the engine, disposed by close(). */
  readonly sandboxes: SandboxHost;
  private readonly references: ReferenceCache;
  private readonly hosted = new Map<string, Hosted>();
  /** Snapshots live in the engine that took them (their images are this thread's memory). */
  private readonly snapshots = new Map<string, EpisodeSnapshot>();
  /**
   * Each episode's requests run one after another, in the order they were accepted: its tail is
   * kept from the moment a request is accepted, so a step posted right behind a reset or restore
   * (as a recovery does) waits for it instead of finding a half-built episode. A fork of a live
   * episode also runs after that episode's earlier requests, and its later ones after it.
   */
  private readonly tails = new Map<string, Promise<unknown>>();
  /** Episodes ended by `finish_later` whose score is pending (see acceptScore). */
  private readonly unscored = new Map<string, Unscored>();
  /** Episodes whose non-urgent score waits for its turn, oldest first (one is scored at a time). */
  private readonly idleScores: string[] = [];
  private idleWake = false;
  /** Where finish_later episodes are scored when not here: started at the first, closed with the host. */
  private readonly scorer: Scorer | null;

  constructor(private readonly options: EngineHostOptions) {
    this.registry = options.registry;
    this.sandboxes = new SandboxHost({ monitor: options.monitor ?? null, label: "EngineHost" });
    this.references = new ReferenceCache(this.sandboxes);
    this.scorer = options.scorerEnvs ? new Scorer(options.scorerEnvs) : null;
  }

  /** Closes every episode still hosted, then disposes the sandbox host (an engine in this thread; a worker's goes with its thread). */
  close(): void {
    for (const h of this.hosted.values()) h.episode.close();
    this.hosted.clear();
    // nothing will score these now: their requests are answered as closed
    for (const u of this.unscored.values()) for (const id of u.waiting) this.options.reply({ id, ok: false, error: { code: "closed", message: "the engine closed before the episode was scored" } });
    this.unscored.clear();
    this.idleScores.length = 0;
    void this.scorer?.close();
    this.snapshots.clear();
    this.sandboxes.dispose();
  }

  /** Readies every env's image and `sessions` sandboxes; an env that does not load is reported by its first reset instead. */
  async warm(sessions: number): Promise<void> {
    if (sessions > 0) for (const bundle of this.registry.list()) await warmEnv(this.sandboxes, bundle, sessions).catch(() => undefined);
  }

  accept<O extends EngineOp>(req: RequestOf<O>): void {
    if (req.op === "score") {
      // after the episode's finish_later, if that has not run yet; never itself a tail (nothing follows it)
      const r = req as RequestOf<"score">;
      const tail = this.tails.get(req.episode);
      if (tail) void tail.then(() => this.acceptScore(r));
      else this.acceptScore(r);
      return;
    }
    // a fork of a live episode also waits for that episode's requests (only a fork names one)
    const source = "from_episode" in req && typeof req.from_episode === "string" ? req.from_episode : undefined;
    const tail = this.tails.get(req.episode);
    const sourceTail = source !== undefined ? this.tails.get(source) : undefined;
    const handled = req as RequestOf<HandledOp>; // score requests went to acceptScore above
    const handle = () => (this.options.around ? this.options.around(req.slot, () => this.handle(handled)) : this.handle(handled));
    const run = () =>
      handle().then(
        (r): EngineReply => ({ id: req.id, ok: true, value: r.value, ...(r.user_replies?.length ? { user_replies: r.user_replies } : {}) }),
        (e): EngineReply => ({ id: req.id, ok: false, error: toError(e) }),
      );
    // an episode with nothing queued starts at once (the common case: one step in flight)
    const before = tail && sourceTail ? Promise.all([tail, sourceTail]) : (tail ?? sourceTail);
    const done = (before ? before.then(run) : run()).then(this.options.reply);
    this.tails.set(req.episode, done);
    if (source !== undefined) this.tails.set(source, done);
    // nothing of the episode is left here after a close, or after a reset/restore/fork that failed;
    // an import's id names no episode at all, so nothing is ordered behind it either
    void done.then(() => {
      if (this.tails.get(req.episode) === done && (req.op === "close" || !this.hosted.has(req.episode))) this.tails.delete(req.episode);
    });
  }

  /**
   * A score request for an episode ended by finish_later. The reply of the reset that ended it has
   * gone before. A non-urgent score starts in a later turn of the event loop (setImmediate: after
   * the replies of this turn have gone and the requests that arrived meanwhile have run) and
   * yields the same way between its checks, so a request arriving meanwhile waits for one check at
   * most, not for the scoring; nothing waits for requests that are themselves waiting (a simulated
   * user's reply), as they use no CPU here. An urgent one (a client asked for the result) runs now
   * without yielding. Every request for the episode gets the one result.
   */
  private acceptScore(req: RequestOf<"score">): void {
    const u = this.unscored.get(req.episode);
    if (!u) {
      this.options.reply({ id: req.id, ok: false, error: { code: "unknown_episode", message: `episode ${req.episode} has no pending score on this engine` } });
      return;
    }
    if (u.done) {
      this.unscored.delete(req.episode);
      this.options.reply({ id: req.id, ...u.done });
      return;
    }
    u.waiting.push(req.id);
    if (req.urgent) {
      u.urgent = true;
      this.startScore(req.episode, u);
    } else if (!u.running) {
      this.idleScores.push(req.episode);
      this.wakeIdle();
    }
  }

  private startScore(episodeId: string, u: Unscored): void {
    if (u.running) return;
    u.running = true;
    // read at each pause: an urgent request for a score under way makes the rest run straight on
    const pause = () => (u.urgent ? Promise.resolve() : new Promise<void>((resolve) => setImmediate(resolve)));
    const run = () => u.score(pause);
    const scored = this.options.around ? this.options.around(u.slot, run) : run();
    void scored.then(
      (value) => this.scoreDone(episodeId, u, { ok: true, value }),
      (e: unknown) => this.scoreDone(episodeId, u, { ok: false, error: toError(e) }),
    );
  }

  private scoreDone(episodeId: string, u: Unscored, r: { ok: true; value: StepResult } | { ok: false; error: EngineError }): void {
    if (this.unscored.get(episodeId) !== u) return; // the engine closed meanwhile: answered then
    if (u.waiting.length === 0) {
      u.done = r; // no request for it yet: the first one takes it
      return;
    }
    this.unscored.delete(episodeId);
    for (const id of u.waiting) this.options.reply({ id, ...r });
    this.wakeIdle();
  }

  /** Starts the oldest idle score in a later turn (after this turn's replies have gone). */
  private wakeIdle(): void {
    if (this.idleWake || this.idleScores.length === 0) return;
    this.idleWake = true;
    setImmediate(() => {
      this.idleWake = false;
      // one at a time: the next starts when this one is done (scoreDone)
      if ([...this.unscored.values()].some((u) => u.running && !u.urgent)) return;
      while (this.idleScores.length > 0) {
        const id = this.idleScores.shift()!;
        const u = this.unscored.get(id);
        if (u && !u.running) {
          this.startScore(id, u);
          return;
        }
      }
    });
  }

  private episodeOptions(episodeId: string, scenarioId: string) {
    const found = this.registry.scenario(scenarioId);
    if (!found) throw new RequestError("unknown_scenario", `no scenario ${scenarioId}`);
    const { bundle, scenario } = found;
    return { bundle, scenario, episodeId, reference: (seed: number) => this.references.get(bundle, scenario.id, seed) };
  }

  private async fork(req: RequestOf<"fork">): Promise<Handled<"fork">> {
    let snap: EpisodeSnapshot | undefined;
    if (req.from_snapshot !== undefined) {
      snap = this.snapshots.get(req.from_snapshot);
      if (!snap) throw new RequestError("unknown_snapshot", `no snapshot ${req.from_snapshot} on this engine`);
    } else {
      const h = this.hosted.get(req.from_episode ?? "");
      if (!h) throw new RequestError("unknown_episode", `no episode ${req.from_episode} on this engine`);
      snap = h.episode.snapshot(false);
    }
    const o = this.episodeOptions(req.episode, snap.scenarioId);
    const episode = await Episode.fromSnapshot({ bundle: o.bundle, scenario: o.scenario, episodeId: req.episode, reference: () => o.reference(snap.seed), sandboxes: this.sandboxes }, snap);
    this.hosted.set(req.episode, { episode, repliesSent: episode.inputs.user_replies.length });
    // the tools the fork shows are its source's at that point (a multi-turn task may have added some)
    return { value: { step: snap.steps, state_hash: snap.stateHash, done: false, tool_names: snap.progress.visibleTools.map((t) => t.function.name) } };
  }

  /**
   * An episode lost with its worker, rebuilt here: copied from its checkpoint when it has one (else
   * reset anew), then the actions since re-run with the simulated user's recorded replies, so no
   * LLM is asked again. Exact, or refused: the state hash must come out as the pool last saw it.
   */
  private async restore(req: RequestOf<"restore">): Promise<Handled<"restore">> {
    const { inputs, from } = req;
    let episode: Episode;
    if (from) {
      const o = this.episodeOptions(req.episode, from.scenarioId);
      const resume = (c: UserConversation) =>
        req.user ? OpenAIUserSimulator.resume(o.scenario.task, o.scenario.user_instructions ?? "", req.user, { messages: c.messages, prefill: [...c.prefill, ...inputs.user_replies] }, userSalt(o.scenario.id, from.seed)) : undefined;
      const snap = fromPortable(from, bundleStateBase(o.bundle, o.scenario.id), resume);
      episode = await Episode.fromSnapshot({ bundle: o.bundle, scenario: o.scenario, episodeId: req.episode, reference: () => o.reference(from.seed), sandboxes: this.sandboxes }, snap);
    } else {
      episode = this.makeEpisode(req.episode, inputs.scenario_id, inputs.seed, req.user, [...inputs.user_replies]);
    }
    this.hosted.set(req.episode, { episode, repliesSent: 0 });
    try {
      let hash = from ? from.stateHash : (await episode.reset()).info.state_hash;
      for (const action of inputs.actions) hash = (await episode.step(action)).info.state_hash;
      this.hosted.get(req.episode)!.repliesSent = episode.inputs.user_replies.length;
      if (hash !== req.state_hash) throw new RequestError("env_crashed", `the episode could not be restored exactly (state hash ${hash} != ${req.state_hash})`);
      return { value: { restored: true, steps: inputs.actions.length } };
    } catch (e) {
      this.hosted.delete(req.episode);
      episode.close();
      throw e;
    }
  }

  /**
   * Holds a snapshot another replica exported. Its image is guest memory from a client, so it
   * must be an image of this env as this engine would make it (same sandbox mode, limits, stack
   * budget and memory cap), its pages inside its memory: only then is it restorable here. The
   * snapshot's own size is recomputed, not taken from the blob.
   */
  private async importSnapshot(req: RequestOf<"import_snapshot">): Promise<Handled<"import_snapshot">> {
    const from = req.from;
    const o = this.episodeOptions(req.episode, from.scenarioId);
    const local = await localEnvImage(this.sandboxes, o.bundle);
    const img = from.image;
    const m = img.machine;
    const incompatible = (why: string) => new RequestError("snapshot_incompatible", `blob: ${why}; export it from a bridge of the same version and env`);
    const same = (Object.keys(local.limits) as (keyof typeof local.limits)[]).every((k) => img.limits[k] === local.limits[k]) && Object.keys(img.limits).length === Object.keys(local.limits).length;
    if (img.mode !== local.mode || !same) throw incompatible(`its sandbox limits ${JSON.stringify(img.limits)} are not this bridge's ${JSON.stringify(local.limits)} for ${o.bundle.id}`);
    if (img.stackBytes !== local.stackBytes) throw incompatible(`its guest stack budget (${img.stackBytes} bytes) is not this engine's (${local.stackBytes})`);
    if (m.maxBytes !== local.machine.maxBytes || m.memoryBytes > m.maxBytes || m.memoryBytes % 65536 !== 0) throw incompatible(`its memory (${m.memoryBytes} of ${m.maxBytes} bytes) does not fit this env's sandbox (${local.machine.maxBytes} bytes)`);
    let end = 0;
    let held = 0;
    for (const [offset, bytes] of m.pages) {
      if (offset < end || offset + bytes.length > m.memoryBytes) throw new RequestError("bad_request", `blob: a memory page at ${offset} overlaps another or lies outside the image's ${m.memoryBytes} bytes`);
      end = offset + bytes.length;
      held += bytes.length;
    }
    if (from.user && !req.user) throw incompatible("its episode has a simulated user and this bridge has none (serve --user-model)");
    const resume = (c: UserConversation) => (req.user ? OpenAIUserSimulator.resume(o.scenario.task, o.scenario.user_instructions ?? "", req.user, c, userSalt(o.scenario.id, from.seed)) : undefined);
    const portable: PortableSnapshot = { ...from, image: { ...img, machine: { ...m, bytes: held } }, bytes: held };
    const snap = fromPortable(portable, bundleStateBase(o.bundle, o.scenario.id), resume);
    this.snapshots.set(req.snapshot, snap);
    return { value: { step: snap.steps, bytes: snap.bytes, state_hash: snap.stateHash } };
  }

  private makeEpisode(episodeId: string, scenarioId: string, seed: number, user: UserSimulatorConfig | null, prefill: string[] = []): Episode {
    const o = this.episodeOptions(episodeId, scenarioId);
    let sim: UserSimulator | undefined;
    if (o.scenario.mode === "conversation" && user) sim = new OpenAIUserSimulator(o.scenario.task, o.scenario.user_instructions ?? "", user, prefill, userSalt(o.scenario.id, seed));
    return new Episode({ bundle: o.bundle, scenario: o.scenario, seed, episodeId, user: sim, reference: () => o.reference(seed), sandboxes: this.sandboxes });
  }

  private static newReplies(h: Hosted): string[] {
    const all = h.episode.inputs.user_replies;
    const out = all.slice(h.repliesSent);
    h.repliesSent = all.length;
    return out;
  }

  /**
   * Runs a request by its op's handler; one that throws at once is a rejected promise like any
   * other failure. Not an async function: returning the step handler's promise from one would cost
   * every step extra turns of the microtask queue.
   */
  private handle<O extends HandledOp>(req: RequestOf<O>): Promise<Handled<O>> {
    const handler: Handlers[O] = this.handlers[req.op];
    try {
      return Promise.resolve(handler(req));
    } catch (e) {
      return Promise.reject(e instanceof Error ? e : new Error(String(e)));
    }
  }

  private hostedFor(req: { episode: string }): Hosted {
    const h = this.hosted.get(req.episode);
    if (!h) throw new RequestError("unknown_episode", `no episode ${req.episode} on this engine`);
    return h;
  }

  private readonly handlers: Handlers = {
    reset: async (req) => {
      const episode = this.makeEpisode(req.episode, req.scenario_id, req.seed, req.user);
      const h: Hosted = { episode, repliesSent: 0 };
      this.hosted.set(req.episode, h);
      try {
        const first = await episode.reset();
        // the env's introduction, rules and opening tools are the runtime's to add (it has the same
        // registry): ~8 KB of objects a reset need not hand across
        const { introduction: _i, rules: _r, tools: _t, ...info } = first.info;
        return { value: { observation: first.observation, info }, user_replies: EngineHost.newReplies(h) };
      } catch (e) {
        this.hosted.delete(req.episode);
        episode.close();
        throw e;
      }
    },
    restore: (req) => this.restore(req),
    fork: (req) => this.fork(req),
    drop_snapshot: (req) => ({ value: this.snapshots.delete(req.snapshot) }),
    import_snapshot: (req) => this.importSnapshot(req),
    export_snapshot: (req) => {
      if (req.snapshot === undefined) return { value: toPortable(this.hostedFor(req).episode.snapshot(true)) };
      const held = this.snapshots.get(req.snapshot);
      if (!held) throw new RequestError("unknown_snapshot", `no snapshot ${req.snapshot} on this engine`);
      return { value: toPortable(held) };
    },
    checkpoint: (req) => ({ value: toPortable(this.hostedFor(req).episode.snapshot(true)) }),
    snapshot: (req) => {
      const snap = this.hostedFor(req).episode.snapshot(true);
      this.snapshots.set(req.snapshot, snap);
      return { value: { step: snap.steps, bytes: snap.bytes, state_hash: snap.stateHash } };
    },
    step: async (req) => {
      const h = this.hostedFor(req);
      return { value: await h.episode.step(req.action), user_replies: EngineHost.newReplies(h) };
    },
    finish: async (req) => ({ value: await this.hostedFor(req).episode.finish() }),
    finish_later: (req) => {
      const { episode } = this.hostedFor(req);
      const { step, state_hash, job, score } = episode.finishLater();
      // closed now: the scoring reads only the views finishLater captured
      episode.close();
      this.hosted.delete(req.episode);
      const scorer = this.scorer;
      const u: Unscored = { score: scorer ? () => scorer.score(job) : score, slot: req.slot, waiting: [], running: false, urgent: false, done: null };
      this.unscored.set(req.episode, u);
      // on a thread of its own it starts now (that thread keeps its own order); here, in idle turns (acceptScore)
      if (scorer) this.startScore(req.episode, u);
      return { value: { step, state_hash } };
    },
    state: (req) => ({ value: this.hostedFor(req).episode.stateJson() }),
    close: (req) => {
      this.hostedFor(req).episode.close();
      this.hosted.delete(req.episode);
      return { value: null };
    },
  };
}

function toError(e: unknown): EngineError {
  if (e instanceof RequestError) return { code: e.code, message: e.message };
  if (e instanceof EpisodeStateError) return { code: e.code, message: e.message };
  if (e instanceof EnvLoadError) return { code: "env_load_failed", message: e.message };
  if (e instanceof SandboxFault) return { code: e.code, message: e.message };
  if (e instanceof UserSimulatorError) return { code: "user_simulator_failed", message: e.message };
  return { code: "internal_error", message: e instanceof Error ? e.message : String(e) };
}
