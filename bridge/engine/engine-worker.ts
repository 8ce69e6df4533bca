// Engine worker: hosts many episodes' sandboxes in one thread. The pool's watchdog may terminate
// this thread at any time (a native builtin that ignores QuickJS's interrupt handler); episodes are
// then restored elsewhere from their recorded inputs, so nothing here may hold state that matters
// beyond what the pool already acknowledged.
import { AsyncLocalStorage } from "node:async_hooks";
import { parentPort, workerData } from "node:worker_threads";
import { EnvRegistry } from "../../envs/registry.js";
import { Episode, EpisodeStateError, type EpisodeSnapshot, type StepResult } from "../episode/episode.js";
import { EnvLoadError, warmEnv } from "../episode/env-session.js";
import { ReferenceCache } from "../episode/reference-state.js";
import { OpenAIUserSimulator, UserSimulatorError, type UserSimulator, type UserSimulatorConfig } from "../episode/user-simulator.js";
import { SandboxFault } from "../sandbox/sandbox-fault.js";
import { setCallMonitor } from "../sandbox/sandbox.js";
import { WATCH_DEADLINE, WATCH_EPISODE, type EngineReply, type EngineRequest } from "./messages.js";

process.env.TZ = "UTC";

interface WorkerInit {
  envPaths: string[];
  watch: SharedArrayBuffer;
  /** Episodes of this worker to ready sandboxes for before it says it is ready (see RuntimeOptions.warmSessions). */
  warmSessions: number;
}
const init = workerData as WorkerInit;
const port = parentPort!;
const registry = EnvRegistry.load(init.envPaths);
const references = new ReferenceCache();
const watch = new Float64Array(init.watch);
const current = new AsyncLocalStorage<number>();

setCallMonitor({
  start(deadlineMs) {
    watch[WATCH_EPISODE] = current.getStore() ?? -1;
    watch[WATCH_DEADLINE] = deadlineMs;
  },
  end() {
    watch[WATCH_DEADLINE] = 0;
  },
});

interface Hosted {
  episode: Episode;
  /** How many of the episode's simulated user replies the runtime has been sent already. */
  repliesSent: number;
}
const hosted = new Map<string, Hosted>();
/** Snapshots live in the worker that took them (their images are this thread's memory). */
const snapshots = new Map<string, EpisodeSnapshot>();

class RequestError extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

function episodeOptions(episodeId: string, scenarioId: string) {
  const found = registry.scenario(scenarioId);
  if (!found) throw new RequestError("unknown_scenario", `no scenario ${scenarioId}`);
  const { bundle, scenario } = found;
  return { bundle, scenario, episodeId, reference: (seed: number) => references.get(bundle, scenario.id, seed) };
}

async function fork(req: Extract<EngineRequest, { op: "fork" }>): Promise<{ value: unknown }> {
  let snap: EpisodeSnapshot | undefined;
  if (req.from_snapshot !== undefined) {
    snap = snapshots.get(req.from_snapshot);
    if (!snap) throw new RequestError("unknown_snapshot", `no snapshot ${req.from_snapshot} on this engine`);
  } else {
    const h = hosted.get(req.from_episode ?? "");
    if (!h) throw new RequestError("unknown_episode", `no episode ${req.from_episode} on this engine`);
    snap = h.episode.snapshot(false);
  }
  const o = episodeOptions(req.episode, snap.scenarioId);
  const episode = await Episode.fromSnapshot({ bundle: o.bundle, scenario: o.scenario, episodeId: req.episode, reference: () => o.reference(snap.seed) }, snap);
  hosted.set(req.episode, { episode, repliesSent: episode.inputs.user_replies.length });
  // the tools the fork shows are its source's at that point (a multi-turn task may have added some)
  return { value: { step: snap.steps, state_hash: snap.stateHash, done: false, tool_names: snap.progress.visibleTools.map((t) => t.function.name) } };
}

function makeEpisode(episodeId: string, scenarioId: string, seed: number, user: UserSimulatorConfig | null, prefill: string[] = []): Episode {
  const found = registry.scenario(scenarioId);
  if (!found) throw new RequestError("unknown_scenario", `no scenario ${scenarioId}`);
  const { bundle, scenario } = found;
  let sim: UserSimulator | undefined;
  if (scenario.mode === "conversation" && user) sim = new OpenAIUserSimulator(scenario.task, scenario.user_instructions ?? "", user, prefill, `${scenario.id}|${seed}`);
  return new Episode({
    bundle,
    scenario,
    seed,
    episodeId,
    user: sim,
    reference: () => references.get(bundle, scenario.id, seed),
  });
}

function newReplies(h: Hosted): string[] {
  const all = h.episode.inputs.user_replies;
  const out = all.slice(h.repliesSent);
  h.repliesSent = all.length;
  return out;
}

async function handle(req: EngineRequest): Promise<{ value: unknown; user_replies?: string[] }> {
  if (req.op === "reset" || req.op === "restore") {
    const restoring = req.op === "restore";
    const inputs = restoring ? req.inputs : undefined;
    const episode = makeEpisode(req.episode, inputs?.scenario_id ?? (req as { scenario_id: string }).scenario_id, inputs?.seed ?? (req as { seed: number }).seed, req.user, inputs?.user_replies);
    const h: Hosted = { episode, repliesSent: 0 };
    hosted.set(req.episode, h);
    try {
      const first = await episode.reset();
      if (!restoring) {
        // the env's introduction, rules and opening tools are the runtime's to add (it has the same
        // registry): ~8 KB of objects a reset need not clone across the thread boundary
        const { introduction: _i, rules: _r, tools: _t, ...info } = first.info;
        return { value: { observation: first.observation, info }, user_replies: newReplies(h) };
      }
      let last: StepResult | undefined;
      for (const action of inputs!.actions) last = await episode.step(action);
      h.repliesSent = episode.inputs.user_replies.length;
      const hash = last?.info.state_hash ?? first.info.state_hash;
      if (hash !== req.state_hash) throw new RequestError("env_crashed", `the episode could not be restored exactly (state hash ${hash} != ${req.state_hash})`);
      return { value: { restored: true, steps: inputs!.actions.length } };
    } catch (e) {
      hosted.delete(req.episode);
      episode.close();
      throw e;
    }
  }
  if (req.op === "fork") return fork(req);
  if (req.op === "drop_snapshot") return { value: snapshots.delete(req.snapshot) };
  const h = hosted.get(req.episode);
  if (!h) throw new RequestError("unknown_episode", `no episode ${req.episode} on this engine`);
  switch (req.op) {
    case "snapshot": {
      const snap = h.episode.snapshot(true);
      snapshots.set(req.snapshot, snap);
      return { value: { step: snap.steps, bytes: snap.bytes, state_hash: snap.stateHash } };
    }
    case "step":
      return { value: await h.episode.step(req.action), user_replies: newReplies(h) };
    case "finish":
      return { value: await h.episode.finish() };
    case "state":
      return { value: h.episode.stateJson() };
    case "close":
      h.episode.close();
      hosted.delete(req.episode);
      return { value: null };
  }
}

function toError(e: unknown): { code: string; message: string } {
  if (e instanceof RequestError) return { code: e.code, message: e.message };
  if (e instanceof EpisodeStateError) return { code: e.code, message: e.message };
  if (e instanceof EnvLoadError) return { code: "env_load_failed", message: e.message };
  if (e instanceof SandboxFault) return { code: e.code, message: e.message };
  if (e instanceof UserSimulatorError) return { code: "user_simulator_failed", message: e.message };
  return { code: "internal_error", message: e instanceof Error ? e.message : String(e) };
}

// replies finished in the same turn go back in one message (see EnvRuntime.flush)
let outbox: EngineReply[] = [];
function reply(r: EngineReply): void {
  outbox.push(r);
  if (outbox.length === 1)
    setImmediate(() => {
      const batch = outbox;
      outbox = [];
      port.postMessage(batch);
    });
}

port.on("message", (batch: (EngineRequest & { slot: number })[]) => {
  for (const req of batch) accept(req);
});

/**
 * Each episode's requests run one after another, in the order they crossed: its tail is kept from
 * the moment a request is accepted, so a step posted right behind a reset or restore (as a
 * recovery does) waits for it instead of finding a half-built episode. A fork of a live episode
 * also runs after that episode's earlier requests, and its later ones after it.
 */
const tails = new Map<string, Promise<unknown>>();

function accept(req: EngineRequest & { slot: number }): void {
  const source = req.op === "fork" ? req.from_episode : undefined;
  const before = [tails.get(req.episode), source !== undefined ? tails.get(source) : undefined].filter((t) => t !== undefined);
  let ok = true;
  const run = () =>
    current.run(req.slot, () => handle(req)).then(
      (r): EngineReply => ({ id: req.id, ok: true, value: r.value, ...(r.user_replies?.length ? { user_replies: r.user_replies } : {}) }),
      (e): EngineReply => ((ok = false), { id: req.id, ok: false, error: toError(e) }),
    );
  const done = (before.length ? Promise.all(before).then(run) : run()).then(reply);
  tails.set(req.episode, done);
  if (source !== undefined) tails.set(source, done);
  // nothing of the episode is left here after a close, or after a reset/restore/fork that failed
  void done.then(() => {
    if (tails.get(req.episode) === done && (req.op === "close" || (!ok && !hosted.has(req.episode)))) tails.delete(req.episode);
  });
}
// an env that does not load is reported by its first reset, as without warming
if (init.warmSessions > 0) for (const bundle of registry.list()) await warmEnv(bundle, init.warmSessions).catch(() => undefined);
port.postMessage({ ready: true });
