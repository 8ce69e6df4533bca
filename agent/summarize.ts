import { passHatK } from "../bridge/tools/record/pass-hat-k.js";
import { FAILURE_KINDS, type EpisodeOutcome, type FailureKind } from "./run-episode.js";

/** What a run was: enough to compare its numbers with another run's (or a paper's table). */
export interface RunSettings {
  /** The benchmark protocol (`eval`), or null for a plain rollout. */
  benchmark: { name: string; data_version: string; split: string; protocol: string; /** Why the score is not comparable with published ones (a changed step cap, no simulated user). */ not_comparable?: string[] } | null;
  model: string;
  base_url: string;
  agent_mode: string;
  /** "default", or the file the instructions came from. */
  system_prompt: string;
  sampling: Record<string, unknown>;
  trials: number;
  max_steps: number | null;
  user: { model: string | null; base_url: string | null; temperature?: number } | null;
  scenarios: string[];
  seed: number;
}

export interface GroupStats {
  episodes: number;
  mean_reward: number;
  success_rate: number;
  /** k → pass^k, k = 1..trials. */
  pass_hat_k: Record<string, number | null>;
}

export interface EpisodeRow {
  key: string;
  episode_id: string | null;
  scenario_id: string;
  env_id: string;
  trial: number;
  seed: number;
  reward: number;
  success: boolean;
  end_reason: string | null;
  steps: number;
  prompt_tokens: number;
  completion_tokens: number;
  model_ms: number;
  failures: FailureKind[];
  /** The episode's page, relative to the report, when its trajectory was available. */
  page?: string;
}

export interface RolloutResults {
  format: "envscaler.rollout-results/v1";
  settings: RunSettings;
  started: string;
  finished: string;
  planned: number;
  totals: GroupStats & { mean_steps: number; mean_prompt_tokens: number; mean_completion_tokens: number; model_calls: number; model_retries: number; wall_s: number; completion_tokens_per_s: number };
  per_env: (GroupStats & { env_id: string })[];
  per_scenario: { scenario_id: string; env_id: string; trials: number; successes: number; mean_reward: number; mean_steps: number; mean_tokens: number }[];
  failures: Record<FailureKind, { episodes: number; occurrences: number; keys: string[] }>;
  episodes: EpisodeRow[];
}

const mean = (xs: number[]) => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : 0);

function group(eps: EpisodeOutcome[], trials: number): GroupStats {
  const byScenario = new Map<string, { n: number; c: number }>();
  for (const e of eps) {
    const t = byScenario.get(e.scenario_id) ?? { n: 0, c: 0 };
    t.n++;
    if (e.success) t.c++;
    byScenario.set(e.scenario_id, t);
  }
  const pass_hat_k: Record<string, number | null> = {};
  for (let k = 1; k <= trials; k++) pass_hat_k[k] = passHatK([...byScenario.values()], k);
  return { episodes: eps.length, mean_reward: mean(eps.map((e) => e.reward)), success_rate: mean(eps.map((e) => (e.success ? 1 : 0))), pass_hat_k };
}

export function summarize(settings: RunSettings, outcomes: EpisodeOutcome[], o: { started: string; planned: number; wall_s: number; pages?: Map<string, string> }): RolloutResults {
  const eps = [...outcomes].sort((a, b) => a.scenario_id.localeCompare(b.scenario_id) || a.trial - b.trial);
  const envs = [...new Set(eps.map((e) => e.env_id))].sort();
  const scenarios = [...new Set(eps.map((e) => e.scenario_id))];
  const failures = Object.fromEntries(FAILURE_KINDS.map((k) => [k, { episodes: 0, occurrences: 0, keys: [] as string[] }])) as RolloutResults["failures"];
  for (const e of eps)
    for (const k of new Set(e.failures.map((f) => f.kind))) {
      failures[k].episodes++;
      failures[k].occurrences += e.failures.filter((f) => f.kind === k).length;
      failures[k].keys.push(e.key);
    }
  const completion = eps.reduce((s, e) => s + e.usage.completion_tokens, 0);
  const modelS = eps.reduce((s, e) => s + e.model_ms, 0) / 1000;
  return {
    format: "envscaler.rollout-results/v1",
    settings,
    started: o.started,
    finished: new Date().toISOString(),
    planned: o.planned,
    totals: {
      ...group(eps, settings.trials),
      mean_steps: mean(eps.map((e) => e.steps)),
      mean_prompt_tokens: mean(eps.map((e) => e.usage.prompt_tokens)),
      mean_completion_tokens: mean(eps.map((e) => e.usage.completion_tokens)),
      model_calls: eps.reduce((s, e) => s + e.model_calls, 0),
      // attempts beyond the first, on transport errors, timeouts, 429 and 5xx (including those of failed calls)
      model_retries: eps.reduce((s, e) => s + e.turns.reduce((a, t) => a + Math.max(0, t.attempts - 1), 0) + e.failures.reduce((a, f) => a + Math.max(0, (f.attempts ?? 1) - 1), 0), 0),
      wall_s: o.wall_s,
      // per second of model time summed over calls (concurrency does not inflate it)
      // per second the model took in all (prompt processing included): a generation speed it is not
      completion_tokens_per_s: modelS > 0 ? completion / modelS : 0,
    },
    per_env: envs.map((env_id) => ({ env_id, ...group(eps.filter((e) => e.env_id === env_id), settings.trials) })),
    per_scenario: scenarios.map((scenario_id) => {
      const s = eps.filter((e) => e.scenario_id === scenario_id);
      return {
        scenario_id,
        env_id: s[0]!.env_id,
        trials: s.length,
        successes: s.filter((e) => e.success).length,
        mean_reward: mean(s.map((e) => e.reward)),
        mean_steps: mean(s.map((e) => e.steps)),
        mean_tokens: mean(s.map((e) => e.usage.prompt_tokens + e.usage.completion_tokens)),
      };
    }),
    failures,
    episodes: eps.map((e) => ({
      key: e.key,
      episode_id: e.episode_id,
      scenario_id: e.scenario_id,
      env_id: e.env_id,
      trial: e.trial,
      seed: e.seed,
      reward: e.reward,
      success: e.success,
      end_reason: e.end_reason,
      steps: e.steps,
      prompt_tokens: e.usage.prompt_tokens,
      completion_tokens: e.usage.completion_tokens,
      model_ms: Math.round(e.model_ms),
      failures: [...new Set(e.failures.map((f) => f.kind))],
      ...(e.episode_id && o.pages?.has(e.episode_id) ? { page: o.pages.get(e.episode_id) } : {}),
    })),
  };
}
