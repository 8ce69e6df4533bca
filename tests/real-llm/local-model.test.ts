// Opt-in (LOCAL_LLM=1): synth and agent episodes against a real small model behind an
// OpenAI-compatible endpoint, e.g. ../shared/tools/local-llm (`start.sh --model 0.5b --port 8080`).
// It measures plumbing on real model output (parse rate, re-asks, truncations, timeouts, wall
// time) and asserts structure only: a tiny model's answers are not a quality gate.
//
//   LOCAL_LLM=1 LOCAL_LLM_BASE_URL=http://127.0.0.1:8080/v1 LOCAL_LLM_MODEL=qwen2.5-coder-0.5b \
//     npx vitest run tests/real-llm
//
// Sizes: LOCAL_LLM_SYNTH_TASKS (API-Bank task lines, default 3), LOCAL_LLM_SYNTH_ROUNDS (dual-agent
// test rounds per env, default 4), LOCAL_LLM_AGENT_SCENARIOS (bundled task scenarios, default 4),
// LOCAL_LLM_AGENT_STEPS (default 6), LOCAL_LLM_JSON_MODE (synth's --json-mode, default off),
// LOCAL_LLM_CODE_MODE / LOCAL_LLM_CODE_FALLBACK (synth's --code-mode / --code-fallback, default whole / methods). The figures go to stdout and to LOCAL_LLM_REPORT (default
// /tmp/envscaler-local-llm.json); a line per event, step and episode goes to LOCAL_LLM_PROGRESS
// (default /tmp/envscaler-local-llm.log) as the run goes, so a long run can be watched.
import { appendFileSync, existsSync, mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, test } from "vitest";
import { ModelClient, type AgentMessage } from "../../agent/model-client.js";
import { EndpointError } from "../../llm/endpoint-error.js";
import { EnvRuntime } from "../../bridge/core/engine/env-runtime.js";
import { BUNDLED_ENVS } from "../../envs/bundled.js";
import { EnvRegistry } from "../../envs/format/registry.js";
import { LlmClient, type JsonMode } from "../../synth/llm/llm-client.js";
import { runSynth } from "../../synth/pipeline.js";
import type { CodeWay } from "../../synth/stages/build-env.js";
import { prefilterReason, readTaskTexts } from "../../synth/stages/mine.js";
import { needsShared, sharedPath } from "../shared-data.js";

const API_BANK = sharedPath("datasets", "api-bank", "lv3-train.json");
const ON = process.env.LOCAL_LLM === "1";
const BASE_URL = process.env.LOCAL_LLM_BASE_URL ?? "http://127.0.0.1:8080/v1";
const MODEL = process.env.LOCAL_LLM_MODEL ?? "qwen2.5-coder-0.5b";
const num = (name: string, d: number) => Number(process.env[name] ?? d) || d;
const report: { agent?: { replies: number } & Record<string, unknown> } & Record<string, unknown> = { model: MODEL, base_url: BASE_URL, started: new Date().toISOString() };
const save = () => writeFileSync(process.env.LOCAL_LLM_REPORT ?? "/tmp/envscaler-local-llm.json", `${JSON.stringify(report, null, 1)}\n`);
// a refused call's tool result is {"error": {"type", "message"}}
const errorType = (content: string) => {
  try {
    return String(JSON.parse(content)?.error?.type ?? "error");
  } catch {
    return "error";
  }
};
// vitest holds a test's console output until it ends; a run of many minutes is watched through this file
const progress = (line: string) => appendFileSync(process.env.LOCAL_LLM_PROGRESS ?? "/tmp/envscaler-local-llm.log", `${new Date().toISOString()} ${line}\n`);

describe.skipIf(!ON)("a real small model (opt-in: LOCAL_LLM=1 and a server at LOCAL_LLM_BASE_URL)", () => {
  test.skipIf(!existsSync(API_BANK))(`synth on API-Bank task lines (${needsShared(API_BANK)})`, async () => {
    const n = num("LOCAL_LLM_SYNTH_TASKS", 3);
    // a fixed set: the first n distinct lines that pass the cheap prefilter
    const tasks = [...new Set(readTaskTexts(API_BANK, "api-bank"))].filter((t) => !prefilterReason(t)).slice(0, n);
    // LOCAL_LLM_SYNTH_OUT: an earlier run's folder, whose call cache answers every call it finished
    const out = process.env.LOCAL_LLM_SYNTH_OUT ?? mkdtempSync(join(tmpdir(), "envscaler-real-synth-"));
    mkdirSync(out, { recursive: true });
    const input = join(out, "tasks.jsonl");
    writeFileSync(input, tasks.map((t) => JSON.stringify({ task: t })).join("\n"));
    const events: Record<string, number> = {};
    const llm = new LlmClient({
      endpoints: { default: { model: MODEL, baseURL: BASE_URL, apiKey: "sk-local", temperature: 0.2 } },
      cacheDir: join(out, ".cache"),
      concurrency: 2, // the server's slots
      timeoutMs: num("LOCAL_LLM_TIMEOUT_S", 300) * 1000, // a 1,536-token plan takes the 1.5B 220-280 s here
      maxRetries: 1,
      maxTokens: 1536,
      // LOCAL_LLM_JSON_MODE: synth's --json-mode (off, object, schema); llama.cpp enforces a schema as it generates
      jsonMode: (process.env.LOCAL_LLM_JSON_MODE ?? "off") as JsonMode,
      onEvent: (e) => {
        events[e.kind] = (events[e.kind] ?? 0) + 1;
        progress(`synth ${e.kind}: ${e.message.slice(0, 300)}`);
      },
    });
    const started = performance.now();
    progress(`synth: ${tasks.length} tasks in ${out}`);
    // by stage too: a run stopped before the end still shows how far each stage got
    const ticker = setInterval(() => progress(`synth: ${llm.inFlight} in flight; ${JSON.stringify(llm.totals())}; by stage ${JSON.stringify(llm.usage)}`), 15_000);
    const r = await runSynth(llm, {
      stage: "all", out, input, format: "jsonl", rounds: num("LOCAL_LLM_SYNTH_ROUNDS", 4), perEnv: 1, conversationEvery: 0,
      codeMode: (process.env.LOCAL_LLM_CODE_MODE ?? "whole") as CodeWay,
      codeFallback: (process.env.LOCAL_LLM_CODE_FALLBACK ?? "methods") as CodeWay | "none",
      progress: (stage, done, total) => progress(`synth ${stage} ${done}/${total}`),
    }).finally(() => clearInterval(ticker));
    const t = llm.totals();
    report.synth = {
      tasks,
      wall_s: Math.round((performance.now() - started) / 1000),
      json_mode: llm.jsonMode,
      mined_envs: r.mine?.envs ?? 0,
      served: r.scenarios?.envs ?? {},
      build: r.build?.envs ?? [],
      rejected: [...(r.mine?.rejected ?? []), ...(r.build?.rejected ?? []), ...(r.scenarios?.rejected ?? [])].map((x) => `${x.item.slice(0, 60)}: ${x.reason.slice(0, 300)}`),
      usage: t,
      usage_by_stage: r.usage,
      events,
      out,
    };
    save();
    console.log(JSON.stringify(report.synth, null, 1));
    expect(t.calls + t.failures).toBeGreaterThan(0);
  }, num("LOCAL_LLM_SYNTH_MINUTES", 60) * 60_000); // the 1.5B on 2 CPU cores needs more than an hour for 10 lines

  test("bundled task scenarios played by the model as the agent: how its replies parse, and the reward", async () => {
    const registry = EnvRegistry.load([BUNDLED_ENVS]);
    // a fixed set: each env's first task scenario, then each env's second, … (8 bundled envs)
    const perEnv = registry.list().map((b) => [...b.scenarios.values()].filter((s) => s.mode === "task"));
    const scenarios = Array.from({ length: Math.max(...perEnv.map((l) => l.length)) }, (_, i) => perEnv.flatMap((l) => l.slice(i, i + 1)))
      .flat()
      .slice(0, num("LOCAL_LLM_AGENT_SCENARIOS", 4));
    // the rollout's model client: what `envscaler rollout` sends (history fixes included), one try per call
    const model = new ModelClient({ baseURL: BASE_URL, apiKey: "sk-local", model: MODEL, sampling: { max_tokens: 384, temperature: 0 }, timeoutMs: 300_000, maxRetries: 1 });
    const rt = await EnvRuntime.start({ envs: [BUNDLED_ENVS] });
    const kinds = { tool_calls_api: 0, parsed_from_text: 0, invalid_action: 0, text_reply: 0, endpoint_error: 0 };
    // calls the env refused before or while running them (unknown_tool, invalid_arguments, tool_exception, …), by type
    const callErrors: Record<string, number> = {};
    const episodes: { scenario: string; steps: number; reward: number; end_reason?: string; first_reply: string; replies: string[] }[] = [];
    const started = performance.now();
    const summary = () => {
      const total = Object.values(kinds).reduce((a, b) => a + b, 0);
      return {
        wall_s: Math.round((performance.now() - started) / 1000),
        replies: total,
        kinds,
        call_errors: callErrors,
        // replies the env read as what they are (a tool call, or a text reply to the user), against
        // unparseable ones (invalid_action) and endpoint errors; and the share that were tool calls
        parse_rate: total ? Math.round(((kinds.tool_calls_api + kinds.parsed_from_text + kinds.text_reply) / total) * 1000) / 1000 : 0,
        tool_call_rate: total ? Math.round(((kinds.tool_calls_api + kinds.parsed_from_text) / total) * 1000) / 1000 : 0,
        mean_reward: episodes.length ? Math.round((episodes.reduce((a, e) => a + e.reward, 0) / episodes.length) * 1000) / 1000 : 0,
        episodes,
      };
    };
    try {
      for (const s of scenarios) {
        const { episode_id, observation, info } = await rt.reset(s.id, 0);
        const messages: AgentMessage[] = [
          { role: "system", content: `${info.introduction}\n\nRules:\n${info.rules.map((r) => `- ${r}`).join("\n")}\n\nUse the tools to do the task. When it is done, reply in plain text.` },
          { role: "user", content: observation.content },
        ];
        let reward = 0;
        let end: string | undefined;
        let steps = 0;
        let first = "";
        const replies: string[] = [];
        for (; steps < num("LOCAL_LLM_AGENT_STEPS", 6); ) {
          let msg: AgentMessage;
          try {
            msg = (await model.chat(messages, info.tools, s.id)).message;
          } catch (e) {
            if (!(e instanceof EndpointError)) throw e;
            kinds.endpoint_error++;
            replies.push(`endpoint_error: ${e.message.slice(0, 300)}`);
            progress(`agent ${s.id} step ${steps + 1}: endpoint_error: ${e.message.slice(0, 200)}`);
            break;
          }
          const said = `${msg.content ?? ""}${msg.tool_calls?.length ? ` [tool_calls: ${msg.tool_calls.map((c) => `${c.function.name}(${c.function.arguments})`).join(", ")}]` : ""}`;
          first ||= said;
          const r = await rt.step(episode_id, msg);
          steps++;
          const kind = msg.tool_calls?.length ? "tool_calls_api" : r.info.tool_calls.length ? "parsed_from_text" : r.observation.content.includes('"invalid_action"') ? "invalid_action" : "text_reply";
          kinds[kind]++;
          const refused = (r.observation.tool_results ?? []).filter((x) => !x.ok).map((x) => errorType(x.content));
          for (const t of refused) callErrors[t] = (callErrors[t] ?? 0) + 1;
          const env = ` -> ${refused.length ? `refused: ${refused.join(", ")}; ` : ""}${r.observation.content.slice(0, 200)}`;
          replies.push(`${kind}: ${said.slice(0, 300)}${env}`);
          progress(`agent ${s.id} step ${steps}: ${kind}: ${said.slice(0, 160).replace(/\s+/g, " ")}${env.replace(/\s+/g, " ")}`);
          messages.push(msg);
          if (msg.tool_calls?.length) {
            for (const [i, c] of msg.tool_calls.entries()) messages.push({ role: "tool", tool_call_id: c.id, name: c.function.name, content: r.observation.tool_results?.[i]?.content ?? r.observation.content });
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
          end = `${f.info.end_reason} (${kinds.endpoint_error && replies.at(-1)?.startsWith("endpoint_error") ? "endpoint error" : "step cap"})`;
        }
        episodes.push({ scenario: s.id, steps, reward, end_reason: end, first_reply: first.slice(0, 200), replies });
        progress(`agent ${s.id}: ${steps} steps, reward ${reward}, ${end}`);
        report.agent = summary();
        save(); // after every episode: a run cut short still leaves its figures
      }
    } finally {
      await rt.close();
    }
    report.agent = summary();
    const total = report.agent.replies;
    save();
    console.log(JSON.stringify(report.agent, null, 1));
    expect(episodes).toHaveLength(scenarios.length);
    expect(total).toBeGreaterThan(0);
  }, 3_600_000);
});
