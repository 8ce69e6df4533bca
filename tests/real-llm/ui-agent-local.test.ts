// Opt-in (LOCAL_LLM=1): a real small model plays a bundled scenario from the playground (the
// `envscaler ui` agent run, streamed as server-sent events), e.g. against ../shared/tools/local-llm
// (`start.sh --model 0.5b --port 8080`). It asserts structure only (every turn streamed with its
// result and score, the run ends, the episode stays usable): a tiny model's answers are no gate.
//
//   LOCAL_LLM=1 LOCAL_LLM_BASE_URL=http://127.0.0.1:8080/v1 LOCAL_LLM_MODEL=qwen2.5-coder-0.5b \
//     npx vitest run tests/real-llm/ui-agent-local.test.ts
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, test } from "vitest";
import { ModelAgentPlayer } from "../../agent/ui-agent-player.js";
import { UiServer } from "../../bridge/fronts/ui/ui-server.js";
import { BUNDLED_ENVS } from "../../envs/bundled.js";

const ON = process.env.LOCAL_LLM === "1";
const BASE_URL = process.env.LOCAL_LLM_BASE_URL ?? "http://127.0.0.1:8080/v1";
const MODEL = process.env.LOCAL_LLM_MODEL ?? "qwen2.5-coder-0.5b";

describe.skipIf(!ON)("the playground's agent with a real small model (opt-in: LOCAL_LLM=1 and a server at LOCAL_LLM_BASE_URL)", () => {
  test.each(["fc", "prompt"])("%s mode: every turn streamed, the run ends, the episode can be undone", async (mode) => {
    const ui = await UiServer.start({ envs: [BUNDLED_ENVS], trajectories: join(mkdtempSync(join(tmpdir(), "envscaler-ui-llm-")), "none"), port: 0, agentPlayer: new ModelAgentPlayer() });
    try {
      const post = async (path: string, body: unknown) => {
        const res = await fetch(new URL(path, ui.url), { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
        const value = (await res.json()) as Record<string, any>;
        if (res.status !== 200) throw new Error(`${path}: ${res.status} ${JSON.stringify(value)}`);
        return value;
      };
      const { run_id } = await post("/api/agent/start", { page: "llm", scenario_id: "library-1", seed: 1, base_url: BASE_URL, model: MODEL, agent_mode: mode, max_steps: 3, timeout_s: 300 });
      const text = await (await fetch(new URL(`/api/agent/events?run_id=${run_id}`, ui.url))).text();
      const events = text.split("\n\n").filter((b) => b.trim()).map((b) => JSON.parse(b.split("\n").find((l) => l.startsWith("data: "))!.slice(6)) as Record<string, any>);
      const end = events.at(-1)!;
      console.log(JSON.stringify({ mode, events: events.map((e) => e.type), outcome: end.outcome }));
      expect(events[0]!.type).toBe("start");
      expect(end.type).toBe("end");
      const steps = events.filter((e) => e.type === "step");
      expect(steps.length).toBeGreaterThanOrEqual(1);
      for (const s of steps) expect(s.result.info.step).toBeGreaterThanOrEqual(1);
      expect(end.outcome.steps).toBeLessThanOrEqual(3);
      expect(end.outcome.failures.filter((f: { kind: string }) => f.kind === "endpoint_error" || f.kind === "bridge_error")).toEqual([]);
      // the model's episode is the page's: undo its last step or finish
      expect((await post("/api/play/undo", { episode_id: events[0]!.episode_id })).step).toBeLessThanOrEqual(steps.at(-1)!.result.info.step);
    } finally {
      await ui.close();
    }
  }, 900_000);
});
