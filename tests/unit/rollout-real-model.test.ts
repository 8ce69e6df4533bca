import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect, test } from "vitest";
import { runRollout } from "../../agent/rollout.js";
import { createLogger } from "../../bridge/fronts/zmq/logger.js";
import { Supervisor } from "../../bridge/fronts/zmq/supervisor.js";
import { BUNDLED_ENVS } from "../../envs/bundled.js";

/**
 * Opt-in: a real small model (../shared/tools/local-llm, e.g. `start.sh --model 0.5b --port 8080`)
 * plays bundled task scenarios in both agent modes. It asserts structure only (small models do
 * badly at the tasks): every episode ends, is recorded and scored, and whatever the model wrote
 * was handled. Run with LOCAL_LLM_URL=http://127.0.0.1:8080/v1 [LOCAL_LLM_MODEL=qwen2.5-coder-0.5b].
 */
const URL = process.env.LOCAL_LLM_URL;

test.skipIf(!URL)("a real model (LOCAL_LLM_URL) plays bundled task scenarios in fc and prompt mode: every episode ends, scored and recorded", async () => {
  const out = mkdtempSync(join(tmpdir(), "envscaler-real-"));
  const supervisor = new Supervisor({ envs: [BUNDLED_ENVS], endpoint: "tcp://127.0.0.1:*", replicas: 1, recordDir: join(out, "trajectories"), logger: createLogger("test-real-model") });
  const { endpoints } = await supervisor.start();
  try {
    for (const agentMode of ["fc", "prompt"] as const) {
      const run = await runRollout({
        endpoints,
        scenarios: ["library-1", "bank-2"],
        trials: 1,
        seed: 0,
        concurrency: 1,
        agent: { agentMode, maxSteps: 4 },
        model: { baseURL: URL!, apiKey: "sk-local", model: process.env.LOCAL_LLM_MODEL ?? "qwen2.5-coder-0.5b", sampling: { temperature: 0, max_tokens: 256 }, timeoutMs: 300_000, maxRetries: 1 },
        out: join(out, agentMode),
        trajectoriesDir: join(out, "trajectories"),
        settings: { benchmark: null, user: null },
      });
      const r = run.results;
      console.log(`${agentMode}: ${JSON.stringify(r.totals)}\n${JSON.stringify(r.episodes, null, 1)}`);
      expect(r.episodes).toHaveLength(2);
      for (const e of r.episodes) {
        expect(e.episode_id).toBeTruthy();
        expect(e.steps).toBeGreaterThan(0);
        expect(e.completion_tokens).toBeGreaterThan(0);
        expect(e.end_reason).not.toBeNull();
        expect(e.page).toBeTruthy();
      }
    }
  } finally {
    await supervisor.stop();
  }
}, 1_800_000);
