// Opt-in (LOCAL_LLM=1): synth and agent episodes against a real small model behind an
// OpenAI-compatible endpoint, e.g. ../shared/tools/local-llm (`start.sh --model 0.5b --port 8080`).
// It measures plumbing on real model output (parse rate, re-asks, truncations, timeouts, wall
// time) and asserts structure only: a tiny model's answers are not a quality gate.
//
//   LOCAL_LLM=1 LOCAL_LLM_BASE_URL=http://127.0.0.1:8080/v1 LOCAL_LLM_MODEL=qwen2.5-coder-0.5b \
//     npx vitest run tests/real-llm
//
// Sizes: LOCAL_LLM_SYNTH_TASKS (API-Bank task lines, default 3), LOCAL_LLM_AGENT_SCENARIOS
// (bundled task scenarios, default 4), LOCAL_LLM_AGENT_STEPS (default 6). The figures go to stdout
// and to LOCAL_LLM_REPORT (default /tmp/envscaler-local-llm.json).
import { existsSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import OpenAI from "openai";
import { describe, expect, test } from "vitest";
import { EnvRuntime } from "../../bridge/engine/env-runtime.js";
import { BUNDLED_ENVS } from "../../envs/bundled.js";
import { EnvRegistry } from "../../envs/registry.js";
import { LlmClient } from "../../synth/llm/llm-client.js";
import { runSynth } from "../../synth/pipeline.js";
import { prefilterReason, readTaskTexts } from "../../synth/stages/mine.js";
import { needsShared, sharedPath } from "../shared-data.js";

const API_BANK = sharedPath("datasets", "api-bank", "lv3-train.json");
const ON = process.env.LOCAL_LLM === "1";
const BASE_URL = process.env.LOCAL_LLM_BASE_URL ?? "http://127.0.0.1:8080/v1";
const MODEL = process.env.LOCAL_LLM_MODEL ?? "qwen2.5-coder-0.5b";
const num = (name: string, d: number) => Number(process.env[name] ?? d) || d;
const report: Record<string, unknown> = { model: MODEL, base_url: BASE_URL, started: new Date().toISOString() };
const save = () => writeFileSync(process.env.LOCAL_LLM_REPORT ?? "/tmp/envscaler-local-llm.json", `${JSON.stringify(report, null, 1)}\n`);

describe.skipIf(!ON)("a real small model (opt-in: LOCAL_LLM=1 and a server at LOCAL_LLM_BASE_URL)", () => {
  test.skipIf(!existsSync(API_BANK))(`synth on API-Bank task lines (${needsShared(API_BANK)})`, async () => {
    const n = num("LOCAL_LLM_SYNTH_TASKS", 3);
    // a fixed set: the first n distinct lines that pass the cheap prefilter
    const tasks = [...new Set(readTaskTexts(API_BANK, "api-bank"))].filter((t) => !prefilterReason(t)).slice(0, n);
    const out = mkdtempSync(join(tmpdir(), "envscaler-real-synth-"));
    const input = join(out, "tasks.jsonl");
    writeFileSync(input, tasks.map((t) => JSON.stringify({ task: t })).join("\n"));
    const events: Record<string, number> = {};
    const llm = new LlmClient({
      endpoints: { default: { model: MODEL, baseURL: BASE_URL, apiKey: "sk-local", temperature: 0.2 } },
      cacheDir: join(out, ".cache"),
      concurrency: 2, // the server's slots
      timeoutMs: 300_000,
      maxRetries: 1,
      maxTokens: 1536,
      onEvent: (e) => (events[e.kind] = (events[e.kind] ?? 0) + 1),
    });
    const started = performance.now();
    const r = await runSynth(llm, { stage: "all", out, input, format: "jsonl", rounds: 4, perEnv: 1, conversationEvery: 0 });
    const t = llm.totals();
    report.synth = {
      tasks,
      wall_s: Math.round((performance.now() - started) / 1000),
      mined_envs: r.mine?.envs ?? 0,
      built: r.build?.envs ?? [],
      served: r.scenarios?.envs ?? {},
      rejected: [...(r.mine?.rejected ?? []), ...(r.build?.rejected ?? []), ...(r.scenarios?.rejected ?? [])].map((x) => `${x.item.slice(0, 60)}: ${x.reason.slice(0, 300)}`),
      usage: t,
      events,
      out,
    };
    save();
    console.log(JSON.stringify(report.synth, null, 1));
    expect(t.calls + t.failures).toBeGreaterThan(0);
  }, 3_600_000);

  test("bundled task scenarios played by the model as the agent: how its replies parse, and the reward", async () => {
    const registry = EnvRegistry.load([BUNDLED_ENVS]);
    const scenarios = registry
      .list()
      .flatMap((b) => [...b.scenarios.values()].filter((s) => s.mode === "task").slice(0, 1))
      .slice(0, num("LOCAL_LLM_AGENT_SCENARIOS", 4));
    const client = new OpenAI({ baseURL: BASE_URL, apiKey: "sk-local", timeout: 300_000, maxRetries: 1 });
    const rt = await EnvRuntime.start({ envs: [BUNDLED_ENVS] });
    const kinds = { tool_calls_api: 0, parsed_from_text: 0, invalid_action: 0, text_reply: 0 };
    const episodes: { scenario: string; steps: number; reward: number; end_reason?: string; first_reply: string }[] = [];
    const started = performance.now();
    try {
      for (const s of scenarios) {
        const { episode_id, observation, info } = await rt.reset(s.id, 0);
        type Msg = OpenAI.Chat.Completions.ChatCompletionMessageParam;
        const messages: Msg[] = [
          { role: "system", content: `${info.introduction}\n\nRules:\n${info.rules.map((r) => `- ${r}`).join("\n")}\n\nUse the tools to do the task. When it is done, reply in plain text.` },
          { role: "user", content: observation.content },
        ];
        let reward = 0;
        let end: string | undefined;
        let steps = 0;
        let first = "";
        for (; steps < num("LOCAL_LLM_AGENT_STEPS", 6); ) {
          const res = await client.chat.completions.create({ model: MODEL, messages, tools: info.tools, max_tokens: 384, temperature: 0 });
          const msg = res.choices[0]!.message;
          first ||= (msg.content ?? "") + (msg.tool_calls?.length ? ` [tool_calls: ${msg.tool_calls.map((c) => (c.type === "function" ? c.function.name : c.type)).join(", ")}]` : "");
          const action = { role: "assistant", content: msg.content ?? "", tool_calls: msg.tool_calls ?? [] };
          const r = await rt.step(episode_id, action);
          steps++;
          if (msg.tool_calls?.length) kinds.tool_calls_api++;
          else if (r.info.tool_calls.length) kinds.parsed_from_text++;
          else if (r.observation.content.includes('"invalid_action"')) kinds.invalid_action++;
          else kinds.text_reply++;
          messages.push(msg);
          if (msg.tool_calls?.length) {
            for (const [i, c] of msg.tool_calls.entries()) messages.push({ role: "tool", tool_call_id: c.id, content: r.observation.tool_results?.[i]?.content ?? r.observation.content });
          } else messages.push({ role: "user", content: r.observation.content });
          if (r.terminated || r.truncated) {
            reward = r.reward;
            end = r.info.end_reason;
            break;
          }
        }
        if (!end) {
          const f = await rt.finish(episode_id);
          reward = f.reward;
          end = `${f.info.end_reason} (step cap)`;
        }
        episodes.push({ scenario: s.id, steps, reward, end_reason: end, first_reply: first.slice(0, 200) });
      }
    } finally {
      await rt.close();
    }
    const total = Object.values(kinds).reduce((a, b) => a + b, 0);
    report.agent = {
      wall_s: Math.round((performance.now() - started) / 1000),
      replies: total,
      kinds,
      parse_rate: total ? Math.round(((kinds.tool_calls_api + kinds.parsed_from_text) / total) * 1000) / 1000 : 0,
      mean_reward: episodes.length ? Math.round((episodes.reduce((a, e) => a + e.reward, 0) / episodes.length) * 1000) / 1000 : 0,
      episodes,
    };
    save();
    console.log(JSON.stringify(report.agent, null, 1));
    expect(episodes).toHaveLength(scenarios.length);
    expect(total).toBeGreaterThan(0);
  }, 3_600_000);
});
