import type { BridgeClient } from "./bridge-client.js";
import type { Usage } from "../llm/chat.js";
import { EndpointError } from "../llm/endpoint-error.js";
import type { AgentMessage, ModelClient } from "./model-client.js";
import { systemPrompt, type AgentMode, type ScenarioMode } from "./system-prompt.js";

/** What the loop needs of the bridge: its request call (a BridgeClient, or the playground's in-process episodes). */
/** What the loop needs of a bridge; with `requestTimed`, bridge time ends when a reply reaches the client (see BridgeClient.requestTimed). */
export type AgentBridge = Pick<BridgeClient, "request"> & Partial<Pick<BridgeClient, "requestTimed">>;

/** Why an episode went wrong, as the report counts it. */
export type FailureKind =
  | "unparseable_output" // the env could not read the model's reply as text or tool calls
  | "invalid_tool_call" // an unknown tool, or arguments that fail the tool's schema or JSON
  | "env_fault" // the env timed out, ran out of memory, crashed or returned bad output
  | "max_steps" // the step cap ended the episode
  | "user_simulator_failed" // the simulated user's endpoint failed for good
  | "endpoint_error" // the agent's model endpoint failed for good
  | "bridge_error"; // the bridge refused a request (a lost session, a reset that failed)

export const FAILURE_KINDS: FailureKind[] = ["unparseable_output", "invalid_tool_call", "env_fault", "max_steps", "user_simulator_failed", "endpoint_error", "bridge_error"];

/** Kinds that mean the episode was cut short by infrastructure, not played out: a resumed run plays it again. */
export const ABORTING_KINDS: FailureKind[] = ["endpoint_error", "bridge_error"];

export interface Failure {
  kind: FailureKind;
  step: number;
  message: string;
  /** endpoint_error: the attempts made before giving up. */
  attempts?: number;
}

export interface TurnStats extends Usage {
  step: number;
  latency_ms: number;
  attempts: number;
  cached: boolean;
}

/** One played episode, as the rollout records it next to the bridge's trajectory. */
export interface EpisodeOutcome {
  key: string;
  scenario_id: string;
  env_id: string;
  trial: number;
  seed: number;
  episode_id: string | null;
  mode: ScenarioMode | null;
  reward: number;
  success: boolean;
  end_reason: string | null;
  steps: number;
  failures: Failure[];
  usage: Usage;
  model_calls: number;
  /** Sum over the model calls made in this run (cache hits count 0). @unit ms */
  model_ms: number;
  /**
   * Time spent waiting on the bridge's replies (reset, step, finish, close): from each request to
   * its reply reaching this process's socket reader; the wait for this process's own event loop to
   * resume the episode after that is the agent's. @unit ms
   */
  bridge_ms: number;
  /** @unit ms */
  wall_ms: number;
  turns: TurnStats[];
  /** The agent's conversation exactly as sent to and received from the model. */
  messages: AgentMessage[];
  reward_info?: unknown;
  time: string;
}

export interface EpisodeSpec {
  key: string;
  scenario_id: string;
  /** The scenario's env as the bridge listed it, so an episode whose reset fails is still reported under its env. */
  env_id?: string;
  trial: number;
  seed: number;
}

export interface AgentOptions {
  agentMode: AgentMode;
  /** Client-side step cap; the bridge's own (the scenario's max_steps) applies as well. */
  maxSteps?: number;
  promptOverride?: Partial<Record<ScenarioMode, string>>;
}

interface ResetReply {
  session_id: string;
  observation: { role: string; content: string };
  info: { episode_id: string; env_id: string; mode: ScenarioMode; seed: number; introduction: string; rules: string[]; tools: unknown[]; max_steps: number; end_reason?: "user_stop" };
}

interface StepReply {
  observation: { role: "tool" | "user"; content: string; tool_results?: { tool_call_id: string; name: string; content: string; ok: boolean }[] };
  reward: number;
  terminated: boolean;
  truncated: boolean;
  info: { step: number; end_reason?: string; reward_info?: unknown; error?: { code: string; message: string } };
}

const NO_USER = "(no simulated user is attached";

function errorType(content: string): string | null {
  try {
    const j = JSON.parse(content) as { error?: { type?: string; message?: string } };
    return typeof j?.error?.type === "string" ? j.error.type : null;
  } catch {
    return null;
  }
}

/** The assistant's turn as the env should read it. */
function actionOf(m: AgentMessage, agentMode: AgentMode): unknown {
  if (agentMode === "fc") return m;
  // prompt mode: the raw text is the action; a server that split the thinking off gets it put back
  const text = m.content ?? "";
  return m.reasoning_content && !/<think>/i.test(text) ? `<think>\n${m.reasoning_content}\n</think>\n\n${text}` : text;
}

/**
 * Plays one episode: reset, then model → step until the env ends it (or the step cap), scoring
 * it with `finish` when the agent side stops first. Nothing the model says crashes it: the env
 * answers unreadable replies with an observation, which goes back to the model and is counted.
 */
export async function runEpisode(bridge: AgentBridge, model: ModelClient, spec: EpisodeSpec, options: AgentOptions): Promise<EpisodeOutcome> {
  const t0 = performance.now();
  const out: EpisodeOutcome = {
    key: spec.key, scenario_id: spec.scenario_id, env_id: spec.env_id ?? "", trial: spec.trial, seed: spec.seed, episode_id: null, mode: null,
    reward: 0, success: false, end_reason: null, steps: 0, failures: [], usage: { prompt_tokens: 0, completion_tokens: 0 },
    model_calls: 0, model_ms: 0, bridge_ms: 0, wall_ms: 0, turns: [], messages: [], time: new Date().toISOString(),
  };
  const fail = (kind: FailureKind, step: number, message: string) => out.failures.push({ kind, step, message });
  const ask = async <T>(op: string, fields: Record<string, unknown>): Promise<T> => {
    const t = performance.now();
    let timed: { value: T; ms: number } | undefined;
    try {
      if (!bridge.requestTimed) return await bridge.request<T>(op, fields);
      timed = await bridge.requestTimed<T>(op, fields);
      return timed.value;
    } finally {
      // a failed request counts whole, as does one through a bridge that cannot time its replies
      out.bridge_ms += timed ? timed.ms : performance.now() - t;
    }
  };
  let session: string | null = null;
  try {
    const r = await ask<ResetReply>("reset", { scenario_id: spec.scenario_id, seed: spec.seed });
    session = r.session_id;
    Object.assign(out, { episode_id: r.info.episode_id, env_id: r.info.env_id, mode: r.info.mode });
    const tools = r.info.tools;
    out.messages.push(
      { role: "system", content: systemPrompt({ mode: r.info.mode, agentMode: options.agentMode, introduction: r.info.introduction, rules: r.info.rules, tools, override: options.promptOverride }) },
      { role: "user", content: r.observation.content },
    );
    const cap = Math.min(options.maxSteps ?? Infinity, r.info.max_steps);
    // the simulated user ended the conversation in its opening message: nothing for the agent to
    // answer (a model call there cost a real 0.5B a minute), the episode is scored as it stands
    let end: StepReply | null = r.info.end_reason === "user_stop" ? await ask<StepReply>("finish", { session_id: session }) : null;
    for (let step = 1; step <= cap && !end; step++) {
      let reply;
      try {
        reply = await model.chat(out.messages, options.agentMode === "fc" ? tools : undefined, `${spec.key}|${spec.seed}`);
      } catch (e) {
        if (!(e instanceof EndpointError)) throw e;
        out.failures.push({ kind: "endpoint_error", step, message: e.message, attempts: e.attempts });
        break;
      }
      out.turns.push({ step, ...reply.usage, latency_ms: reply.latency_ms, attempts: reply.attempts, cached: reply.cached });
      out.usage.prompt_tokens += reply.usage.prompt_tokens;
      out.usage.completion_tokens += reply.usage.completion_tokens;
      if (!reply.cached) out.model_calls++;
      out.model_ms += reply.latency_ms;
      const assistant = options.agentMode === "prompt" ? { role: "assistant" as const, content: actionOf(reply.message, "prompt") as string } : reply.message;
      out.messages.push(assistant);

      const s = await ask<StepReply>("step", { session_id: session, action: actionOf(reply.message, options.agentMode) });
      out.steps = s.info.step;
      const obs = s.observation;
      if (obs.role === "user" && errorType(obs.content) === "invalid_action") fail("unparseable_output", step, obs.content);
      for (const t of obs.tool_results ?? []) {
        const type = t.ok ? null : errorType(t.content);
        if (type === "unknown_tool" || type === "invalid_arguments") fail("invalid_tool_call", step, t.content);
      }
      if (s.terminated || s.truncated) end = s;
      else if (obs.role === "user" && obs.content.startsWith(NO_USER)) {
        // a conversation on a bridge without a simulated user: the agent's reply is its last word
        end = await ask<StepReply>("finish", { session_id: session });
      }
      if (end) break;
      appendObservation(out.messages, assistant, obs, options.agentMode);
    }
    if (!end) {
      if (!out.failures.some((f) => f.kind === "endpoint_error")) fail("max_steps", out.steps, `the agent reached the step cap (${cap})`);
      end = await ask<StepReply>("finish", { session_id: session });
    }
    out.reward = end.reward;
    out.end_reason = end.info.end_reason ?? null;
    out.reward_info = end.info.reward_info;
    if (end.truncated && end.info.end_reason === "max_steps" && !out.failures.some((f) => f.kind === "max_steps")) fail("max_steps", out.steps, `the env's step limit (${r.info.max_steps}) ended the episode`);
    if (end.info.error) fail(end.info.error.code === "user_simulator_failed" ? "user_simulator_failed" : "env_fault", out.steps, `${end.info.error.code}: ${end.info.error.message}`);
  } catch (e) {
    const err = e as Error & { code?: string };
    // a reset that fails because the simulated user cannot open the conversation is its failure, not the bridge's
    fail(err.code === "user_simulator_failed" ? "user_simulator_failed" : err.code && /^env_/.test(err.code) ? "env_fault" : "bridge_error", out.steps, err.message);
  } finally {
    if (session) await ask("close", { session_id: session }).catch(() => undefined);
  }
  out.success = out.reward >= 1 - 1e-9 && !out.failures.some((f) => ABORTING_KINDS.includes(f.kind));
  out.wall_ms = performance.now() - t0;
  return out;
}

/** What the agent reads next: tool results (one `tool` message per call, or `<tool_response>` text in prompt mode) or the user's words. */
function appendObservation(messages: AgentMessage[], assistant: AgentMessage, obs: StepReply["observation"], agentMode: AgentMode): void {
  const results = obs.tool_results ?? [];
  if (agentMode === "prompt") {
    const content = results.length ? results.map((r) => `<tool_response>\n${r.content}\n</tool_response>`).join("\n") : obs.content;
    messages.push({ role: "user", content });
    return;
  }
  const calls = assistant.tool_calls ?? [];
  if (calls.length) {
    // every tool_call id must be answered, or the next request is rejected by the endpoint
    for (const c of calls) {
      const r = results.find((x) => x.tool_call_id === c.id);
      messages.push({ role: "tool", tool_call_id: c.id, name: c.function.name, content: r ? r.content : obs.content });
    }
    if (obs.role === "user" && !results.length) return;
  } else if (results.length) {
    // the env found calls in the text (a server that does not parse tool calls): they come back as the user's turn
    messages.push({ role: "user", content: results.map((r) => `<tool_response>\n${r.content}\n</tool_response>`).join("\n") });
    return;
  }
  if (obs.role === "user") messages.push({ role: "user", content: obs.content });
}
