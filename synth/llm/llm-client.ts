import pLimit, { type LimitFunction } from "p-limit";
import { z } from "zod";
import { CallCache } from "../../llm/call-cache.js";
import type { TextMessage } from "../../llm/chat.js";
import { ChatEndpoint } from "../../llm/chat-endpoint.js";
import { EndpointError } from "../../llm/endpoint-error.js";
import { llmEnv } from "../../llm/llm-env.js";

/** A synth stage's chat turn: plain text (the chat vocabulary's TextMessage). */
export type Message = TextMessage;

/** Where one stage's calls go. Unset fields fall back to ENVSCALER_SYNTH_BASE_URL / _API_KEY, then OPENAI_BASE_URL / OPENAI_API_KEY (llm/llm-env.ts). */
export interface StageEndpoint {
  baseURL?: string;
  apiKey?: string;
  model: string;
  temperature?: number;
}

export interface AskOptions {
  /**
   * Whether a re-ask shows the model its rejected reply (as the assistant's turn, then the reason).
   * false: the request is sent again with the reasons of every rejection appended and no earlier
   * reply, for stages where a small model copies its own reply back word for word (the 1.5B sent
   * the same 303-token scenario three times, the last two at temperature 1.0). @default true
   */
  echo?: boolean;
}

export interface LlmClientOptions {
  /** Per stage name; "default" applies to stages not listed. */
  endpoints: Record<string, StageEndpoint>;
  cacheDir: string;
  /** Calls in flight at once, over all stages. @default 8 */
  concurrency?: number;
  /** Transport retries per call (429, 5xx, connection errors, timeouts), with exponential backoff. @default 4 */
  maxRetries?: number;
  /** How long one request may take before it is cancelled (and retried). @unit ms @default 120000 */
  timeoutMs?: number;
  /** `max_tokens` of every request; unset: the server's own cap. A reply cut at the cap is re-asked. */
  maxTokens?: number;
  /** A lower `max_tokens` per stage (the lower of this and maxTokens is sent). @default STAGE_MAX_TOKENS */
  stageMaxTokens?: Record<string, number>;
  /** Re-asks after an invalid reply (bad JSON, schema, code that fails, cut at the token cap), per ask. @default 2 */
  maxReasks?: number;
  /**
   * How much each re-ask raises the stage's temperature (capped at 1.0; 0 keeps it). A small model
   * at a low temperature answers a re-ask with the same reply byte for byte, reason or not (the
   * 0.5B did for 4 of 6 lost mine lines, docs/local-model.md), so the same temperature would spend
   * the re-ask on nothing. @default 0.3
   */
  reaskTemperatureStep?: number;
  /** Told of every retry, timeout, re-ask and cut reply as it happens (progress bars, logs). */
  onEvent?: (event: LlmEvent) => void;
  /**
   * How JSON replies are asked for: "off" (the prompt alone), "object" (`response_format:
   * json_object`), "schema" (`response_format: json_schema` with the stage's schema, which servers
   * with constrained decoding, such as llama.cpp and vLLM, enforce as they generate: a small model
   * then cannot answer in another shape or run on past a string's maxLength). @default "off"
   */
  jsonMode?: JsonMode;
}

export type JsonMode = "off" | "object" | "schema";

/** The `response_format` of a JSON stage's requests under a JSON mode; undefined for "off". */
export function responseFormat(mode: JsonMode, stage: string, schema: z.ZodType): Record<string, unknown> | undefined {
  if (mode === "object") return { type: "json_object" };
  if (mode === "schema") return { type: "json_schema", json_schema: { name: stage, schema: jsonSchemaOf(schema) } };
  return undefined;
}

/** A stage's schema as JSON Schema, converted once per zod schema (every askJson call would otherwise redo it). */
const jsonSchemas = new WeakMap<z.ZodType, Record<string, unknown>>();
function jsonSchemaOf(schema: z.ZodType): Record<string, unknown> {
  let json = jsonSchemas.get(schema);
  if (!json) {
    const { $schema: _dialect, ...rest } = z.toJSONSchema(schema, { io: "input", unrepresentable: "any" });
    jsonSchemas.set(schema, (json = rest));
  }
  return json;
}

export interface LlmEvent {
  stage: string;
  /** `fallback`: a stage gave up on one way and tries another (the whole class, then one method at a time). */
  kind: "retry" | "timeout" | "reask" | "truncated" | "fallback";
  message: string;
}

export interface StageUsage {
  /** Requests answered by the endpoint (re-asks included, retries not). */
  calls: number;
  cache_hits: number;
  prompt_tokens: number;
  completion_tokens: number;
  /** Replies sent back to the model with the reason they could not be used. */
  reasks: number;
  /** Of the re-asks: replies cut at the token cap (finish_reason "length"). */
  truncated: number;
  /** JSON replies that stopped just before their closing quotes and brackets, closed and used (closeJson). */
  closed: number;
  /** Requests sent again after a transport error or a timeout. */
  retries: number;
  /** Requests cancelled at the timeout (each is retried until maxRetries). */
  timeouts: number;
  /** Asks given up because every reply was unusable (bad JSON, wrong schema, failing code) after all re-asks. */
  invalid: number;
  /** Calls that failed for good on the transport (HTTP errors, timeouts) after all retries. */
  failures: number;
}

/**
 * The stages whose reply is a short JSON object get a token cap of their own. Measured on
 * Qwen2.5-Coder 0.5B (docs/local-model.md): a mine reply that repeated itself ran past 900 tokens
 * and was cancelled at the 300 s timeout twice, losing its task; its usable mine replies were all
 * under 200 tokens (test and judge replies, one call or one verdict, are no longer). Cut at this cap instead, a runaway reply comes back within
 * seconds and is re-asked ("shorter") rather than timing out. One method (the code fallback) fits well
 * in 1,024, and so does one tool's body (the scaffolded code mode).
 */
export const STAGE_MAX_TOKENS: Record<string, number> = { mine: 512, test: 512, judge: 512, method: 1024, body: 1024 };

const emptyUsage = (): StageUsage => ({ calls: 0, cache_hits: 0, prompt_tokens: 0, completion_tokens: 0, reasks: 0, truncated: 0, closed: 0, retries: 0, timeouts: 0, invalid: 0, failures: 0 });

/** How much of a cut-off reply goes back to the model when it is re-asked (it often repeats itself to the cap). */
const CUT_REPLY_ECHO_CHARS = 2000;

/** A reply that is unusable; the message goes back to the model when it is re-asked. */
export class InvalidReply extends Error {
  override readonly name = "InvalidReply";
}

/** An ask that failed for good: transport errors after retries, or still invalid after every re-ask. */
export class LlmError extends Error {
  override readonly name = "LlmError";
}

/**
 * The LLM layer of synth: any OpenAI-compatible endpoint per stage, a global concurrency limit,
 * bounded retries and re-asks, every call cached on disk by content, tokens counted per stage.
 */
export class LlmClient {
  readonly usage: Record<string, StageUsage> = {};
  private readonly cache: CallCache;
  private readonly limit: LimitFunction;
  private readonly transports = new Map<string, ChatEndpoint>();
  /** Requests waiting for the endpoint right now (for progress lines). */
  inFlight = 0;

  constructor(private readonly options: LlmClientOptions) {
    this.cache = new CallCache(options.cacheDir);
    this.limit = pLimit(options.concurrency ?? 8);
  }

  private endpoint(stage: string): Required<Omit<StageEndpoint, "apiKey">> & { apiKey: string } {
    const e = this.options.endpoints[stage] ?? this.options.endpoints.default;
    if (!e) throw new LlmError(`no LLM endpoint configured for stage ${stage}`);
    const baseURL = e.baseURL ?? llmEnv("SYNTH", "BASE_URL") ?? "https://api.openai.com/v1";
    return { baseURL, apiKey: e.apiKey ?? llmEnv("SYNTH", "API_KEY") ?? "none", model: e.model, temperature: e.temperature ?? 0.7 };
  }

  private stats(stage: string): StageUsage {
    return (this.usage[stage] ??= emptyUsage());
  }

  private emit(stage: string, kind: LlmEvent["kind"], message: string): void {
    this.options.onEvent?.({ stage, kind, message });
  }

  /** Tells the event listener that a stage falls back to another way of getting its answer. */
  fallback(stage: string, message: string): void {
    this.emit(stage, "fallback", message);
  }

  /** The `max_tokens` a stage's requests carry: the lower of --max-tokens and the stage's own cap. */
  maxTokensOf(stage: string): number | undefined {
    const caps = [this.options.maxTokens, (this.options.stageMaxTokens ?? STAGE_MAX_TOKENS)[stage]].filter((n): n is number => n !== undefined);
    return caps.length ? Math.min(...caps) : undefined;
  }

  /** One chat completion, from the cache when this exact request was answered before. */
  async chat(stage: string, messages: Message[]): Promise<string> {
    return (await this.complete(stage, messages)).content;
  }

  /** How JSON replies are asked for (see LlmClientOptions.jsonMode). */
  get jsonMode(): JsonMode {
    return this.options.jsonMode ?? "off";
  }

  /**
   * One chat completion and why it ended. Transport errors and timeouts are retried by the shared
   * endpoint loop (llm/chat-endpoint.ts), which tells each retry and timeout as it happens so it is
   * counted per stage and reported.
   */
  private async complete(stage: string, messages: Message[], format?: Record<string, unknown>, reask = 0): Promise<{ content: string; finish_reason: string }> {
    const ep = { ...this.endpoint(stage) };
    if (reask > 0) ep.temperature = reaskTemperature(ep.temperature, reask, this.options.reaskTemperatureStep ?? 0.3);
    const stats = this.stats(stage);
    const maxTokens = this.maxTokensOf(stage);
    const extra = { ...(maxTokens ? { max_tokens: maxTokens } : {}), ...(format ? { response_format: format } : {}) };
    // the key leaves out the API key (a secret, and not part of what the reply depends on)
    const key = CallCache.key({ baseURL: ep.baseURL, model: ep.model, temperature: ep.temperature, messages, ...extra });
    const hit = this.cache.get(key);
    if (hit) {
      stats.cache_hits++;
      return { content: hit.content, finish_reason: hit.finish_reason ?? "stop" };
    }
    return this.limit(async () => {
      const id = `${ep.baseURL}\n${ep.apiKey}`;
      let transport = this.transports.get(id);
      if (!transport) {
        transport = new ChatEndpoint({ baseURL: ep.baseURL, apiKey: ep.apiKey, timeoutMs: this.options.timeoutMs ?? 120_000, maxRetries: this.options.maxRetries ?? 4, backoffMs: 500, backoffCapMs: 8000 });
        this.transports.set(id, transport);
      }
      const maxRetries = this.options.maxRetries ?? 4;
      const timeoutS = (this.options.timeoutMs ?? 120_000) / 1000;
      this.inFlight++;
      try {
        const { response: r, usage } = await transport.complete({ model: ep.model, temperature: ep.temperature, messages, ...(extra as { max_tokens?: number }) }, {
          onTimeout: (attempt) => {
            stats.timeouts++;
            this.emit(stage, "timeout", `${stage}: no reply within ${timeoutS} s (try ${attempt} of ${maxRetries + 1})`);
          },
          onRetry: (_, e) => {
            stats.retries++;
            this.emit(stage, "retry", `${stage}: retrying after ${e.message}`);
          },
        });
        stats.calls++;
        const content = r.choices[0]?.message?.content ?? "";
        const finish_reason = r.choices[0]?.finish_reason ?? "stop";
        stats.prompt_tokens += usage.prompt_tokens;
        stats.completion_tokens += usage.completion_tokens;
        this.cache.put(key, { content, usage, finish_reason });
        return { content, finish_reason };
      } catch (e) {
        if (!(e instanceof EndpointError)) throw e;
        stats.failures++;
        const why = e.timeouts ? `; ${e.timeouts} of them timed out after ${timeoutS} s (raise --timeout / ENVSCALER_LLM_TIMEOUT for a slow endpoint)` : "";
        throw new LlmError(`${stage}: the LLM call failed after ${e.attempts} tries${why}: ${e.detail}`, { cause: e });
      } finally {
        this.inFlight--;
      }
    });
  }

  /**
   * Asks until `parse` accepts the reply: an InvalidReply goes back to the model as the next user
   * message (at most maxReasks times). Every attempt is a cached call, so a resumed run replays
   * the same conversation for free.
   */
  async ask<T>(stage: string, messages: Message[], parse: (reply: string) => T | Promise<T>, format?: Record<string, unknown>, options: AskOptions = {}): Promise<T> {
    let convo = [...messages];
    const rejected: string[] = [];
    const maxTokens = this.maxTokensOf(stage);
    const max = this.options.maxReasks ?? 2;
    for (let attempt = 0; ; attempt++) {
      const { content: reply, finish_reason } = await this.complete(stage, convo, format, attempt);
      const cut = finish_reason === "length";
      try {
        // a reply cut at the token cap is unusable even when a prefix parses: it is re-asked
        if (cut) throw new InvalidReply(`it was cut off at the token limit${maxTokens ? ` (max_tokens ${maxTokens})` : ""} before it ended (finish_reason "length"); it may have repeated itself. Reply again, complete and shorter, without repeating anything`);
        return await parse(reply);
      } catch (e) {
        if (!(e instanceof InvalidReply)) throw e;
        if (attempt >= max) {
          this.stats(stage).invalid++;
          throw new LlmError(`${stage}: still invalid after ${max} re-asks: ${e.message}`);
        }
        this.stats(stage).reasks++;
        if (cut) this.stats(stage).truncated++;
        this.emit(stage, cut ? "truncated" : "reask", `${stage}: re-asking: ${e.message}`);
        if (options.echo === false) {
          // the request again, with what was wrong with each earlier reply but not the replies
          rejected.push(e.message);
          const last = messages[messages.length - 1]!;
          const why = rejected.map((r, i) => `${i + 1}. ${r}`).join("\n");
          convo = [...messages.slice(0, -1), { ...last, content: `${last.content}\n\nEarlier replies to this request were rejected:\n${why}\nWrite a new reply that avoids every one of these problems.` }];
          continue;
        }
        const echoed = cut && reply.length > CUT_REPLY_ECHO_CHARS ? `${reply.slice(0, CUT_REPLY_ECHO_CHARS)}\n[… cut]` : reply;
        convo.push({ role: "assistant", content: echoed }, { role: "user", content: `Your reply cannot be used: ${e.message}\nReply again, in the required format, fixing exactly that.` });
      }
    }
  }

  /** ask() for a JSON reply validated by a zod schema, plus an optional semantic check. */
  askJson<S extends z.ZodType>(stage: string, messages: Message[], schema: S, check?: (value: z.infer<S>) => string | null | Promise<string | null>, options: AskOptions = {}): Promise<z.infer<S>> {
    return this.ask(stage, messages, async (reply) => {
      let raw: unknown;
      let closed = false;
      try {
        raw = JSON.parse(extractJson(reply));
      } catch (e) {
        raw = closeJson(reply);
        if (raw === null) throw new InvalidReply(`it is not valid JSON (${(e as Error).message})`);
        closed = true;
      }
      const parsed = schema.safeParse(raw);
      if (!parsed.success) throw new InvalidReply(`the JSON does not match the schema: ${parsed.error.issues.slice(0, 5).map((i) => `${i.path.join(".") || "(root)"}: ${i.message}`).join("; ")}`);
      const problem = check ? await check(parsed.data) : null;
      if (problem) throw new InvalidReply(problem);
      if (closed) this.stats(stage).closed++;
      return parsed.data;
    }, responseFormat(this.jsonMode, stage, schema), options);
  }

  totals(): StageUsage {
    const t = emptyUsage();
    for (const u of Object.values(this.usage)) for (const k of Object.keys(t) as (keyof StageUsage)[]) t[k] += u[k] ?? 0;
    return t;
  }
}

/** The temperature of the n-th re-ask: the stage's own raised by n steps, at most 1.0, never lowered. */
export function reaskTemperature(base: number, n: number, step: number): number {
  if (step <= 0 || base >= 1) return base;
  return Math.round(Math.min(1, base + n * step) * 100) / 100;
}

/**
 * The JSON of a reply that stopped (finish_reason "stop", not cut at the token cap) just before
 * its closing quotes and brackets, closed; null when that does not make it parse. Qwen2.5-Coder
 * 0.5B ended 4 of its first 5 mine replies that way on llama.cpp (docs/local-model.md), each worth
 * a re-ask of a minute or more on a CPU. Only the missing tail is added: anything else wrong with
 * the text still fails, and the schema check that follows still applies.
 */
export function closeJson(reply: string): unknown {
  const start = reply.search(/[{[]/);
  if (start < 0) return null;
  const text = reply.slice(start).trimEnd();
  const open: string[] = [];
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (inString) {
      if (c === "\\") i++;
      else if (c === '"') inString = false;
    } else if (c === '"') inString = true;
    else if (c === "{" || c === "[") open.push(c === "{" ? "}" : "]");
    else if (c === "}" || c === "]") {
      if (open.pop() !== c) return null;
      if (open.length === 0) return null; // the JSON closed already: whatever is wrong, it is not a missing tail
    }
  }
  if (open.length === 0) return null;
  try {
    return JSON.parse(`${text}${inString ? '"' : ""}${open.reverse().join("")}`);
  } catch {
    return null;
  }
}

/** The JSON in a reply: a fenced ```json block if there is one, else from the first { or [ to the last } or ]. */
export function extractJson(reply: string): string {
  const fenced = /```(?:json)?\s*\n([\s\S]*?)```/.exec(reply);
  if (fenced) return fenced[1]!.trim();
  const start = reply.search(/[{[]/);
  const end = Math.max(reply.lastIndexOf("}"), reply.lastIndexOf("]"));
  return start >= 0 && end > start ? reply.slice(start, end + 1) : reply.trim();
}

/** The code in a reply: the first ```js / ```javascript block, else the whole reply. */
export function extractCode(reply: string): string {
  const fenced = /```(?:js|javascript)?\s*\n([\s\S]*?)```/.exec(reply);
  return (fenced ? fenced[1]! : reply).trim();
}
