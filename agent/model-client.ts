import type OpenAI from "openai";
import { CallCache } from "../llm/call-cache.js";
import type { ChatMessage, Usage } from "../llm/chat.js";
import { ChatEndpoint } from "../llm/chat-endpoint.js";
import { EndpointError } from "../llm/endpoint-error.js";
import { llmEnv } from "../llm/llm-env.js";

/** A chat message as the agent keeps it: the chat vocabulary's message (llm/chat.ts), which the SFT export writes too. */
export type AgentMessage = ChatMessage;

/** Sampling options passed through to the endpoint unchanged (unset ones are not sent). */
export interface Sampling {
  temperature?: number;
  top_p?: number;
  max_tokens?: number;
  /** Merged into the request body, e.g. vLLM's `{"chat_template_kwargs": {"enable_thinking": false}}`. */
  extra_body?: Record<string, unknown>;
}

export interface ModelClientOptions {
  baseURL: string;
  /** Unset: ENVSCALER_AGENT_API_KEY, then OPENAI_API_KEY (llm/llm-env.ts). */
  apiKey?: string;
  model: string;
  sampling?: Sampling;
  /** Per attempt. @unit ms @default 120000 */
  timeoutMs?: number;
  /** Retries after a transport error, a timeout, 429 or 5xx. @default 4 */
  maxRetries?: number;
  /** First backoff; doubles each retry, with jitter, capped at 30 s. @unit ms @default 1000 */
  backoffMs?: number;
  /** Where finished calls are kept, so a resumed run repeats none of them; unset: no cache. */
  cacheDir?: string;
}

export interface ModelReply {
  message: AgentMessage;
  usage: Usage;
  /** Wall time of the successful attempt (0 for a cache hit). @unit ms */
  latency_ms: number;
  /** Attempts made (retries + 1); 0 for a cache hit. */
  attempts: number;
  cached: boolean;
}

/**
 * An earlier turn as it is sent back. A call whose `arguments` are not JSON (a small model's reply
 * cut at max_tokens inside the call) goes back with its text as a JSON string: llama.cpp parses the
 * arguments of every call in the history and refuses the whole request otherwise (HTTP 500 "Failed
 * to parse tool call arguments as JSON", on every later turn of the episode). The
 * record keeps the call as the model wrote it; the env has already answered it as invalid_arguments.
 */
function sendable(m: AgentMessage): AgentMessage {
  if (!m.tool_calls?.some((c) => !isJson(c.function.arguments))) return m;
  return { ...m, tool_calls: m.tool_calls.map((c) => (isJson(c.function.arguments) ? c : { ...c, function: { ...c.function, arguments: JSON.stringify(c.function.arguments) } })) };
}

function isJson(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

/**
 * The agent's model: one OpenAI-compatible chat endpoint (llm/chat-endpoint.ts: the timeout,
 * retries and backoff every caller shares; attempts are counted per call for the report's endpoint
 * errors). A finished call is cached by everything that determines it, plus a caller-given salt
 * (the episode and trial), so that trials of one scenario are not answered from each other.
 */
export class ModelClient {
  private readonly endpoint: ChatEndpoint;
  private readonly cache: CallCache | null;
  /** Requests sent (every attempt counts). */
  calls = 0;
  cacheHits = 0;

  constructor(readonly options: ModelClientOptions) {
    this.endpoint = new ChatEndpoint({
      baseURL: options.baseURL,
      apiKey: options.apiKey ?? llmEnv("AGENT", "API_KEY") ?? "none",
      timeoutMs: options.timeoutMs ?? 120_000,
      maxRetries: options.maxRetries ?? 4,
      backoffMs: options.backoffMs ?? 1000,
      backoffCapMs: 30_000,
    });
    this.cache = options.cacheDir ? new CallCache(options.cacheDir) : null;
  }

  /** `signal`: aborting it cancels the call in flight (an EndpointError, not retried). */
  async chat(messages: AgentMessage[], tools: unknown[] | undefined, salt: string, signal?: AbortSignal): Promise<ModelReply> {
    const s = this.options.sampling ?? {};
    // reasoning stays in the record but is not sent back: some servers reject it in requests, and
    // chat templates (Qwen3's) drop earlier turns' thinking anyway
    const sent = messages.map(({ reasoning_content: _, ...m }) => sendable(m));
    const body: Record<string, unknown> = { model: this.options.model, messages: sent, ...(tools?.length ? { tools } : {}) };
    for (const k of ["temperature", "top_p", "max_tokens"] as const) if (s[k] !== undefined) body[k] = s[k];
    Object.assign(body, s.extra_body ?? {});
    // the key leaves out the API key: a secret, and not something the reply depends on
    const key = CallCache.key({ baseURL: this.options.baseURL, body, salt });
    // the cache stores the whole assistant message as the entry's content
    const hit = this.cache?.get(key);
    if (hit) {
      this.cacheHits++;
      return { message: JSON.parse(hit.content) as AgentMessage, usage: hit.usage, latency_ms: 0, attempts: 0, cached: true };
    }
    let done;
    try {
      done = await this.endpoint.complete(body as unknown as OpenAI.ChatCompletionCreateParamsNonStreaming, { signal });
    } catch (e) {
      if (e instanceof EndpointError) this.calls += e.attempts;
      throw e;
    }
    const { response: r, usage, attempts, latency_ms } = done;
    this.calls += attempts;
    // reasoning_content / reasoning: the fields reasoning servers (vLLM, llama.cpp) add to a message
    const m: (OpenAI.ChatCompletionMessage & { reasoning_content?: string; reasoning?: string }) | undefined = r.choices[0]?.message;
    if (!m) throw new EndpointError(`${this.endpoint.where(this.options.model)}: the endpoint replied without a choice`, null, attempts);
    const message: AgentMessage = { role: "assistant", content: m.content ?? null };
    const calls = (m.tool_calls ?? []).filter((c) => c.type === "function");
    if (calls.length) message.tool_calls = calls.map((c, i) => ({ id: c.id || `call_${i}`, type: "function", function: { name: c.function.name, arguments: c.function.arguments } }));
    const reasoning = m.reasoning_content ?? m.reasoning;
    if (reasoning) message.reasoning_content = reasoning;
    this.cache?.put(key, { content: JSON.stringify(message), usage });
    return { message, usage, latency_ms, attempts, cached: false };
  }
}
