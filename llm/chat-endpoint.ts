import OpenAI from "openai";
import { Agent, fetch as undiciFetch } from "undici";
import type { Usage } from "./chat.js";
import { EndpointError } from "./endpoint-error.js";

/** How one OpenAI-compatible endpoint is reached and how hard a request to it is tried. */
export interface ChatEndpointOptions {
  /** Unset: the OpenAI SDK's default (api.openai.com). */
  baseURL?: string;
  apiKey: string;
  /** How long one attempt may take before it is cancelled (and retried). @unit ms */
  timeoutMs: number;
  /** Retries after a transport error, a timeout, 408, 409, 429 or 5xx. */
  maxRetries: number;
  /** The first retry's delay; it doubles each retry, up to backoffCapMs, with ±25 % jitter. @unit ms @default 500 */
  backoffMs?: number;
  /** @unit ms @default 30000 */
  backoffCapMs?: number;
}

/** What one request's tries are told as they happen (for counters, progress lines and logs). */
export interface AttemptHooks {
  /** Cancels the request in flight and the wait before a retry: the request fails with EndpointError at once. */
  signal?: AbortSignal;
  /** An attempt was cancelled at the timeout (it is retried if tries are left). */
  onTimeout?: (attempt: number) => void;
  /** An attempt failed and is retried after a backoff. */
  onRetry?: (attempt: number, error: Error) => void;
}

/** One answered request: the endpoint's reply, how many tries it took, how long the last one took. */
export interface Completion {
  response: OpenAI.ChatCompletion;
  usage: Usage;
  attempts: number;
  /** Wall time of the successful attempt. @unit ms */
  latency_ms: number;
}

/** Whether an error is worth sending the same request again: the transport's, or a status that says "later". */
export function retryable(e: unknown): boolean {
  if (e instanceof OpenAI.APIConnectionError) return true; // timeouts included
  if (e instanceof OpenAI.APIError) return e.status === undefined || e.status === 408 || e.status === 409 || e.status === 429 || e.status >= 500;
  return false;
}

function wait(ms: number, signal?: AbortSignal): Promise<void> {
  if (signal?.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    }
    signal?.addEventListener("abort", done, { once: true });
  });
}

type SdkFetch = NonNullable<NonNullable<ConstructorParameters<typeof OpenAI>[0]>["fetch"]>;

/**
 * One OpenAI-compatible chat endpoint, tried with the project's one retry loop: every caller (the
 * agent, the simulated user, synth) gets the same timeout, the same notion of what is retried and
 * the same backoff. The loop is ours rather than the SDK's (the client is made with maxRetries 0)
 * so that attempts and timeouts are counted and reported as they happen.
 */
export class ChatEndpoint {
  private readonly client: OpenAI;
  /**
   * The connection pool the requests go through, its header and body timeouts at this endpoint's
   * timeout. Node's own fetch gives up on a reply whose headers take over 300 s whatever the SDK's
   * timeout says, and a non-streamed completion sends no header until it is done: a small CPU model
   * taking 5+ minutes was cut at 300 s and asked again while the server kept generating the first.
   */
  readonly agent: Agent;
  /** The timeouts `agent` was made with (undici keeps its options private). @unit ms */
  readonly connectionTimeouts: { headersTimeout: number; bodyTimeout: number };

  constructor(readonly options: ChatEndpointOptions) {
    // a little past the request's own timeout, so the SDK's timeout (counted and reported) fires first
    const t = options.timeoutMs + 5_000;
    this.connectionTimeouts = { headersTimeout: t, bodyTimeout: t };
    this.agent = new Agent(this.connectionTimeouts);
    // undici's own fetch with that pool (Node's global fetch is a bundled undici that takes no pool of another version)
    const fetch = ((url: string, init?: object) => undiciFetch(url, { ...init, dispatcher: this.agent })) as unknown as SdkFetch;
    this.client = new OpenAI({ baseURL: options.baseURL, apiKey: options.apiKey, maxRetries: 0, timeout: options.timeoutMs, fetch });
  }

  /** Which endpoint and model an error is about: a run may talk to an agent and a user endpoint. */
  where(model: string): string {
    return `${this.options.baseURL ?? "OpenAI"} (model ${model})`;
  }

  /** One chat completion, retried as the options say; an EndpointError when it fails for good. */
  async complete(body: OpenAI.ChatCompletionCreateParamsNonStreaming, hooks: AttemptHooks = {}): Promise<Completion> {
    const { signal } = hooks;
    const base = this.options.backoffMs ?? 500;
    const cap = this.options.backoffCapMs ?? 30_000;
    let timeouts = 0;
    for (let attempt = 1; ; attempt++) {
      const t0 = performance.now();
      try {
        const response = await this.client.chat.completions.create(body, signal ? { signal } : undefined);
        const usage = { prompt_tokens: response.usage?.prompt_tokens ?? 0, completion_tokens: response.usage?.completion_tokens ?? 0 };
        return { response, usage, attempts: attempt, latency_ms: performance.now() - t0 };
      } catch (e) {
        const error = e as Error;
        if (signal?.aborted) throw new EndpointError("the call was cancelled", null, attempt, "the call was cancelled", timeouts);
        if (e instanceof OpenAI.APIConnectionTimeoutError) {
          timeouts++;
          hooks.onTimeout?.(attempt);
        }
        const status = e instanceof OpenAI.APIError && typeof e.status === "number" ? e.status : null;
        if (!retryable(e) || attempt > this.options.maxRetries) {
          throw new EndpointError(`${this.where(body.model)}: ${error.message} (after ${attempt} attempt${attempt > 1 ? "s" : ""})`, status, attempt, error.message, timeouts);
        }
        hooks.onRetry?.(attempt, error);
      }
      await wait(Math.min(cap, base * 2 ** (attempt - 1)) * (0.75 + Math.random() * 0.5), signal);
      if (signal?.aborted) throw new EndpointError("the call was cancelled", null, attempt, "the call was cancelled", timeouts);
    }
  }
}
