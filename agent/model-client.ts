import OpenAI from "openai";
import type { ChatMessage } from "../bridge/record/sft-export.js";
import { CallCache } from "../synth/llm/call-cache.js";

/** A chat message as the agent keeps it: the same OpenAI shape the SFT export writes (one definition). */
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

export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
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

/** The endpoint failed for good (after every retry), or answered with a non-retryable error. */
export class EndpointError extends Error {
  override readonly name = "EndpointError";
  constructor(
    message: string,
    readonly status: number | null,
    readonly attempts: number,
  ) {
    super(message);
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

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

function retryable(e: unknown): boolean {
  if (e instanceof OpenAI.APIConnectionError) return true; // includes timeouts
  if (e instanceof OpenAI.APIError) return e.status === undefined || e.status === 408 || e.status === 409 || e.status === 429 || e.status >= 500;
  return false;
}

/**
 * The agent's model: one OpenAI-compatible chat endpoint. The retry loop is ours rather than the
 * SDK's so that attempts are counted per call (the report's endpoint errors) and backoff is
 * configurable; a finished call is cached by everything that determines it, plus a caller-given
 * salt (the episode and trial), so that trials of one scenario are not answered from each other.
 */
export class ModelClient {
  private readonly client: OpenAI;
  private readonly cache: CallCache | null;
  calls = 0;
  cacheHits = 0;

  constructor(readonly options: ModelClientOptions) {
    this.client = new OpenAI({ baseURL: options.baseURL, apiKey: options.apiKey ?? process.env.OPENAI_API_KEY ?? "none", maxRetries: 0, timeout: options.timeoutMs ?? 120_000 });
    this.cache = options.cacheDir ? new CallCache(options.cacheDir) : null;
  }

  /** Which endpoint and model an error is about: a run may talk to an agent and a user endpoint. */
  private where(): string {
    return `${this.options.baseURL} (model ${this.options.model})`;
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
    const max = this.options.maxRetries ?? 4;
    const base = this.options.backoffMs ?? 1000;
    for (let attempt = 1; ; attempt++) {
      const t0 = performance.now();
      try {
        this.calls++;
        const r = await this.client.chat.completions.create(body as unknown as OpenAI.ChatCompletionCreateParamsNonStreaming, signal ? { signal } : undefined);
        const latency_ms = performance.now() - t0;
        // reasoning_content / reasoning: the fields reasoning servers (vLLM, llama.cpp) add to a message
        const m: (OpenAI.ChatCompletionMessage & { reasoning_content?: string; reasoning?: string }) | undefined = r.choices[0]?.message;
        if (!m) throw new EndpointError(`${this.where()}: the endpoint replied without a choice`, null, attempt);
        const message: AgentMessage = { role: "assistant", content: m.content ?? null };
        const calls = (m.tool_calls ?? []).filter((c) => c.type === "function");
        if (calls.length) message.tool_calls = calls.map((c, i) => ({ id: c.id || `call_${i}`, type: "function", function: { name: c.function.name, arguments: c.function.arguments } }));
        const reasoning = m.reasoning_content ?? m.reasoning;
        if (reasoning) message.reasoning_content = reasoning;
        const usage = { prompt_tokens: r.usage?.prompt_tokens ?? 0, completion_tokens: r.usage?.completion_tokens ?? 0 };
        this.cache?.put(key, { content: JSON.stringify(message), usage });
        return { message, usage, latency_ms, attempts: attempt, cached: false };
      } catch (e) {
        if (e instanceof EndpointError) throw e;
        if (signal?.aborted) throw new EndpointError("the call was cancelled", null, attempt);
        const status = e instanceof OpenAI.APIError && typeof e.status === "number" ? e.status : null;
        if (!retryable(e) || attempt > max) throw new EndpointError(`${this.where()}: ${(e as Error).message} (after ${attempt} attempt${attempt > 1 ? "s" : ""})`, status, attempt);
        await sleep(Math.min(30_000, base * 2 ** (attempt - 1)) * (0.75 + Math.random() * 0.5));
      }
    }
  }
}
