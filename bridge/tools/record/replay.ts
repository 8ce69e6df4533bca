import { EnvRegistry } from "../../../envs/format/registry.js";
import { Episode, type StepResult } from "../../core/episode/episode.js";
import { ReferenceCache } from "../../core/episode/reference-state.js";
import { SandboxHost } from "../../core/sandbox/sandbox-host.js";
import { ScriptedUserSimulator } from "../../core/episode/user-simulator.js";
import { canonicalJson } from "../../../protocol/canonical-json.js";
import type { RecordedEpisode } from "./trajectory-reader.js";

export interface Divergence {
  /** 0 is the reset. */
  step: number;
  what: string;
  expected: string;
  actual: string;
}

export interface ReplayResult {
  episode_id: string;
  scenario_id: string;
  /** Every replayed step matched the recording (for an incomplete episode: up to its last record). */
  ok: boolean;
  /** False when the recording stops mid-episode (no episode_end, no terminal step): only what was recorded is replayed. */
  complete: boolean;
  steps: number;
  /** The env or scenario source changed since the recording (replay still runs, to show where it matters). */
  changed: string[];
  divergence?: Divergence;
}

const clip = (s: string, n = 400) => (s.length > n ? `${s.slice(0, n)}…` : s);

/** Where two texts first differ, with some context on both sides. */
export function firstDifference(expected: string, actual: string): { expected: string; actual: string } {
  let i = 0;
  while (i < expected.length && i < actual.length && expected[i] === actual[i]) i++;
  const from = Math.max(0, i - 60);
  const show = (s: string) => `${from > 0 ? "…" : ""}${clip(s.slice(from), 200)}`;
  return { expected: show(expected), actual: show(actual) };
}

type Compared = { observation: unknown; state_hash: string; reward?: number; terminated?: boolean; diff?: unknown[] };

function compare(step: number, recorded: Compared, got: Compared): Divergence | undefined {
  const eo = canonicalJson(recorded.observation);
  const ao = canonicalJson(got.observation);
  if (eo !== ao) return { step, what: "observation", ...firstDifference(eo, ao) };
  if (recorded.state_hash !== got.state_hash) {
    return { step, what: "state (the diffs of this step differ)", expected: clip(canonicalJson(recorded.diff ?? [])), actual: clip(canonicalJson(got.diff ?? [])) };
  }
  if (recorded.reward !== undefined && recorded.reward !== got.reward) return { step, what: "reward", expected: String(recorded.reward), actual: String(got.reward) };
  if (recorded.terminated !== undefined && recorded.terminated !== got.terminated) return { step, what: "terminated", expected: String(recorded.terminated), actual: String(got.terminated) };
  return undefined;
}

/**
 * Re-executes a recorded episode in fresh sandboxes and compares every observation, state hash
 * and reward with the recording. No LLM is called: the simulated user's recorded replies are
 * played back. Exact replay holds because the sandbox's randomness and clock come from the seed.
 */
export async function replayEpisode(registry: EnvRegistry, rec: RecordedEpisode, sandboxes: SandboxHost, references = new ReferenceCache(sandboxes)): Promise<ReplayResult> {
  const s = rec.start;
  const base = { episode_id: s.episode_id, scenario_id: s.scenario_id, complete: rec.complete, steps: 0, changed: [] as string[] };
  const found = registry.scenario(s.scenario_id);
  if (!found) return { ...base, ok: false, divergence: { step: 0, what: "scenario", expected: s.scenario_id, actual: "not in the given envs" } };
  const { bundle, scenario } = found;
  const episode = new Episode({
    bundle,
    scenario,
    seed: s.seed,
    episodeId: s.episode_id,
    user: scenario.mode === "conversation" && rec.userReplies.length ? new ScriptedUserSimulator(rec.userReplies) : undefined,
    reference: () => references.get(bundle, scenario.id, s.seed),
    sandboxes,
  });
  try {
    const first = await episode.reset();
    if (first.info.env_hash !== s.env_hash) base.changed.push(`env ${bundle.id} (hash ${s.env_hash.slice(0, 12)} → ${first.info.env_hash.slice(0, 12)})`);
    if (first.info.scenario_hash !== s.scenario_hash) base.changed.push(`scenario ${scenario.id}`);
    // a fork's recording starts where it was forked: its prefix (every action since the reset) runs first, unrecorded
    const prefix = s.prefix_actions ?? [];
    const d0 = compare(0, { observation: s.observation, state_hash: prefix.length ? first.info.state_hash : s.state_hash }, { observation: first.observation, state_hash: first.info.state_hash });
    if (d0) return { ...base, ok: false, divergence: d0 };
    if (prefix.length) {
      let hash = first.info.state_hash;
      for (const action of prefix) hash = (await episode.step(action)).info.state_hash;
      if (hash !== s.state_hash) return { ...base, ok: false, divergence: { step: prefix.length, what: `state at the fork point (after ${prefix.length} prefix actions)`, expected: s.state_hash, actual: hash } };
    }
    let steps = 0;
    for (const r of rec.steps) {
      const got: StepResult = await episode.step(r.action);
      steps++;
      const d = compare(r.step, r, { observation: got.observation, state_hash: got.info.state_hash, reward: got.reward, terminated: got.terminated, diff: got.info.diff });
      if (d) return { ...base, steps, ok: false, divergence: d };
    }
    if (rec.end?.how === "finish" && rec.end.result) {
      const got = await episode.finish();
      const d = compare(rec.end.result.step, rec.end.result, { observation: got.observation, state_hash: got.info.state_hash, reward: got.reward, terminated: got.terminated, diff: got.info.diff });
      if (d) return { ...base, steps, ok: false, divergence: d };
    }
    return { ...base, steps, ok: true };
  } finally {
    episode.close();
  }
}

/** `sandboxes`: the host the replays' sandboxes take instances from (the replay worker's); none: one of its own, disposed when they end. */
export async function replayAll(envs: string[], episodes: RecordedEpisode[], sandboxes?: SandboxHost): Promise<ReplayResult[]> {
  const registry = EnvRegistry.load(envs);
  using own = sandboxes ? null : new SandboxHost({ label: "replayAll" });
  const host = sandboxes ?? own!;
  const refs = new ReferenceCache(host);
  const out: ReplayResult[] = [];
  for (const e of episodes) out.push(await replayEpisode(registry, e, host, refs));
  return out;
}
