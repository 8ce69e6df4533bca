// An episode the model endpoint or the bridge cut short reads as that on the charts, never as a
// score of 0 (a new user's pass found it charted as "finished by the client" with reward 0).
import { expect, test } from "vitest";
import { chartRunOf } from "../../agent/report-page.js";
import { reportCharts } from "../../bridge/tools/record/report-charts.js";
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

test("pass^k: where both runs have the same value at a k, one label names both (two labels there overlapped)", () => {
  const run = (label: string, at2: number) => ({ label, episodes: [], passHatK: { "1": 0, "2": at2 } });
  const svg = reportCharts([run("a", 0.25), run("b", 0.5)]);
  const passk = svg.slice(svg.indexOf("<svg id=\"ch-passk\""), svg.indexOf("</svg>", svg.indexOf("<svg id=\"ch-passk\"")));
  expect(passk.match(/>A, B: 0%</g)).toHaveLength(1); // k = 1: both at 0%
  expect(passk.match(/>0%</g)?.length ?? 0).toBe(1); // and no second "0%" label beside it (the one left is the axis tick)
  expect(passk).toContain(">25%<"); // k = 2 differs: each run its own label
  expect(passk).toContain(">50%<");
});
