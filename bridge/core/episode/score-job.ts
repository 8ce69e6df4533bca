import type { Scenario } from "../../../envs/format/bundle-schema.js";
import type { EnvRegistry } from "../../../envs/format/registry.js";
import type { SandboxHost } from "../sandbox/sandbox-host.js";
import { bundleStateBase } from "../state/bundle-state.js";
import { StateView } from "../state/state-base.js";
import { runChecks, type ActionRecord, type CheckInputs } from "./checker.js";
import { seedWords } from "./env-session.js";
import type { Observation, StepInfo, StepResult } from "./episode.js";
import type { ReferenceCache } from "./reference-state.js";

/** A StateView as data: only what differs from its scenario's base, which the receiver rebuilds from its own registry. */
export interface ViewData {
  records: Map<string, Map<string, string | null>>;
  top: Map<string, string | { collection: true }>;
}

/**
 * Everything scoring an ended episode needs, as plain data a thread can be handed (structured
 * clone): the states as differences from the scenario's base, the calls and messages the checks
 * read, and the end the score completes. `env_hash` names the bundle's content: a scorer whose
 * registry holds other content for the env (its files changed since) refuses the job.
 */
export interface ScoreJob {
  env_id: string;
  env_hash: string;
  scenario_id: string;
  seed: number;
  initial: ViewData;
  final: ViewData;
  actions: ActionRecord[];
  messages: string[];
  end: { observation: Observation; info: StepInfo; truncated: boolean };
}

export function viewData(view: StateView): ViewData {
  return { records: view.records, top: view.top };
}

/** A ScoreJob's states and reference, rebuilt over this thread's registry: what runChecks takes. */
export function jobInputs(job: ScoreJob, registry: EnvRegistry, references: ReferenceCache): { initial: StateView; final: StateView; reference: () => ReturnType<ReferenceCache["get"]> } {
  const found = registry.scenario(job.scenario_id);
  if (!found || found.bundle.id !== job.env_id) throw new Error(`no scenario ${job.scenario_id} of ${job.env_id} in the scorer's envs`);
  const { bundle } = found;
  if (bundle.contentHash !== job.env_hash) throw new Error(`the scorer's copy of ${job.env_id} is not the episode's (its files changed since the bridge started)`);
  const base = bundleStateBase(bundle, job.scenario_id);
  return {
    initial: new StateView(base, job.initial.records, job.initial.top),
    final: new StateView(base, job.final.records, job.final.top),
    reference: () => references.get(bundle, job.scenario_id, job.seed),
  };
}

/**
 * Scores an ended episode: runs the scenario's checks and completes its end (`info.end_reason` set)
 * with the reward and reward_info. `pause` is awaited between JS checks (scoring in idle time
 * yields to requests there). The checks' seed is derived from the episode's.
 */
export async function scoreEnd(sandboxes: SandboxHost, scenario: Scenario, seed: number, inputs: CheckInputs, end: ScoreJob["end"], pause?: () => Promise<void>): Promise<StepResult> {
  const { checks } = scenario;
  const results = await runChecks(sandboxes, checks, inputs, seedWords(seed ^ 0x5eed), pause);
  const passed = results.filter((r) => r.passed).length;
  const all = scenario.reward === "all";
  const reward = checks.length === 0 ? 0 : all ? (passed === checks.length ? 1 : 0) : Math.round((passed / checks.length) * 10000) / 10000;
  const info: StepInfo = { ...end.info, reward_info: { checks: results, passed, total: checks.length, no_checks: checks.length === 0, mode: all ? "all" : "fraction" } };
  return { observation: end.observation, reward, terminated: !end.truncated, truncated: end.truncated, info };
}
