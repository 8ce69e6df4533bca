import { randomBytes } from "node:crypto";
import { Router } from "zeromq";
import type { Logger } from "pino";
import { decodeFrame, encodeFrame, MAX_DEPTH } from "../../../protocol/codec.js";
import type { z } from "zod";
import { ProtocolError } from "../../../protocol/error-codes.js";
import { OPS, PROTOCOL_VERSION, Request, RequestId, type ErrorBody, type Op, type RESULT_SCHEMAS, type ResetRequest } from "../../../protocol/messages.js";
import { SERVER_VERSION } from "../../../protocol/server-version.js";
import { compactStep } from "../../../protocol/step-wire.js";
import type { EnvRuntime, ForkResult } from "../../core/engine/env-runtime.js";
import type { StepResult } from "../../core/episode/episode.js";
import { failureOf, FAILURES } from "../../core/sessions/failure-table.js";
import { requireScenario } from "../../core/sessions/unknowns.js";
import { RetryMemory } from "./retry-memory.js";
import { WireSessions, type Session } from "./wire-sessions.js";
import { ZAP_DOMAIN } from "./zap-handler.js";

export interface ServerLimits {
  /** @unit bytes @default 8 MiB */
  maxFrameBytes: number;
  /** @default 1024 */
  maxSessions: number;
  /** Requests being served at once; more get `overloaded`. @default 4096 */
  maxInFlight: number;
  /** Sessions unused this long are closed. @unit seconds @default 600 */
  idleTimeoutS: number;
  /** Sessions one client connection may hold; default: all of them (a trainer owns its bridge). */
  maxSessionsPerClient?: number;
}

export const DEFAULT_SERVER_LIMITS: ServerLimits = { maxFrameBytes: 8 << 20, maxSessions: 1024, maxInFlight: 4096, idleTimeoutS: 600 };

export interface CurveServerKeys {
  publicKey: string;
  secretKey: string;
}

export interface BridgeServerOptions {
  runtime: EnvRuntime;
  endpoint: string;
  replica?: number;
  /** Instance ids this replica slot had before (restarts), so their sessions read as `session_lost`. */
  previousInstances?: string[];
  limits?: Partial<ServerLimits>;
  /** Serve CurveZMQ with these keys; a ZapHandler must be running in this process. */
  curve?: CurveServerKeys | null;
  logger: Logger;
}

type Result = Record<string, unknown>;
/** What `op` answers, as its result schema (protocol/messages.ts) takes it: each handler is checked against it. */
type WireResult<O extends Op> = z.input<(typeof RESULT_SCHEMAS)[O]>;
/** What any op answers: `handle` returns one of these. */
type AnyWireResult = { [O in Op]: WireResult<O> }[Op];
type PreviousEpisode = NonNullable<WireResult<"reset">["info"]["previous_episode"]>;
type KnownOpening = NonNullable<z.input<typeof ResetRequest>["known_opening"]>;

/**
 * One replica's ROUTER socket in front of an EnvRuntime. Frames are bounded and scanned before
 * decoding, every request is validated against the protocol schemas, and every failure becomes a
 * typed error reply: nothing a client sends can stop the loop. Replies go out through one
 * serialised writer (zeromq.js allows one pending send per socket).
 */
export class BridgeServer {
  readonly instance = randomBytes(4).toString("hex");
  readonly replica: number;
  readonly limits: ServerLimits;
  private readonly socket = new Router();
  private readonly sessions: WireSessions;
  private readonly runtime: EnvRuntime;
  private readonly log: Logger;
  private readonly started = Date.now();
  private sendTail: Promise<void> = Promise.resolve();
  private loop: Promise<void> = Promise.resolve();
  private inFlight = 0;
  private idle: (() => void) | null = null;
  private stopping = false;
  private readonly counters = { requests: 0, errors: 0, retries: 0 };
  /** Recent replies by (connection identity, request id), for retries: bounded in count, age and bytes (see RetryMemory). */
  private readonly recent = new RetryMemory<Result>();
  endpoint = "";

  constructor(private readonly options: BridgeServerOptions) {
    this.replica = options.replica ?? 0;
    this.limits = { ...DEFAULT_SERVER_LIMITS, ...options.limits };
    this.runtime = options.runtime;
    this.log = options.logger;
    this.sessions = new WireSessions(this.runtime, this.replica, this.instance, options.previousInstances ?? [], this.limits.maxSessions, this.limits.maxSessionsPerClient ?? this.limits.maxSessions);
    this.socket.maxMessageSize = this.limits.maxFrameBytes;
    // a ROUTER silently drops a reply when the peer's queue is at its high-water mark; replies are
    // already bounded by max_in_flight, so queue them all rather than lose any
    this.socket.sendHighWaterMark = 0;
    // flush queued replies for up to a second when closing, then drop them
    this.socket.linger = 1000;
    if (options.curve) {
      this.socket.curveServer = true;
      this.socket.curveSecretKey = options.curve.secretKey;
      this.socket.curvePublicKey = options.curve.publicKey;
      this.socket.zapDomain = ZAP_DOMAIN;
    }
  }

  /** Binds and starts serving; resolves with the bound endpoint (a `*` port is resolved). */
  async start(): Promise<string> {
    await this.socket.bind(this.options.endpoint);
    this.endpoint = this.socket.lastEndpoint ?? this.options.endpoint;
    this.sessions.startReaper(this.limits.idleTimeoutS * 1000, (s) => this.reapOne(s), { after: () => this.dropIdleImports() });
    this.loop = this.receiveLoop();
    return this.endpoint;
  }

  private async receiveLoop(): Promise<void> {
    try {
      for await (const frames of this.socket) void this.onMessage(frames);
    } catch (e) {
      if (!this.socket.closed) this.log.error({ err: e }, "receive loop failed");
    }
  }

  private send(frames: (Buffer | string)[]): void {
    this.sendTail = this.sendTail.then(
      () => this.socket.send(frames),
      () => this.socket.send(frames),
    ).catch((e: unknown) => {
      // an unroutable peer (it disconnected) or a closed socket: the reply has nowhere to go
      this.log.debug({ err: e }, "reply dropped");
    });
  }

  private async onMessage(frames: Buffer[]): Promise<void> {
    const [identity, ...rest] = frames;
    if (!identity) return;
    const delimited = rest.length >= 1 && rest[0]!.length === 0 && rest.length !== 1;
    const body = delimited ? rest.slice(1) : rest;
    const reply = (message: Result) => {
      let bytes: Buffer;
      try {
        bytes = encodeFrame(message);
      } catch (e) {
        bytes = encodeFrame({ v: PROTOCOL_VERSION, id: message.id ?? null, ok: false, error: { code: "internal_error", message: `reply not encodable: ${(e as Error).message}` } });
      }
      this.send(delimited ? [identity, Buffer.alloc(0), bytes] : [identity, bytes]);
    };
    const fail = (id: unknown, error: ErrorBody) => {
      this.counters.errors++;
      reply({ v: PROTOCOL_VERSION, id: id ?? null, ok: false, error });
    };

    this.counters.requests++;
    if (body.length !== 1) return fail(null, { code: "bad_request", message: `a request is one frame (after an optional empty delimiter); got ${body.length}` });
    let raw: unknown;
    try {
      raw = decodeFrame(body[0]!);
    } catch (e) {
      return fail(null, errorBody(e));
    }
    const id = readId(raw);
    if (typeof raw !== "object" || raw === null || Array.isArray(raw)) return fail(id, { code: "bad_request", message: "a request is a msgpack map" });
    const r = raw as Record<string, unknown>;
    if (r.v !== PROTOCOL_VERSION) return fail(id, { code: "unsupported_version", message: `this bridge speaks protocol version ${PROTOCOL_VERSION}; the request says ${JSON.stringify(r.v ?? null)}` });
    if (typeof r.op !== "string" || !OPS.includes(r.op as never)) return fail(id, { code: "unknown_op", message: `unknown op ${JSON.stringify(r.op ?? null)}; ops: ${OPS.join(", ")}` });
    const parsed = Request.safeParse(raw);
    if (!parsed.success) return fail(id, { code: "bad_request", message: parsed.error.issues.map((i) => `${i.path.join(".") || "request"}: ${i.message}`).join("; ") });
    const key = RETRIED_OPS.has(parsed.data.op) && id !== null ? `${identity.toString("hex")}\u0000${typeof id}:${id}` : null;
    const prior = key === null ? undefined : this.recent.get(key);
    if (prior) {
      if (prior.op !== parsed.data.op) return fail(id, { code: "bad_request", message: `request id ${JSON.stringify(id)} was already used for a ${prior.op} on this connection; ids identify retries` });
      this.counters.retries++;
      return reply(await prior.reply);
    }
    if (this.stopping) return fail(id, { code: "shutting_down", message: `replica ${this.replica} is shutting down` });
    if (this.inFlight >= this.limits.maxInFlight) return fail(id, { code: "overloaded", message: `replica ${this.replica} is serving ${this.inFlight} requests; retry later` });

    this.inFlight++;
    let settle!: (message: Result) => void;
    if (key !== null) this.recent.remember(key, parsed.data.op, sessionOf(parsed.data), new Promise<Result>((r) => (settle = r)));
    let message: Result;
    try {
      const result = await this.handle(parsed.data, identity.toString("hex"));
      message = { v: PROTOCOL_VERSION, id, ok: true, result };
    } catch (e) {
      const error = errorBody(e);
      if (error.code === "internal_error") this.log.error({ err: e, op: parsed.data.op }, "request failed");
      this.counters.errors++;
      message = { v: PROTOCOL_VERSION, id: id ?? null, ok: false, error };
    } finally {
      this.inFlight--;
      if (this.inFlight === 0) this.idle?.();
    }
    settle?.(message);
    reply(message);
  }

  /** Every op's result is typed against its result schema (RESULT_SCHEMAS): a handler answering another shape does not compile. */
  private async handle(req: Request, client: string): Promise<AnyWireResult> {
    switch (req.op) {
      case "hello":
        return {
          protocol_version: PROTOCOL_VERSION,
          server: "envscaler",
          server_version: SERVER_VERSION,
          replica: this.replica,
          instance: this.instance,
          limits: {
            max_frame_bytes: this.limits.maxFrameBytes,
            max_sessions: this.limits.maxSessions,
            max_in_flight: this.limits.maxInFlight,
            idle_timeout_s: this.limits.idleTimeoutS,
            max_depth: MAX_DEPTH,
            max_batch: this.limits.maxSessions,
            max_sessions_per_client: this.limits.maxSessionsPerClient ?? this.limits.maxSessions,
            max_snapshot_blob_bytes: this.maxBlobBytes,
            ...this.runtime.limits(),
          },
          ops: [...OPS],
          features: [...FEATURES],
        } satisfies WireResult<"hello">;
      case "list_envs":
        return {
          envs: this.runtime.registry.list().map((b) => ({
            env_id: b.id,
            name: b.manifest.name,
            introduction: b.manifest.introduction,
            rules: b.manifest.rules,
            tools: b.manifest.tools,
            scenario_count: b.scenarios.size,
          })),
        } satisfies WireResult<"list_envs">;
      case "list_scenarios": {
        const bundles = this.runtime.registry.list().filter((b) => req.env_id === undefined || b.id === req.env_id);
        if (req.env_id !== undefined && bundles.length === 0) throw new ProtocolError("unknown_env", `no env ${req.env_id}`);
        return {
          scenarios: bundles.flatMap((b) =>
            [...b.scenarios.values()].map((s) => ({ scenario_id: s.id, env_id: b.id, mode: s.mode, task: s.task, max_steps: s.max_steps ?? b.manifest.max_steps, check_count: s.checks.length })),
          ),
        } satisfies WireResult<"list_scenarios">;
      }
      case "reset":
        return this.reset(req.scenario_id, req.seed, req.session_id, client, req.finish_previous ?? false, req.known_opening);
      case "step":
        return this.onSession(req.session_id, async (s) => wireStep(await this.runtime.step(needEpisode(s), req.action)));
      case "step_batch": {
        // any size up to the replica's session limit works; the schema's own bound is far above it
        if (req.steps.length > this.limits.maxSessions) throw new ProtocolError("too_large", `a step_batch holds at most max_sessions (${this.limits.maxSessions}) entries; got ${req.steps.length}`);
        const results = await Promise.all(
          req.steps.map((st) =>
            this.onSession(st.session_id, (s) => this.runtime.step(needEpisode(s), st.action)).then(
              (result) => ({ ok: true as const, result: wireStep(result) }),
              (e: unknown) => ({ ok: false as const, error: errorBody(e) }),
            ),
          ),
        );
        return { results } satisfies WireResult<"step_batch">;
      }
      case "finish":
        return this.onSession(req.session_id, async (s) => wireStep(await this.runtime.finish(needEpisode(s))));
      case "episode_result":
        return endedEpisode(req.episode_id, await this.runtime.result(req.episode_id)) satisfies WireResult<"episode_result">;
      case "state":
        return this.onSession(req.session_id, async (s): Promise<WireResult<"state">> => {
          const ep = needEpisode(s);
          return { state_json: await this.runtime.state(ep), state_hash: this.runtime.stateHash(ep) };
        });
      case "close": {
        const s = this.sessions.find(req.session_id);
        if (!s) {
          // closing twice (or closing what a replica restart already ended) is fine; closing
          // what never existed here is a mistake worth reporting
          const e = this.sessions.gone(req.session_id);
          if (e instanceof ProtocolError && (e.code === "session_closed" || e.code === "session_lost")) return { closed: true } satisfies WireResult<"close">;
          throw e;
        }
        // in arrival order, as one of the session's requests: those queued before the close still
        // run, and those sent after it find the session closed (waiting for the queue to drain
        // outside it let a later request run first: a reset after the close opened an episode no
        // session owned, beyond --max-sessions)
        s.queue.lastUsed = Date.now();
        await s.queue.run(() => (s.closed ? undefined : this.closeSession(s.id, "closed by the client", false)));
        return { closed: true } satisfies WireResult<"close">;
      }
      case "snapshot":
        return this.onSession(req.session_id, (s): Promise<WireResult<"snapshot">> => this.runtime.snapshot(needEpisode(s)));
      case "fork":
        if (req.session_id !== undefined) {
          const from = req.session_id;
          return this.onSession(from, (src) => this.forkInto({ episode_id: needEpisode(src) }, { session_id: from }, client));
        }
        return this.forkInto({ snapshot_id: req.snapshot_id! }, { snapshot_id: req.snapshot_id! }, client);
      case "restore":
        return this.onSession(req.session_id, async (s): Promise<WireResult<"restore">> => {
          const r = await this.runtime.restoreSnapshot(needEpisode(s), req.snapshot_id);
          return { info: this.forkInfo(r, { snapshot_id: req.snapshot_id }) };
        });
      case "drop_snapshot":
        return { dropped: await this.runtime.dropSnapshot(req.snapshot_id) } satisfies WireResult<"drop_snapshot">;
      case "export_snapshot": {
        const options = { version: SERVER_VERSION, maxBlobBytes: this.maxBlobBytes };
        if (req.session_id !== undefined) return this.onSession(req.session_id, (s): Promise<WireResult<"export_snapshot">> => this.runtime.exportSnapshot({ episode_id: needEpisode(s) }, options));
        return this.runtime.exportSnapshot({ snapshot_id: req.snapshot_id! }, options) satisfies Promise<WireResult<"export_snapshot">>;
      }
      case "import_snapshot":
        return this.runtime.importSnapshot(req.blob, { version: SERVER_VERSION, holder: client, maxBlobBytes: this.maxBlobBytes });
      case "stats": {
        // every counter of the runtime as it names it (one list: a new one cannot be left out here)
        const { episodes: _episodes, ...runtime } = this.runtime.stats();
        return {
          replica: this.replica,
          instance: this.instance,
          uptime_s: Math.round((Date.now() - this.started) / 1000),
          // the serve's supervisor restarted this slot once per instance before this one: the
          // count comes from the replica itself, so a watcher that never saw an earlier instance still learns of it
          restarts: this.options.previousInstances?.length ?? 0,
          sessions: this.sessions.size,
          requests: this.counters.requests,
          errors: this.counters.errors,
          retries: this.counters.retries,
          in_flight: this.inFlight - 1, // not counting this request
          ...runtime,
        } satisfies WireResult<"stats">;
      }
    }
  }

  private async reset(scenarioId: string, seed: number | undefined, sessionId: string | undefined, client: string, finishPrevious: boolean | "later", known?: KnownOpening): Promise<WireResult<"reset">> {
    if (sessionId === undefined) {
      requireScenario(this.runtime.registry, scenarioId);
      const s = this.sessions.openFor(client);
      try {
        return await this.sessions.runOn(s, (sess) => this.startEpisode(sess, scenarioId, seed, known));
      } catch (e) {
        this.sessions.remove(s.id, "never started: its first reset failed");
        throw e;
      }
    }
    return this.onSession(sessionId, async (s) => {
      // a reset in a session ends the session's episode first, whatever happens next: a reset that
      // then fails (an unknown scenario, an env fault) leaves the session with no episode (steps
      // answer `episode_done` until a reset succeeds), never with the old one still playing
      let previous: PreviousEpisode | undefined;
      // finish_previous: score and record the running episode's end (as `finish` would) in this
      // same request, so a client's reset of a live episode is one round trip, not two
      // "later": ended now, scored after the reply (episode_result fetches it), so the reply does
      // not wait for the scoring; past the pending bound the reset first waits for a score to arrive
      if (s.episodeId && finishPrevious === "later") {
        // an episode that had ended or died: as true says so
        previous = (await this.finishPreviousLater(s.episodeId)) ?? (await this.finishPrevious(s.episodeId));
      } else if (s.episodeId && finishPrevious) previous = await this.finishPrevious(s.episodeId);
      // not awaited: the close and the new reset reach the engine in one message, in that order,
      // so a reset in place costs one thread hop, not two (the session service forgets it first)
      this.sessions.endEpisode(s, (e, old) => this.log.warn({ err: e, episode: old }, "closing the previous episode of a session failed"));
      requireScenario(this.runtime.registry, scenarioId);
      const r = await this.startEpisode(s, scenarioId, seed, known);
      if (previous) r.info.previous_episode = previous;
      return r;
    });
  }

  /** Ends a session's running episode for a `reset` with `finish_previous`: its result, or why there is none. */
  private async finishPrevious(episodeId: string): Promise<PreviousEpisode> {
    try {
      return endedEpisode(episodeId, await this.runtime.finish(episodeId));
    } catch (e) {
      const error = errorBody(e);
      // episode_done: it had ended already (its result was its terminal step); nothing to score now
      return error.code === "episode_done" ? { episode_id: episodeId, finished: false } : { episode_id: episodeId, finished: false, error };
    }
  }

  /** Ends a session's running episode for a `reset` with `finish_previous: "later"`: what is known of its end now; null when it is not running. */
  private async finishPreviousLater(episodeId: string): Promise<PreviousEpisode | null> {
    try {
      const end = await this.runtime.finishLaterWhenRoom(episodeId);
      return end && { episode_id: episodeId, finished: true, pending: true, step: end.step, state_hash: end.state_hash };
    } catch (e) {
      const error = errorBody(e);
      return error.code === "episode_done" ? { episode_id: episodeId, finished: false } : { episode_id: episodeId, finished: false, error };
    }
  }

  /** Opens a session whose episode is a fork of a live episode or of a snapshot. */
  private async forkInto(source: { episode_id: string } | { snapshot_id: string }, from: { session_id?: string; snapshot_id?: string }, client: string): Promise<WireResult<"fork">> {
    const s = this.sessions.openFor(client);
    try {
      const r = await this.runtime.fork(source);
      s.episodeId = r.episode_id;
      return { session_id: s.id, info: this.forkInfo(r, from) };
    } catch (e) {
      this.sessions.remove(s.id, "never started: its fork failed");
      throw e;
    }
  }

  private forkInfo(r: ForkResult, from: { session_id?: string; snapshot_id?: string }): WireResult<"fork">["info"] {
    const found = this.runtime.registry.scenario(r.scenario_id);
    return {
      episode_id: r.episode_id, env_id: r.env_id, scenario_id: r.scenario_id, seed: r.seed, step: r.step, state_hash: r.state_hash,
      mode: found?.scenario.mode, tools: r.tools, forked_from: { ...from, step: r.forked_from.step },
    };
  }

  private async startEpisode(s: Session, scenarioId: string, seed: number | undefined, known?: KnownOpening): Promise<WireResult<"reset">> {
    const r = await this.runtime.reset(scenarioId, seed);
    s.episodeId = r.episode_id;
    // a copy of info (`previous_episode` goes on the reply, not on the runtime's result), less the
    // opening (~8 KB of tool schemas for library-1) when the client holds this very one
    const { introduction, rules, tools, ...rest } = r.info;
    const info = known && known.env_hash === r.info.env_hash && known.scenario_hash === r.info.scenario_hash ? { ...rest, opening_omitted: true as const } : { ...rest, introduction, rules, tools };
    return { session_id: s.id, observation: r.observation, info };
  }

  /** Runs `fn` on the session after its earlier requests (the session service's one ordering). */
  private onSession<T>(sessionId: string, fn: (s: Session) => Promise<T>): Promise<T> {
    return this.sessions.run(sessionId, fn);
  }

  /** Closes a session: from inside its own queue (`drain` false: its earlier requests are done) or after them. */
  private async closeSession(id: string, why: string, drain = true): Promise<void> {
    this.recent.forgetSession(id);
    await this.sessions.close(id, why, drain);
  }

  private async reapOne(s: Session): Promise<void> {
    this.log.info({ session: s.id }, "closing idle session");
    await this.closeSession(s.id, `closed by the idle reaper after ${this.limits.idleTimeoutS} s unused`);
  }

  /** An imported snapshot belongs to no session: one its client forgot goes the way of an idle session. */
  private async dropIdleImports(): Promise<void> {
    const dropped = await this.runtime.dropIdleImports(this.limits.idleTimeoutS * 1000);
    if (dropped) this.log.info({ dropped }, "dropped idle imported snapshots");
  }

  /** The largest snapshot blob export_snapshot hands out and import_snapshot takes: one frame, less room for its envelope. */
  get maxBlobBytes(): number {
    return Math.max(0, this.limits.maxFrameBytes - BLOB_ENVELOPE_BYTES);
  }

  get sessionCount(): number {
    return this.sessions.size;
  }

  /** Stops taking requests (they get `shutting_down`), lets in-flight ones finish (≤ graceMs), closes everything. */
  async stop(graceMs = 10_000): Promise<void> {
    if (this.stopping) return;
    this.stopping = true;
    this.sessions.stopReaper();
    if (this.inFlight > 0) {
      await Promise.race([new Promise<void>((r) => (this.idle = r)), new Promise((r) => setTimeout(r, graceMs))]);
    }
    for (const s of this.sessions.all()) await this.closeSession(s.id, "closed: the bridge shut down").catch(() => undefined);
    await this.sendTail;
    this.socket.close();
    await this.loop;
  }
}

/**
 * Optional behaviours a client detects in `hello`'s `features` before using them (docs/protocol.md
 * §8): `reset_finish_previous`: `reset` takes `finish_previous` and answers `info.previous_episode`;
 * `null_action`: a null action is an `invalid_action` observation, not a `bad_request`;
 * `reset_finish_previous_later`: `finish_previous: "later"` (scored after the reply; `episode_result`);
 * `reset_known_opening`: `reset` takes `known_opening` and then may leave the opening out of info.
 */
export const FEATURES = ["reset_finish_previous", "null_action", "reset_finish_previous_later", "reset_known_opening"] as const;

/** Ops whose repetition must not run twice (docs/protocol.md §3, retries). */
// export_snapshot changes nothing (and its reply is a blob too big to keep for minutes): a retry runs again
const RETRIED_OPS = new Set(["reset", "step", "step_batch", "finish", "close", "snapshot", "fork", "restore", "drop_snapshot", "import_snapshot"]);
/** Room left in a frame around a snapshot blob for the request or reply envelope. */
const BLOB_ENVELOPE_BYTES = 4096;

/** The session a request is about, when it names one (its retry replies are dropped when it closes). */
function sessionOf(req: Request): string | null {
  const sid = (req as { session_id?: unknown }).session_id;
  return typeof sid === "string" ? sid : null;
}

/**
 * A step result (step, finish, step_batch entries) as StepResultSchema takes it, compacted (each
 * tool output once, step-wire.ts). The engine's `StepInfo` is an interface, which the schema's loose
 * `info` object (an index signature) does not take as it is: its fields are spread into a literal, a
 * shallow copy of a few fields, and the compiler checks every one of them against the schema.
 */
function wireStep(r: StepResult): WireResult<"step"> {
  return compactStep({ observation: r.observation, reward: r.reward, terminated: r.terminated, truncated: r.truncated, info: { ...r.info } });
}

/** How an episode ended, as `info.previous_episode` and `episode_result` say it: from its scored end. */
function endedEpisode(episodeId: string, end: StepResult): PreviousEpisode & WireResult<"episode_result"> {
  const i = end.info;
  return {
    episode_id: episodeId, finished: true, reward: end.reward, terminated: end.terminated, truncated: end.truncated, step: i.step, state_hash: i.state_hash,
    ...(i.end_reason !== undefined ? { end_reason: i.end_reason } : {}), ...(i.reward_info !== undefined ? { reward_info: i.reward_info } : {}), ...(i.error !== undefined ? { error: i.error } : {}),
  };
}

function needEpisode(s: Session): string {
  if (!s.episodeId) throw new ProtocolError("episode_done", `session ${s.id} has no episode (its last reset failed); reset it`);
  return s.episodeId;
}

/** The request's id when it is a valid one (the same rule the schemas apply), else null. */
function readId(raw: unknown): number | string | null {
  const id = (raw as { id?: unknown } | null)?.id;
  return RequestId.safeParse(id).success ? (id as number | string) : null;
}

/** Every failure as a protocol error body (the wire's column of failure-table.ts); unknown failures are internal errors with their message. */
export function errorBody(e: unknown): ErrorBody {
  const f = failureOf(e);
  return { code: FAILURES[f.code].wire, message: f.message };
}
