import { bundleStateBase } from "../state/bundle-state.js";
import type { EnvBundle } from "../../../envs/format/load-bundle.js";
import type { SandboxLimits } from "../sandbox/limits.js";
import { SandboxFault } from "../sandbox/sandbox-fault.js";
import type { SandboxHost } from "../sandbox/sandbox-host.js";
import type { StateView } from "../state/state-base.js";
import { EnvLoadError, EnvSession } from "./env-session.js";

/** A reference state, and whether it is the same for every seed (the replay drew no random number). */
export interface ReferenceReplay {
  state: StateView | { error: string };
  seedFree: boolean;
}

/**
 * Replays a scenario's reference actions on a fresh env with the same seed and returns the state
 * they produce. Tool errors along the way are part of the reference (tau-bench ground truths contain
 * calls that fail); only an env fault or a missing reference is an error.
 */
export async function referenceState(sandboxes: SandboxHost, bundle: EnvBundle, scenarioId: string, seed: number, limits?: Partial<SandboxLimits>): Promise<StateView | { error: string }> {
  return (await replayReference(sandboxes, bundle, scenarioId, seed, limits)).state;
}

async function replayReference(sandboxes: SandboxHost, bundle: EnvBundle, scenarioId: string, seed: number, limits?: Partial<SandboxLimits>): Promise<ReferenceReplay> {
  const scenario = bundle.scenario(scenarioId);
  // no replay at all: the same answer whatever the seed
  if (!scenario?.reference_actions) return { state: { error: "the scenario has no reference actions" }, seedFree: true };
  let session: EnvSession | undefined;
  try {
    session = await EnvSession.open(bundle, bundleStateBase(bundle, scenarioId), { seed, limits, sandboxes });
    for (const a of scenario.reference_actions) session.call(a.name, a.arguments);
    // the seed reaches a guest only through Math.random (the clock starts where the manifest says)
    return { state: session.tracker.snapshot(), seedFree: session.randomDraws() === 0 };
  } catch (e) {
    if (e instanceof SandboxFault || e instanceof EnvLoadError) return { state: { error: `replaying the reference failed: ${e.message}` }, seedFree: false };
    throw e;
  } finally {
    session?.dispose();
  }
}

/**
 * Caches reference states per (env content, scenario, seed); they are immutable views. A scenario
 * whose replay drew no random number has one reference for every seed: it is kept once, and
 * episodes of any seed use it (a rollout runs each scenario under many seeds, and a replay costs as
 * much as the episode it scores).
 */
export class ReferenceCache {
  private readonly entries = new Map<string, Promise<ReferenceReplay>>();
  /** Per (env content, scenario): the first replay, while its seed-dependence is not known yet. */
  private readonly first = new Map<string, Promise<ReferenceReplay>>();
  /** How many replays this cache has made (the rest were answered from memory). */
  replays = 0;
  constructor(
    /** Where the replays' sandboxes take their instances (the engine's host; episodes scored against this cache use it too). */
    readonly sandboxes: SandboxHost,
    private readonly maxEntries = 256,
  ) {}

  async get(bundle: EnvBundle, scenarioId: string, seed: number, limits?: Partial<SandboxLimits>): Promise<StateView | { error: string }> {
    const scenarioKey = `${bundle.contentHash}\u0000${scenarioId}`;
    const anySeed = `${scenarioKey}\u0000*`;
    let hit = this.lookup(anySeed);
    if (!hit) {
      // episodes finishing together (a lockstep rollout) wait for one replay rather than each making its own
      const first = this.first.get(scenarioKey);
      if (first && (await first).seedFree) return (await first).state;
      const key = `${scenarioKey}\u0000${seed}`;
      hit = this.lookup(key);
      if (!hit) {
        hit = replayReference(this.sandboxes, bundle, scenarioId, seed, limits);
        this.replays++;
        this.put(key, hit);
        if (!first) {
          this.first.set(scenarioKey, hit);
          try {
            if ((await hit).seedFree) this.put(anySeed, hit);
          } finally {
            this.first.delete(scenarioKey);
          }
        }
      }
    }
    return (await hit).state;
  }

  private lookup(key: string): Promise<ReferenceReplay> | undefined {
    const hit = this.entries.get(key);
    if (hit) {
      this.entries.delete(key); // refresh LRU position
      this.entries.set(key, hit);
    }
    return hit;
  }

  private put(key: string, value: Promise<ReferenceReplay>): void {
    if (this.entries.size >= this.maxEntries) this.entries.delete(this.entries.keys().next().value as string);
    this.entries.set(key, value);
  }
}
