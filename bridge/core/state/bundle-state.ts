import type { EnvBundle } from "../../../envs/format/load-bundle.js";
import { StateBase, type JsonObject } from "./state-base.js";

// Loading a bundle (envs/) and building its states (here) are separate layers: envs/ only holds
// the parsed files. The bases are built lazily, once per bundle, and shared by every episode.
const built = new WeakMap<EnvBundle, { default: StateBase; scenarios: Map<string, StateBase> }>();

/** The initial state of a scenario (or the env's default state when `scenarioId` is undefined). */
export function bundleStateBase(bundle: EnvBundle, scenarioId?: string): StateBase {
  let b = built.get(bundle);
  if (!b) {
    const base = bundle.defaultStateText !== undefined ? StateBase.fromStateText(bundle.defaultStateText) : StateBase.fromState(bundle.defaultState);
    built.set(bundle, (b = { default: base, scenarios: new Map() }));
  }
  if (scenarioId === undefined) return b.default;
  let base = b.scenarios.get(scenarioId);
  if (!base) {
    const s = bundle.scenarios.get(scenarioId);
    if (!s) throw new Error(`unknown scenario ${scenarioId}`);
    base = s.initial_state ? StateBase.fromState(s.initial_state) : s.state_overrides ? b.default.withOverrides(s.state_overrides) : b.default;
    b.scenarios.set(scenarioId, base);
  }
  return base;
}

/** The full initial state of a scenario as a plain object (for validation; avoid on hot paths). */
export function bundleInitialState(bundle: EnvBundle, scenarioId?: string): JsonObject {
  return JSON.parse(bundleStateBase(bundle, scenarioId).toJson()) as JsonObject;
}
