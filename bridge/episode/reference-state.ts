import { bundleStateBase } from "../state/bundle-state.js";
import type { EnvBundle } from "../../envs/load-bundle.js";
import type { SandboxLimits } from "../sandbox/limits.js";
import { SandboxFault } from "../sandbox/sandbox-fault.js";
import type { StateView } from "../state/state-base.js";
import { EnvLoadError, EnvSession } from "./env-session.js";

/**
 * Replays a scenario's reference actions on a fresh env with the same seed and returns the state
 * they produce. Tool errors along the way are part of the reference (tau-bench ground truths contain
 * calls that fail); only an env fault or a missing reference is an error.
 */
export async function referenceState(bundle: EnvBundle, scenarioId: string, seed: number, limits?: Partial<SandboxLimits>): Promise<StateView | { error: string }> {
  const scenario = bundle.scenario(scenarioId);
  if (!scenario?.reference_actions) return { error: "the scenario has no reference actions" };
  let session: EnvSession | undefined;
  try {
    session = await EnvSession.open(bundle, bundleStateBase(bundle, scenarioId), { seed, limits });
    for (const a of scenario.reference_actions) session.call(a.name, a.arguments);
    return session.tracker.snapshot();
  } catch (e) {
    if (e instanceof SandboxFault || e instanceof EnvLoadError) return { error: `replaying the reference failed: ${e.message}` };
    throw e;
  } finally {
    session?.dispose();
  }
}

/** Caches reference states per (env content, scenario, seed); they are immutable views. */
export class ReferenceCache {
  private readonly entries = new Map<string, Promise<StateView | { error: string }>>();
  constructor(private readonly maxEntries = 256) {}

  get(bundle: EnvBundle, scenarioId: string, seed: number, limits?: Partial<SandboxLimits>): Promise<StateView | { error: string }> {
    const key = `${bundle.contentHash}\u0000${scenarioId}\u0000${seed}`;
    let hit = this.entries.get(key);
    if (hit) {
      this.entries.delete(key); // refresh LRU position
    } else {
      hit = referenceState(bundle, scenarioId, seed, limits);
      if (this.entries.size >= this.maxEntries) this.entries.delete(this.entries.keys().next().value as string);
    }
    this.entries.set(key, hit);
    return hit;
  }
}
