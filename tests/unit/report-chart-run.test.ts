// An episode the model endpoint or the bridge cut short reads as that on the charts, never as a
// score of 0 (a new user's pass found it charted as "finished by the client" with reward 0).
import { expect, test } from "vitest";
import { chartRunOf } from "../../agent/report-page.js";
import { reportCharts } from "../../bridge/record/report-charts.js";
import type { RolloutResults } from "../../agent/summarize.js";

const row = (over: Partial<RolloutResults["episodes"][number]>): RolloutResults["episodes"][number] =>
  ({ key: "k", scenario_id: "library-1", env_id: "library-v1", trial: 0, seed: 1, reward: 0, success: false, end_reason: "client", steps: 0, prompt_tokens: 0, completion_tokens: 0, model_ms: 0, failures: [], ...over }) as RolloutResults["episodes"][number];

test("endpoint and bridge errors are their own end reason with no reward; other episodes keep theirs", () => {
  const results = { totals: { pass_hat_k: {} }, episodes: [row({ failures: ["endpoint_error"] }), row({ failures: ["bridge_error"], end_reason: null }), row({ reward: 1, success: true, end_reason: "text_reply" })] } as unknown as RolloutResults;
  const run = chartRunOf(results, "a");
  expect(run.episodes.map((e) => [e.end, e.reward])).toEqual([["endpoint_error", null], ["bridge_error", null], ["text_reply", 1]]);
  const svg = reportCharts([run]);
  expect(svg).toContain("model endpoint error");
  expect(svg).not.toContain("finished by the client");
});
