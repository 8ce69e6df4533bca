import { randomUUID } from "node:crypto";
import { Worker } from "node:worker_threads";
import { EnvRegistry } from "../../envs/format/registry.js";
import type { EpisodeInputs, ResetInfo, StepResult, Observation } from "../episode/episode.js";
import { openingTools } from "../episode/opening-tools.js";
import type { PortableSnapshot } from "../episode/portable-snapshot.js";
import { PROTOCOL_VERSION } from "../../protocol/messages.js";
import { decodeSnapshotPayload, encodeSnapshotBlob, readSnapshotBlobHeader } from "./snapshot-blob.js";
import type { ToolSchema } from "../../envs/format/bundle-schema.js";
import type { UserSimulatorConfig } from "../episode/user-simulator.js";
import type { TrajectoryWriter } from "../record/trajectory-writer.js";
import { ENGINE_STACK_MB, MAX_CALLS_PER_ACTION } from "../sandbox/limits.js";
import { MAX_ACTION_DEPTH, valueShape } from "../episode/action-limits.js";
import { EngineHost } from "./engine-host.js";
import { workerModule } from "./worker-module.js";
import { WATCH_DEADLINE, WATCH_EPISODE, type EngineReply, type EngineRequest } from "./messages.js";

/** A request the runtime could not serve; `code` is one of the protocol's error codes. */
export class RuntimeError extends Error {
  override readonly name = "RuntimeError";
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

export interface RuntimeOptions {
  /** Bundle folders, or folders of bundles. */
  envs: string[];
  /**
   * Engine worker threads; episodes are spread over them. 0: episodes run in this thread, with no
   * thread hop and no watchdog (the sandbox's fuel checks stop a guest call at its deadline
   * wherever it is); give this thread a large stack (ENGINE_STACK_MB) so the guest gets a full
   * one (see safeGuestStackBytes). @default 1
   */
  workers?: number;
  /** The simulated user's endpoint for conversation scenarios; null: conversation episodes have no user. */
  user?: UserSimulatorConfig | null;
  /** How long past a guest call's own deadline before the watchdog stops its worker. @unit ms @default 1000 */
  hardStopGraceMs?: number;
  /** Restarts of one worker allowed within a minute before its episodes are failed instead. @default 10 */
  maxRestartsPerMinute?: number;
  /** Where every episode is recorded (reset, each step, the end); null: not recorded. The runtime does not own it. */
  recorder?: TrajectoryWriter | null;
  /** The largest action a step takes (its size as JSON, estimated). @unit bytes @default 1 MiB */
  maxActionBytes?: number;
  /** Actions one episode keeps for exact restore and replay, in total. @unit bytes @default 64 MiB */
  maxEpisodeInputBytes?: number;
  /** Hard stops (a guest call the watchdog had to stop) one scenario may cause before it is quarantined. @default 2 */
  quarantineAfter?: number;
  /**
   * Episodes this runtime readies sandboxes for before it reports ready (spread over the workers):
   * every env's image is built and that many wasm instances made, so a first burst of that many
   * resets instantiates nothing. Each costs a little memory while unused (about 0.2 MB). @default 0
   */
  warmSessions?: number;
  /**
   * With engine worker threads (`workers` >= 1): every this many steps an episode's snapshot is
   * copied to this thread as its checkpoint, so if the watchdog has to stop its worker the episode
   * is restored from that copy and re-runs at most this many steps, not its whole history. Each
   * checkpoint holds a copy of the sandbox (about 0.4 MB for library-v1; one per episode, replaced
   * by the next); an episode shorter than this takes none. 0: never (restores re-run every step).
   * @default 64
   */
  checkpointEvery?: number;
  /** Told each time the watchdog stops an engine worker (for the replica's log): whose call overran, and how many episodes are being restored. */
  onHardStop?: (event: { scenario_id: string | null; episode_id: string | null; restoring: number; snapshots_lost: number }) => void;
  /** Snapshots one episode may hold at once. @default 32 */
  maxSnapshotsPerEpisode?: number;
  /** Memory all snapshots of this runtime may hold together. @unit bytes @default 1 GiB */
  maxSnapshotBytes?: number;
}

/** What an episode's reset recorded, repeated in the start record of each fork of it so `replay` can re-execute the fork. */
type Opening = Pick<ResetInfo, "env_hash" | "scenario_hash" | "introduction" | "rules" | "tools"> & { observation: Observation };

/** A snapshot held by an engine worker; the runtime keeps what restoring it after a worker loss would need. */
interface SnapshotRecord {
  id: string;
  engine: Engine;
  owner: EpisodeRecord;
  inputs: EpisodeInputs;
  opening?: Opening;
  stateHash: string;
  step: number;
  bytes: number;
  /** Its engine worker was stopped, and the snapshot with it: kept only to say so until dropped (it no longer counts against any limit). */
  lost?: boolean;
  /** Set for a snapshot imported from another replica: who imported it (its count is theirs) and when it was last used (idle ones are dropped). */
  imported?: { holder: string; lastUsed: number };
}

export interface ForkResult {
  episode_id: string;
  step: number;
  state_hash: string;
  env_id: string;
  scenario_id: string;
  seed: number;
  /** The tools the episode shows now: its source's at the fork (multi-turn tasks add tools as turns go). */
  tools: ToolSchema[];
  forked_from: { episode_id?: string; snapshot_id?: string; step: number };
}

export interface ResetResult {
  episode_id: string;
  observation: Observation;
  info: ResetInfo;
}

type Op = EngineRequest["op"];
type RequestBody = { op: Op } & Record<string, unknown>;

interface Pending {
  body: RequestBody;
  episode: EpisodeRecord;
  resolve: (reply: EngineReply) => void;
}

interface EpisodeRecord {
  id: string;
  slot: number;
  engine: Engine;
  inputs: EpisodeInputs;
  stateHash: string;
  opening?: Opening;
  /** The episode ended (terminal step or finish): recorded, so close() need not record it again. */
  ended?: boolean;
  /** Estimated JSON bytes of the actions kept in `inputs`. */
  inputBytes?: number;
  /** The episode as it was after `actions` of its acknowledged actions (and `replies` user replies): restores start here. */
  checkpoint?: { snapshot: PortableSnapshot; actions: number; replies: number };
  /** A checkpoint was asked for and has not come back yet. */
  checkpointing?: boolean;
  /** Requests of this episode posted to its engine and not answered yet. */
  inFlight?: number;
  /** Snapshots this episode took (dropped with it). */
  snapshots: Set<SnapshotRecord>;
  /** Snapshots of this episode being taken now (they count against maxSnapshotsPerEpisode already). */
  snapshotsTaking?: number;
  /** The largest snapshot this episode took: what the next one reserves before it is taken. */
  lastSnapshotBytes?: number;
  /** Set when the episode was lost (its worker died on it): every later request gets this error. */
  dead?: { code: string; message: string };
  deathReported?: boolean;
  /** Set while the episode is being restored on a replacement worker. */
  restoring?: Promise<void>;
  /** How many times it was restored (a recovery interrupted by another one knows it is stale). */
  restores?: number;
}

interface Engine {
  index: number;
  /** The engine's thread, or null for the engine that runs in this thread (`workers: 0`). */
  worker: Worker | null;
  /** The in-thread engine's episodes (null for a worker thread's). */
  host: EngineHost | null;
  watch: Float64Array;
  ready: Promise<void>;
  pending: Map<number, Pending>;
  episodes: Set<EpisodeRecord>;
  restarts: number[];
  stopping: boolean;
  /** Requests waiting for this turn's flush to the worker. */
  outbox: (RequestBody & { id: number; slot: number })[];
}

/**
 * The library entry point: episodes of the bundled scenarios, run in sandboxes in this thread
 * (`workers: 0`) or on engine worker threads. Every guest call ends at its deadline by itself (the
 * sandbox's fuel checks reach into native builtins too). As a backstop, a watchdog stops a worker
 * whose guest call still overran its deadline by the grace; that call's episode ends with
 * `env_timeout`, and every other episode on the worker is restored on a fresh one from its last
 * checkpoint (see checkpointEvery) by re-executing its inputs since, which the sandbox's seeded
 * randomness and virtual clock make exact.
 */
export class EnvRuntime {
  readonly registry: EnvRegistry;
  private readonly engines: Engine[] = [];
  private readonly episodes = new Map<string, EpisodeRecord>();
  private readonly snapshots = new Map<string, SnapshotRecord>();
  private snapshotBytes = 0;
  /** Bytes reserved by snapshots being taken (see snapshot()). */
  private snapshotReserved = 0;
  /** Hard stops per scenario, and the scenarios refused from then on (with why). */
  private readonly hardStopsOf = new Map<string, number>();
  private readonly quarantined = new Map<string, string>();
  private nextRequest = 1;
  private nextSlot = 1;
  private watchdog: NodeJS.Timeout | undefined;
  private closed = false;
  /** `replayed_steps`: actions re-run by restores (those since each restored episode's checkpoint). */
  readonly counters = { hard_stops: 0, restored: 0, lost: 0, replayed_steps: 0 };

  private constructor(private readonly options: RuntimeOptions) {
    this.registry = EnvRegistry.load(options.envs);
  }

  static async start(options: RuntimeOptions): Promise<EnvRuntime> {
    const rt = new EnvRuntime(options);
    if (options.workers === 0) rt.engines.push(rt.inThread());
    else for (let i = 0; i < Math.max(1, options.workers ?? 1); i++) rt.engines.push(rt.spawn(i, []));
    try {
      await Promise.all(rt.engines.map((e) => e.ready));
    } catch (e) {
      await rt.close();
      throw e;
    }
    rt.watchdog = setInterval(() => rt.checkDeadlines(), 100);
    rt.watchdog.unref();
    return rt;
  }

  /** The engine of `workers: 0`: an EngineHost in this thread, answering through the same pending map as a worker. */
  private inThread(): Engine {
    const engine: Engine = { index: 0, worker: null, host: null, watch: new Float64Array(2), ready: Promise.resolve(), pending: new Map(), episodes: new Set(), restarts: [], stopping: false, outbox: [] };
    engine.host = new EngineHost({
      registry: this.registry,
      reply: (reply) => {
        const p = engine.pending.get(reply.id);
        if (!p) return;
        engine.pending.delete(reply.id);
        p.resolve(reply);
      },
    });
    engine.ready = engine.host.warm(this.options.warmSessions ?? 0);
    return engine;
  }

  private spawn(index: number, restarts: number[]): Engine {
    const watch = new Float64Array(new SharedArrayBuffer(16));
    const worker = new Worker(workerModule(import.meta.url, "engine-worker"), {
      workerData: { envPaths: this.options.envs, watch: watch.buffer, warmSessions: Math.ceil((this.options.warmSessions ?? 0) / Math.max(1, this.options.workers ?? 1)) },
      // not the parent's flags: the engine needs none of them
      execArgv: [],
      // the sandbox's stack budget is derived from this (see safeGuestStackBytes)
      resourceLimits: { stackSizeMb: ENGINE_STACK_MB },
    });
    const engine: Engine = { index, worker, host: null, watch, ready: Promise.resolve(), pending: new Map(), episodes: new Set(), restarts, stopping: false, outbox: [] };
    engine.ready = new Promise<void>((resolve, reject) => {
      const onMessage = (m: unknown) => {
        if ((m as { ready?: boolean }).ready) {
          worker.off("error", reject);
          resolve();
        }
      };
      worker.once("message", onMessage);
      worker.once("error", reject);
    });
    worker.on("message", (m: EngineReply[] | { ready: true }) => {
      if (!Array.isArray(m)) return;
      for (const reply of m) {
        const p = engine.pending.get(reply.id);
        if (!p) continue;
        engine.pending.delete(reply.id);
        p.resolve(reply);
      }
    });
    worker.on("error", () => {
      /* followed by "exit", handled there */
    });
    worker.on("exit", () => {
      if (!engine.stopping && !this.closed) void this.recover(engine, null);
    });
    return engine;
  }

  private checkDeadlines(): void {
    const grace = this.options.hardStopGraceMs ?? 1000;
    for (const engine of this.engines) {
      const deadline = engine.watch[WATCH_DEADLINE]!;
      if (deadline !== 0 && Date.now() > deadline + grace && !engine.stopping) {
        this.counters.hard_stops++;
        void this.recover(engine, engine.watch[WATCH_EPISODE]!);
      }
    }
  }

  /**
   * Replaces a dead or stuck worker and restores its episodes, except `culprit`'s. Every request
   * the old worker held is answered: those of restored episodes are re-posted to the new worker
   * behind their episode's restore (in their order, without waiting here, so a slow or hanging
   * re-run cannot hold up the others; if the new worker is stopped too, its own recovery takes
   * them over), and those of episodes closed meanwhile are answered here.
   */
  private async recover(engine: Engine, culprit: number | null): Promise<void> {
    engine.stopping = true;
    await engine.worker?.terminate();
    const now = Date.now();
    const restarts = [...engine.restarts.filter((t) => now - t < 60_000), now];
    const replacement = this.spawn(engine.index, restarts);
    this.engines[engine.index] = replacement;
    let giveUp = restarts.length > (this.options.maxRestartsPerMinute ?? 10);
    try {
      await replacement.ready;
    } catch {
      giveUp = true;
    }
    const unanswered = [...engine.pending.values()];
    engine.pending.clear();
    const stuck = [...engine.episodes, ...unanswered.map((p) => p.episode)].find((rec) => rec.slot === culprit);
    if (stuck) this.noteHardStop(stuck.inputs.scenario_id);
    let snapshotsLost = 0;
    for (const snap of this.snapshots.values()) {
      if (snap.engine !== engine || snap.lost) continue;
      snap.lost = true;
      this.snapshotBytes -= snap.bytes;
      snapshotsLost++;
    }
    if (culprit !== null) {
      const restoring = giveUp ? 0 : [...engine.episodes].filter((rec) => rec !== stuck).length;
      this.options.onHardStop?.({ scenario_id: stuck?.inputs.scenario_id ?? null, episode_id: stuck?.id ?? null, restoring, snapshots_lost: snapshotsLost });
    }
    for (const p of unanswered) {
      if (engine.episodes.has(p.episode)) continue;
      // a closed episode's sandbox and snapshots went with the worker, which is what close and drop ask for
      p.resolve(p.body.op === "close" || p.body.op === "drop_snapshot"
        ? { id: 0, ok: true, value: null }
        : { id: 0, ok: false, error: { code: "unknown_episode", message: `episode ${p.episode.id} was closed while this request waited on a stopped engine worker` } });
    }
    for (const rec of engine.episodes) {
      const mine = unanswered.filter((p) => p.episode === rec);
      // a restore that was itself interrupted is answered by this one
      const restores = mine.filter((p) => p.body.op === "restore");
      const waiting = mine.filter((p) => p.body.op !== "restore");
      if (rec.slot === culprit || giveUp) {
        rec.dead = rec.slot === culprit
          ? { code: "env_timeout", message: "a guest call ignored its deadline (a native builtin that cannot be interrupted); the episode was stopped" }
          : { code: "engine_unavailable", message: "the engine worker keeps failing; its episodes were dropped" };
        this.counters.lost++;
        rec.restores = (rec.restores ?? 0) + 1; // an interrupted restore's outcome no longer matters
        rec.restoring = undefined;
        for (const p of restores) p.resolve({ id: 0, ok: false, error: rec.dead });
        for (const p of waiting) p.resolve(this.deadReply(rec, p.body));
        continue;
      }
      rec.engine = replacement;
      replacement.episodes.add(rec);
      const generation = (rec.restores = (rec.restores ?? 0) + 1);
      rec.restoring = this.post(replacement, rec, this.restoreRequest(rec)).then((reply) => {
        for (const p of restores) p.resolve(reply);
        if (generation !== rec.restores) return; // a later recovery owns the episode now
        rec.restoring = undefined;
        if (!reply.ok) rec.dead = { code: "env_crashed", message: `lost with its engine worker and not restorable: ${reply.error.message}` };
        else {
          this.counters.restored++;
          this.counters.replayed_steps += (reply.value as { steps: number }).steps;
        }
      });
      // replies come back in posting order, so a failed restore has marked the episode dead by the
      // time the worker's refusals of the requests behind it arrive
      for (const p of waiting) void this.post(replacement, rec, p.body).then((reply) => p.resolve(!reply.ok && rec.dead ? this.deadReply(rec, p.body) : reply));
    }
  }

  /** What rebuilds `rec` on another worker: its checkpoint and the inputs since (all of them without one). */
  private restoreRequest(rec: EpisodeRecord): RequestBody {
    const cp = rec.checkpoint;
    const inputs = cp ? { ...rec.inputs, actions: rec.inputs.actions.slice(cp.actions), user_replies: rec.inputs.user_replies.slice(cp.replies) } : rec.inputs;
    return { op: "restore", episode: rec.id, inputs, ...(cp ? { from: cp.snapshot } : {}), user: this.options.user ?? null, state_hash: rec.stateHash };
  }

  /**
   * Asks the episode's worker for a checkpoint once `checkpointEvery` actions have been acknowledged
   * since the last one. Not awaited: it queues behind the episode's step like any request and
   * costs the step nothing; the position is the one at asking (later steps queue behind it).
   */
  private maybeCheckpoint(rec: EpisodeRecord): void {
    const every = this.options.checkpointEvery ?? 64;
    // only between requests: a step already queued behind this one would run before the capture
    if (!rec.engine.worker || every <= 0 || rec.checkpointing || rec.dead || rec.ended || rec.inFlight) return;
    const at = { actions: rec.inputs.actions.length, replies: rec.inputs.user_replies.length };
    if (at.actions - (rec.checkpoint?.actions ?? 0) < every) return;
    rec.checkpointing = true;
    void this.post(rec.engine, rec, { op: "checkpoint", episode: rec.id }).then((reply) => {
      rec.checkpointing = false;
      // refused when the episode closed or died meanwhile: it keeps the checkpoint it had
      if (!reply.ok) return;
      const snapshot = reply.value as PortableSnapshot;
      if (snapshot.inputs.actions.length === at.actions && snapshot.inputs.user_replies.length === at.replies) rec.checkpoint = { snapshot, ...at };
    });
  }

  /**
   * One bad scenario must not cost its neighbours their worker: after `quarantineAfter` hard stops
   * its resets are refused (`scenario_quarantined`, with the reason) instead of killing the worker
   * again and again until the restart budget is spent on everyone.
   */
  private noteHardStop(scenarioId: string): void {
    const n = (this.hardStopsOf.get(scenarioId) ?? 0) + 1;
    this.hardStopsOf.set(scenarioId, n);
    const limit = this.options.quarantineAfter ?? 2;
    if (n >= limit && !this.quarantined.has(scenarioId)) {
      this.quarantined.set(scenarioId, `scenario ${scenarioId} is quarantined: its env made ${n} guest calls that ignored their deadline and had to be stopped by the watchdog (quarantineAfter ${limit}); fix the env and restart the bridge`);
    }
  }

  /** What a request on a lost episode gets: the first `step` gets a terminal step carrying the error; anything else, the error. */
  private deadReply(rec: EpisodeRecord, body: RequestBody): EngineReply {
    const error = rec.dead!;
    if (body.op !== "step" || rec.deathReported) return { id: 0, ok: false, error: rec.deathReported ? { code: "episode_done", message: `the episode ended: ${error.message}` } : error };
    rec.deathReported = true;
    const result: StepResult = {
      observation: { role: "user", content: JSON.stringify({ error: { type: error.code, message: error.message } }) },
      reward: 0,
      terminated: true,
      truncated: false,
      info: { step: rec.inputs.actions.length + 1, episode_id: rec.id, tool_calls: [], diff: [], state_hash: rec.stateHash, end_reason: "env_fault", error: error as StepResult["info"]["error"] },
    };
    return { id: 0, ok: true, value: result };
  }

  private post(engine: Engine, episode: EpisodeRecord, body: RequestBody): Promise<EngineReply> {
    const id = this.nextRequest++;
    episode.inFlight = (episode.inFlight ?? 0) + 1;
    return new Promise<EngineReply>((answer) => {
      const resolve = (r: EngineReply) => {
        episode.inFlight!--;
        answer(r);
      };
      engine.pending.set(id, { body, episode, resolve });
      if (engine.host) {
        // in this thread: straight in, no batching (there is no hop to amortise)
        try {
          engine.host.accept({ ...body, id, slot: episode.slot } as EngineRequest & { slot: number });
        } catch (e) {
          this.refuse(engine, id, e);
        }
        return;
      }
      // requests made in the same turn of the event loop cross to the worker in one message: a
      // thread hop costs ~100 µs here, so 64 pipelined steps must not pay it 64 times
      engine.outbox.push({ ...body, id, slot: episode.slot });
      if (engine.outbox.length === 1) setImmediate(() => this.flush(engine));
    });
  }

  /**
   * Hands the turn's requests to the worker. Copying them (structured clone) can throw; this runs
   * from setImmediate, where a throw would end the process, so a batch that cannot be copied is
   * sent one request at a time and only the request that cannot be copied is refused.
   */
  private flush(engine: Engine): void {
    if (engine.outbox.length === 0 || engine.stopping) return;
    const batch = engine.outbox;
    engine.outbox = [];
    try {
      engine.worker!.postMessage(batch);
      return;
    } catch {
      /* one of them could not be copied: find it below */
    }
    for (const req of batch) {
      try {
        engine.worker!.postMessage([req]);
      } catch (e) {
        this.refuse(engine, req.id, e);
      }
    }
  }

  /** Answers a request that could not be handed to its engine: that request only, with a typed error. */
  private refuse(engine: Engine, id: number, e: unknown): void {
    const p = engine.pending.get(id);
    if (!p) return;
    engine.pending.delete(id);
    const why = e instanceof Error ? e.message : String(e);
    p.resolve({ id, ok: false, error: { code: "bad_request", message: `the request could not be handed to its engine (${why}); nothing ran` } });
  }

  private async request(rec: EpisodeRecord, body: RequestBody): Promise<unknown> {
    if (this.closed) throw new RuntimeError("closed", "the runtime is closed");
    const engine = await this.liveEngine(rec);
    if (rec.dead) {
      const reply = this.deadReply(rec, body);
      if (!reply.ok) throw new RuntimeError(reply.error.code, reply.error.message);
      return reply.value;
    }
    if (!engine) throw new RuntimeError("closed", "the runtime is closed");
    const reply = await this.post(engine, rec, body);
    if (!reply.ok) throw new RuntimeError(reply.error.code, reply.error.message);
    if (reply.user_replies) rec.inputs.user_replies.push(...reply.user_replies);
    return reply.value;
  }

  /** Writes one trajectory record; a write that fails after the work ran is answered as recording_unavailable. */
  private record(r: object, strict = true): void {
    try {
      this.options.recorder?.append(r);
    } catch (e) {
      if (strict) throw new RuntimeError("recording_unavailable", `the request ran but its record could not be written: ${(e as Error).message}`);
    }
  }

  /** Refuses work whose record could not be written (the recorder's policy decides: see TrajectoryWriter.check). */
  private recordable(): void {
    try {
      this.options.recorder?.check();
    } catch (e) {
      throw new RuntimeError("recording_unavailable", (e as Error).message);
    }
  }

  /**
   * The engine to post to, once a replacement for a stopped one is in place: a request posted to a
   * stopping worker would never be answered. Null when there is nothing to post to: the episode
   * died with its worker, the runtime closed, or the episode was forgotten (closed) before the
   * recovery reached it, so nothing of it remains anywhere.
   */
  private async liveEngine(rec: EpisodeRecord): Promise<Engine | null> {
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

  private episode(id: string): EpisodeRecord {
    const rec = this.episodes.get(id);
    if (!rec) throw new RuntimeError("unknown_episode", `no episode ${id} (closed, or never reset)`);
    return rec;
  }

  private leastLoaded(): Engine {
    return this.engines.reduce((a, b) => (b.episodes.size < a.episodes.size ? b : a));
  }

  /** Starts an episode of a scenario. The seed defaults to a random one, reported in info. */
  async reset(scenarioId: string, seed?: number, episodeId: string = randomUUID()): Promise<ResetResult> {
    const found = this.registry.scenario(scenarioId);
    if (!found) throw new RuntimeError("unknown_scenario", `no scenario ${scenarioId}`);
    const quarantine = this.quarantined.get(scenarioId);
    if (quarantine) throw new RuntimeError("scenario_quarantined", quarantine);
    this.recordable();
    if (this.episodes.has(episodeId)) throw new RuntimeError("bad_request", `episode ${episodeId} already exists`);
    const s = seed ?? Math.floor(Math.random() * 2 ** 31);
    const engine = this.leastLoaded();
    const rec: EpisodeRecord = { id: episodeId, slot: this.nextSlot++, engine, inputs: { env_id: found.bundle.id, scenario_id: scenarioId, seed: s, actions: [], user_replies: [] }, stateHash: "", snapshots: new Set() };
    engine.episodes.add(rec);
    this.episodes.set(episodeId, rec);
    try {
      const lean = (await this.request(rec, { op: "reset", episode: episodeId, scenario_id: scenarioId, seed: s, user: this.options.user ?? null })) as { observation: Observation; info: Omit<ResetInfo, "introduction" | "rules" | "tools"> };
      // the worker leaves out what the manifest says (see engine-worker): put it back in its place
      const { episode_id, env_id, scenario_id, mode, seed: episodeSeed, ...rest } = lean.info;
      const { manifest } = found.bundle;
      const value: ResetResult = {
        episode_id: episodeId,
        observation: lean.observation,
        info: { episode_id, env_id, scenario_id, mode, seed: episodeSeed, introduction: manifest.introduction, rules: manifest.rules, tools: openingTools(found.bundle, found.scenario), ...rest },
      };
      rec.stateHash = value.info.state_hash;
      const i = value.info;
      rec.opening = { observation: value.observation, introduction: i.introduction, rules: i.rules, tools: i.tools, env_hash: i.env_hash, scenario_hash: i.scenario_hash };
      this.record({
        t: "episode_start", episode_id: episodeId, env_id: i.env_id, scenario_id: i.scenario_id, seed: i.seed, env_hash: i.env_hash, scenario_hash: i.scenario_hash,
        state_hash: i.state_hash, observation: value.observation, introduction: i.introduction, rules: i.rules, tools: i.tools, user_replies: rec.inputs.user_replies, time: new Date().toISOString(),
      });
      return { episode_id: episodeId, observation: value.observation, info: value.info };
    } catch (e) {
      this.forget(rec);
      throw e;
    }
  }

  async step(episodeId: string, action: unknown): Promise<StepResult> {
    const rec = this.episode(episodeId);
    this.recordable();
    // every action is kept (restore and replay re-execute them), so size is checked before anything runs
    const maxAction = this.options.maxActionBytes ?? 1 << 20;
    const maxInputs = this.options.maxEpisodeInputBytes ?? 64 << 20;
    // one bounded, iterative walk, before anything is copied to an engine thread: structured clone
    // and every later encoder recurse, so a value nested 10,000 deep must stop here (issue 32)
    const { bytes: size, tooDeep } = valueShape(action, maxAction, MAX_ACTION_DEPTH);
    if (tooDeep) throw new RuntimeError("too_large", `the action nests deeper than ${MAX_ACTION_DEPTH} levels (max_action_depth); it was not run`);
    if (size > maxAction) throw new RuntimeError("too_large", `the action is over ${maxAction} bytes as JSON (serve --max-action-bytes); it was not run`);
    if ((rec.inputBytes ?? 0) + size > maxInputs) throw new RuntimeError("too_large", `the episode's actions would exceed ${maxInputs} bytes in total (serve --max-episode-input-mb); it was not run: reset a new episode`);
    rec.inputBytes = (rec.inputBytes ?? 0) + size;
    const started = performance.now();
    const repliesBefore = rec.inputs.user_replies.length;
    const result = (await this.request(rec, { op: "step", episode: episodeId, action })) as StepResult;
    rec.inputs.actions.push(action);
    rec.stateHash = result.info.state_hash;
    const recorder = this.options.recorder;
    if (recorder) {
      const { info: i } = result;
      this.record({
        t: "step", episode_id: episodeId, step: i.step, action, observation: result.observation, reward: result.reward, terminated: result.terminated, truncated: result.truncated,
        state_hash: i.state_hash, diff: i.diff, tool_calls: i.tool_calls, user_replies: rec.inputs.user_replies.slice(repliesBefore), end_reason: i.end_reason, reward_info: i.reward_info, error: i.error,
        ms: Math.round((performance.now() - started) * 1000) / 1000,
      });
      if (result.terminated || result.truncated) this.record({ t: "episode_end", episode_id: episodeId, how: "terminal" });
    }
    if (result.terminated || result.truncated) rec.ended = true;
    else this.maybeCheckpoint(rec);
    return result;
  }

  /** Ends the episode now and scores it (evaluation harnesses, tests without a simulated user). */
  async finish(episodeId: string): Promise<StepResult> {
    const rec = this.episode(episodeId);
    this.recordable();
    const result = (await this.request(rec, { op: "finish", episode: episodeId })) as StepResult;
    if (!rec.ended) {
      const { info: i } = result;
      this.record({
        t: "episode_end", episode_id: episodeId, how: "finish",
        result: {
          step: i.step, observation: result.observation, reward: result.reward, terminated: result.terminated, truncated: result.truncated,
          state_hash: i.state_hash, diff: i.diff, tool_calls: i.tool_calls, end_reason: i.end_reason, reward_info: i.reward_info, error: i.error,
        },
      });
      rec.ended = true;
    }
    return result;
  }

  /** The episode's current state as JSON text. */
  async state(episodeId: string): Promise<string> {
    return (await this.request(this.episode(episodeId), { op: "state", episode: episodeId })) as string;
  }

  /** The hash of the episode's state after its last acknowledged step. */
  stateHash(episodeId: string): string {
    return this.episode(episodeId).stateHash;
  }

  /** The inputs that reproduce the episode exactly (scenario, seed, actions, simulated user replies). */
  inputs(episodeId: string): EpisodeInputs {
    return structuredClone(this.episode(episodeId).inputs);
  }

  /**
   * Freezes the episode now: a copy of its sandbox and host state kept in its engine worker until
   * dropped (or the episode closes). Bounded per episode and in total; over a bound: `too_large`.
   */
  async snapshot(episodeId: string): Promise<{ snapshot_id: string; step: number; bytes: number; state_hash: string }> {
    const rec = this.episode(episodeId);
    const perEpisode = this.options.maxSnapshotsPerEpisode ?? 32;
    const total = this.options.maxSnapshotBytes ?? 1 << 30;
    // count and bytes are reserved before the copy, in this turn (atomically with respect to every
    // other request): concurrent snapshots cannot all pass a check that none of them has counted yet
    const held = [...rec.snapshots].filter((s) => !s.lost).length + (rec.snapshotsTaking ?? 0);
    if (held >= perEpisode) throw new RuntimeError("too_large", `the episode holds its limit of ${perEpisode} snapshots (serve --max-snapshots, maxSnapshotsPerEpisode); drop some`);
    // the size is known once taken: reserve what this episode's largest one took (a sandbox's
    // memory only grows), then settle to the size taken; a copy that does not fit is dropped again
    const estimate = rec.lastSnapshotBytes ?? 0;
    const committed = this.snapshotBytes + this.snapshotReserved;
    if (committed + estimate > total || committed >= total) {
      throw new RuntimeError("too_large", `snapshots hold ${committed} bytes and this one needs about ${estimate}: over the limit of ${total} (serve --max-snapshot-mb, maxSnapshotBytes); drop some`);
    }
    this.snapshotReserved += estimate;
    rec.snapshotsTaking = (rec.snapshotsTaking ?? 0) + 1;
    const id = `snap-${randomUUID()}`;
    let value: { step: number; bytes: number; state_hash: string };
    try {
      value = (await this.request(rec, { op: "snapshot", episode: episodeId, snapshot: id })) as typeof value;
    } finally {
      this.snapshotReserved -= estimate;
      rec.snapshotsTaking = (rec.snapshotsTaking ?? 1) - 1;
    }
    rec.lastSnapshotBytes = Math.max(rec.lastSnapshotBytes ?? 0, value.bytes);
    if (this.snapshotBytes + this.snapshotReserved + value.bytes > total) {
      const engine = await this.liveEngine(rec);
      if (engine) await this.post(engine, rec, { op: "drop_snapshot", episode: episodeId, snapshot: id });
      throw new RuntimeError("too_large", `this snapshot takes ${value.bytes} bytes; with the ${this.snapshotBytes} held that is over the limit of ${total} (serve --max-snapshot-mb, maxSnapshotBytes); drop some`);
    }
    const snap: SnapshotRecord = { id, engine: rec.engine, owner: rec, inputs: structuredClone(rec.inputs), opening: rec.opening, stateHash: value.state_hash, step: value.step, bytes: value.bytes };
    this.snapshots.set(id, snap);
    rec.snapshots.add(snap);
    this.snapshotBytes += snap.bytes;
    return { snapshot_id: id, step: value.step, bytes: value.bytes, state_hash: value.state_hash };
  }

  /**
   * A new episode that continues from a live episode (its state now) or from a snapshot: same
   * state, RNG position, virtual clock, step count and conversation. Given the same actions it
   * gives the same observations, rewards and state hashes as its source would.
   */
  async fork(source: { episode_id: string } | { snapshot_id: string }, episodeId: string = randomUUID()): Promise<ForkResult> {
    if (this.episodes.has(episodeId)) throw new RuntimeError("bad_request", `episode ${episodeId} already exists`);
    let engine: Engine;
    let inputs: EpisodeInputs;
    let body: RequestBody;
    let from: ForkResult["forked_from"];
    let opening: Opening | undefined;
    if ("snapshot_id" in source) {
      const snap = this.usableSnapshot(source.snapshot_id);
      ({ engine } = snap);
      inputs = structuredClone(snap.inputs);
      opening = snap.opening;
      body = { op: "fork", episode: episodeId, from_snapshot: snap.id };
      from = { snapshot_id: snap.id, step: snap.step };
    } else {
      const parent = this.episode(source.episode_id);
      const live = await this.liveEngine(parent);
      if (!live) throw new RuntimeError(parent.dead?.code ?? "closed", parent.dead?.message ?? "the runtime is closed");
      engine = live;
      inputs = structuredClone(parent.inputs);
      opening = parent.opening;
      body = { op: "fork", episode: episodeId, from_episode: parent.id };
      from = { episode_id: parent.id, step: inputs.actions.length };
    }
    const rec: EpisodeRecord = { id: episodeId, slot: this.nextSlot++, engine, inputs, stateHash: "", snapshots: new Set(), opening };
    engine.episodes.add(rec);
    this.episodes.set(episodeId, rec);
    try {
      const value = (await this.request(rec, body)) as { step: number; state_hash: string; tool_names: string[] };
      rec.stateHash = value.state_hash;
      from.step = value.step;
      const manifestTools = this.registry.scenario(inputs.scenario_id)?.bundle.manifest.tools ?? [];
      const tools = value.tool_names.map((n) => manifestTools.find((t) => t.function.name === n)).filter((t) => t !== undefined);
      this.record({
        t: "episode_start", episode_id: episodeId, env_id: inputs.env_id, scenario_id: inputs.scenario_id, seed: inputs.seed, state_hash: value.state_hash,
        ...opening, forked_from: from, prefix_actions: inputs.actions, user_replies: inputs.user_replies, time: new Date().toISOString(),
      });
      return { episode_id: episodeId, step: value.step, state_hash: value.state_hash, env_id: inputs.env_id, scenario_id: inputs.scenario_id, seed: inputs.seed, tools, forked_from: from };
    } catch (e) {
      this.forget(rec);
      throw e;
    }
  }

  /** Puts the episode back to a snapshot's point (any snapshot of this runtime): the same as closing it and forking the snapshot under its id. */
  async restoreSnapshot(episodeId: string, snapshotId: string): Promise<ForkResult> {
    // checked before the episode is closed: a snapshot lost with its worker must not take the episode with it
    this.usableSnapshot(snapshotId);
    const rec = this.episode(episodeId);
    // the episode's own snapshots outlive this (a restore is how one goes back to them)
    const kept = rec.snapshots;
    rec.snapshots = new Set();
    await this.closeEpisode(episodeId);
    const result = await this.fork({ snapshot_id: snapshotId }, episodeId);
    const next = this.episode(episodeId);
    for (const s of kept) s.owner = next;
    next.snapshots = kept;
    return result;
  }

  /** What a held snapshot is of (null: dropped, or never taken), so a front can check it before restoring. */
  snapshotInfo(snapshotId: string): { scenario_id: string; episode_id: string; step: number; state_hash: string; bytes: number } | null {
    const snap = this.snapshots.get(snapshotId);
    return snap ? { scenario_id: snap.inputs.scenario_id, episode_id: snap.owner.id, step: snap.step, state_hash: snap.stateHash, bytes: snap.bytes } : null;
  }

  /**
   * A snapshot as bytes another replica can import (see snapshot-blob.ts): a held snapshot, or the
   * episode as it is now (no snapshot is kept for that). `version` is the bridge's own version,
   * written into the blob so another version refuses it. Over `maxBlobBytes`: too_large.
   */
  async exportSnapshot(source: { episode_id: string } | { snapshot_id: string }, options: { version: string; maxBlobBytes: number }): Promise<{ blob: Buffer; bytes: number; scenario_id: string; step: number; state_hash: string }> {
    let rec: EpisodeRecord;
    let body: RequestBody;
    let opening: Opening | undefined;
    if ("snapshot_id" in source) {
      const snap = this.usableSnapshot(source.snapshot_id);
      rec = snap.owner;
      opening = snap.opening;
      body = { op: "export_snapshot", episode: snap.owner.id, snapshot: snap.id };
    } else {
      rec = this.episode(source.episode_id);
      opening = rec.opening;
      body = { op: "export_snapshot", episode: rec.id };
    }
    const portable = (await this.request(rec, body)) as PortableSnapshot;
    const found = this.registry.scenario(portable.scenarioId);
    if (!found) throw new RuntimeError("internal_error", `scenario ${portable.scenarioId} of a held episode is not served`);
    const blob = encodeSnapshotBlob(
      { snapshot: portable, opening: (opening as Record<string, unknown> | undefined) ?? null },
      { server_version: options.version, env_id: found.bundle.id, bundle_hash: found.bundle.contentHash, scenario_id: portable.scenarioId, step: portable.steps, state_hash: portable.stateHash },
    );
    if (blob.length > options.maxBlobBytes) throw new RuntimeError("too_large", `the snapshot is ${blob.length} bytes as a blob, over max_snapshot_blob_bytes (${options.maxBlobBytes}: the frame limit, serve --max-frame-bytes, less room for the envelope)`);
    return { blob, bytes: blob.length, scenario_id: portable.scenarioId, step: portable.steps, state_hash: portable.stateHash };
  }

  /**
   * Holds a snapshot exported by another replica (of this bridge version and env bundle) as a new
   * snapshot of this runtime, to fork or restore from. Everything the blob says is checked before
   * it costs anything (snapshot-blob.ts; the image against this engine's, in EngineHost); the
   * limits are those of snapshots: `holder` (a client connection) may hold `maxSnapshotsPerEpisode`
   * imports at once, and they count against `maxSnapshotBytes`. An import lives until dropped, or
   * until `dropIdleImports` finds it unused (the server's idle reaper).
   */
  async importSnapshot(blob: Uint8Array, options: { version: string; holder: string; maxBlobBytes: number }): Promise<{ snapshot_id: string; scenario_id: string; step: number; bytes: number; state_hash: string }> {
    if (blob.length > options.maxBlobBytes) throw new RuntimeError("too_large", `the blob is ${blob.length} bytes, over max_snapshot_blob_bytes (${options.maxBlobBytes})`);
    const { header, body } = readSnapshotBlobHeader(blob);
    const incompatible = (why: string) => new RuntimeError("snapshot_incompatible", `blob: ${why}`);
    if (header.protocol_version !== PROTOCOL_VERSION || header.server_version !== options.version) {
      throw incompatible(`written by bridge ${header.server_version} (protocol ${header.protocol_version}); this is bridge ${options.version} (protocol ${PROTOCOL_VERSION}): sandbox memory moves only between the same version`);
    }
    const found = this.registry.scenario(header.scenario_id);
    if (!found || found.bundle.id !== header.env_id) throw incompatible(`scenario ${header.scenario_id} of env ${header.env_id} is not served here`);
    if (found.bundle.contentHash !== header.bundle_hash) throw incompatible(`env ${header.env_id} here is another bundle (hash ${found.bundle.contentHash.slice(0, 12)}, the blob's ${header.bundle_hash.slice(0, 12)})`);
    const perHolder = this.options.maxSnapshotsPerEpisode ?? 32;
    const total = this.options.maxSnapshotBytes ?? 1 << 30;
    const mine = [...this.snapshots.values()].filter((x) => x.imported?.holder === options.holder && !x.lost).length;
    if (mine >= perHolder) throw new RuntimeError("too_large", `this connection holds its limit of ${perHolder} imported snapshots (serve --max-snapshots, maxSnapshotsPerEpisode); drop some`);
    if (this.snapshotBytes + header.raw_bytes > total) throw new RuntimeError("too_large", `snapshots hold ${this.snapshotBytes} bytes; ${header.raw_bytes} more would pass the limit (serve --max-snapshot-mb, maxSnapshotBytes ${total}); drop some`);
    const payload = decodeSnapshotPayload(header, body);
    const engine = this.leastLoaded();
    // no episode runs under this id: it orders the snapshot's requests on its engine and owns it
    const holder: EpisodeRecord = { id: `import-${randomUUID()}`, slot: this.nextSlot++, engine, inputs: payload.snapshot.inputs, stateHash: header.state_hash, snapshots: new Set() };
    const id = `snap-${randomUUID()}`;
    const value = (await this.request(holder, { op: "import_snapshot", episode: holder.id, snapshot: id, from: payload.snapshot, user: this.options.user ?? null })) as { step: number; bytes: number; state_hash: string };
    const snap: SnapshotRecord = {
      id, engine, owner: holder, inputs: structuredClone(payload.snapshot.inputs), opening: (payload.opening as Opening | null) ?? undefined,
      stateHash: value.state_hash, step: value.step, bytes: value.bytes, imported: { holder: options.holder, lastUsed: Date.now() },
    };
    this.snapshots.set(id, snap);
    holder.snapshots.add(snap);
    this.snapshotBytes += snap.bytes;
    return { snapshot_id: id, scenario_id: header.scenario_id, step: value.step, bytes: value.bytes, state_hash: value.state_hash };
  }

  /** Drops imported snapshots unused (no fork, restore or export) for `idleMs`; returns how many. */
  async dropIdleImports(idleMs: number): Promise<number> {
    const cutoff = Date.now() - idleMs;
    const idle = [...this.snapshots.values()].filter((x) => x.imported && x.imported.lastUsed < cutoff);
    for (const x of idle) await this.dropSnapshot(x.id);
    return idle.length;
  }

  /** Whether the snapshot's image still exists: its engine worker was not stopped (nor is being stopped). */
  /** A snapshot that can be forked, restored or exported (an imported one counts as used now), or unknown_snapshot saying why not. */
  private usableSnapshot(snapshotId: string): SnapshotRecord {
    const snap = this.snapshots.get(snapshotId);
    if (!snap) throw new RuntimeError("unknown_snapshot", `no snapshot ${snapshotId} (dropped, or its episode closed)`);
    if (!this.held(snap)) throw new RuntimeError("unknown_snapshot", `snapshot ${snapshotId} was lost with its engine worker`);
    if (snap.imported) snap.imported.lastUsed = Date.now();
    return snap;
  }

  private held(snap: SnapshotRecord): boolean {
    return !snap.lost && snap.engine === snap.owner.engine && !snap.owner.dead && !snap.engine.stopping;
  }

  async dropSnapshot(snapshotId: string): Promise<boolean> {
    const snap = this.snapshots.get(snapshotId);
    if (!snap) return false;
    this.snapshots.delete(snapshotId);
    snap.owner.snapshots.delete(snap);
    if (snap.lost) return true;
    this.snapshotBytes -= snap.bytes;
    if (this.held(snap)) await this.post(snap.engine, snap.owner, { op: "drop_snapshot", episode: snap.owner.id, snapshot: snapshotId });
    return true;
  }

  async closeEpisode(episodeId: string): Promise<void> {
    const rec = this.episodes.get(episodeId);
    if (!rec) return;
    this.forget(rec);
    // a close goes ahead even when its record cannot be written (the writer is then unhealthy and refuses new work)
    if (!rec.ended) this.record({ t: "episode_end", episode_id: episodeId, how: "closed" }, false);
    const engine = await this.liveEngine(rec);
    if (engine) await this.post(engine, rec, { op: "close", episode: episodeId });
  }

  private forget(rec: EpisodeRecord): void {
    this.episodes.delete(rec.id);
    rec.engine.episodes.delete(rec);
    for (const snap of rec.snapshots) void this.dropSnapshot(snap.id);
  }

  /** The episode limits in force (defaults filled in), as `hello` reports them. */
  limits(): { max_action_bytes: number; max_calls_per_action: number; max_episode_input_bytes: number; max_snapshots_per_episode: number; max_snapshot_bytes: number; quarantine_after: number } {
    const o = this.options;
    return {
      max_calls_per_action: MAX_CALLS_PER_ACTION,
      max_action_bytes: o.maxActionBytes ?? 1 << 20,
      max_episode_input_bytes: o.maxEpisodeInputBytes ?? 64 << 20,
      max_snapshots_per_episode: o.maxSnapshotsPerEpisode ?? 32,
      max_snapshot_bytes: o.maxSnapshotBytes ?? 1 << 30,
      quarantine_after: o.quarantineAfter ?? 2,
    };
  }

  stats(): {
    episodes: number;
    workers: number[];
    hard_stops: number;
    restored: number;
    lost: number;
    replayed_steps: number;
    snapshots: number;
    snapshot_bytes: number;
    quarantined: string[];
  } {
    const snapshots = [...this.snapshots.values()].filter((s) => !s.lost).length;
    return { episodes: this.episodes.size, workers: this.engines.map((e) => e.episodes.size), ...this.counters, snapshots, snapshot_bytes: this.snapshotBytes, quarantined: [...this.quarantined.keys()] };
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.watchdog);
    await Promise.all(
      this.engines.map((e) => {
        e.stopping = true;
        for (const p of e.pending.values()) p.resolve({ id: 0, ok: false, error: { code: "closed", message: "the runtime closed" } });
        // the in-thread engine has no thread to end: its sandboxes go with its episodes
        return e.worker ? e.worker.terminate() : Promise.resolve(0);
      }),
    );
  }
}

export { jsonSizeUpTo } from "../episode/action-limits.js";
