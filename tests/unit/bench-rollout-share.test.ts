// The bench's rollout row (issue 15's target) is only a measurement of full episodes if the
// fixture model really plays the scenarios and the time split adds up; checked here on a small,
// fast run (no timing thresholds: the figures themselves belong to `npm run bench -- --only rollout`).
import { pino } from "pino";
import { expect, test } from "vitest";
import { measureRolloutShare } from "../../bench/rollout-share.js";
import { BUNDLED_ENVS } from "../../envs/bundled.js";
import { EnvRegistry } from "../../envs/format/registry.js";

test("the rollout-share measurement plays every bundled task scenario to its end and splits each episode's time into model, bridge and agent loop", async () => {
  const tasks = EnvRegistry.load([BUNDLED_ENVS])
    .list()
    .flatMap((b) => [...b.scenarios.values()])
    .filter((s) => s.mode === "task" && (s.reference_actions?.length ?? 0) > 0);
  const m = await measureRolloutShare({ latencyMs: 20, jitter: 0.5, concurrency: 8, replicas: 1, trials: 1, logger: pino({ level: "silent" }) });
  expect(m.episodes).toBe(tasks.length);
  // one call per reference action, then "Task Completed"
  expect(m.model_calls).toBe(tasks.reduce((a, s) => a + s.reference_actions!.length + 1, 0));
  expect(m.max_in_flight).toBeGreaterThan(1);
  expect(m.max_in_flight).toBeLessThanOrEqual(8);
  // the reference actions and messages solve every task
  expect(m.mean_reward).toBe(1);
  expect(m.model_ms).toBeGreaterThan(0);
  expect(m.bridge_ms).toBeGreaterThan(0);
  expect(m.model_ms + m.bridge_ms).toBeLessThanOrEqual(m.episode_ms);
  expect(m.bridge_share + m.agent_share).toBeCloseTo((m.episode_ms - m.model_ms) / m.episode_ms, 9);
  expect(m.warm_up_ms).toBeGreaterThan(0);
}, 120_000);
