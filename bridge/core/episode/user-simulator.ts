import { CallCache } from "../../../llm/call-cache.js";
import type { TextMessage, Usage } from "../../../llm/chat.js";
import { ChatEndpoint } from "../../../llm/chat-endpoint.js";
import { EndpointError } from "../../../llm/endpoint-error.js";
import { LlmEnvError, llmEnv, llmEnvNumber } from "../../../llm/llm-env.js";

/** The simulated user's side of a conversation-mode episode. */
export interface UserSimulator {
  /** The user's opening message. */
  start(): Promise<string>;
  /** The user's answer to the agent's message; contains STOP_MARKER when the user is done. */
  reply(agentMessage: string): Promise<string>;
  /** An independent simulator with this one's conversation so far (forking an episode). */
  fork(): UserSimulator;
  /** The conversation as plain data, for a snapshot restored in another thread (see OpenAIUserSimulator.resume); absent: not portable. */
  conversation?(): UserConversation;
}

/** A simulated user's conversation so far, and the recorded replies it will give before asking its LLM again. */
export interface UserConversation {
  messages: TextMessage[];
  prefill: string[];
}

export const STOP_MARKER = "###STOP###";

/**
 * Where the simulated user's LLM is and how it is asked. Every field left unset falls back to an
 * environment variable of the one scheme (llm/llm-env.ts, role USER: so `envscaler serve` flags, a
 * launcher and tests all configure it the same way), then to the default.
 */
export interface UserSimulatorConfig {
  /** OpenAI-compatible base URL; falls back to ENVSCALER_USER_BASE_URL (alias USER_OPENAI_BASE_URL), then OPENAI_BASE_URL. */
  baseURL?: string;
  /** Falls back to ENVSCALER_USER_API_KEY (alias USER_OPENAI_API_KEY), then OPENAI_API_KEY. */
  apiKey?: string;
  /** Falls back to ENVSCALER_USER_MODEL. @default "gpt-4.1" (as in EnvScaler) */
  model?: string;
  /** Falls back to ENVSCALER_USER_TEMPERATURE. @default 0.7 */
  temperature?: number;
  /** Per-request timeout; falls back to ENVSCALER_USER_TIMEOUT, then ENVSCALER_LLM_TIMEOUT (seconds). @unit milliseconds @default 60000 */
  timeoutMs?: number;
  /** Retries of one request on transport errors, timeouts, 429 and 5xx; falls back to ENVSCALER_USER_MAX_RETRIES, then ENVSCALER_LLM_MAX_RETRIES. @default 3 */
  maxRetries?: number;
  /** Re-asks when a reply has no `# Reply:` section. @default 3 */
  maxFormatRetries?: number;
  /**
   * Where finished calls are kept, keyed by the request and the episode (scenario and seed), so a
   * resumed rollout gets the same replies without asking again; falls back to ENVSCALER_USER_CACHE.
   * Unset: no cache.
   */
  cacheDir?: string;
}

/** The greeting that elicits the user's opening (EnvScaler's). */
export const GREETING = "Hi! How can I help you today?";

/** A number from the environment; a bad one is the simulated user's typed error. */
function envNumber(setting: "TEMPERATURE" | "TIMEOUT" | "MAX_RETRIES", env: NodeJS.ProcessEnv): number | undefined {
  try {
    return llmEnvNumber("USER", setting, env);
  } catch (e) {
    if (e instanceof LlmEnvError) throw new UserSimulatorError(e.message);
    throw e;
  }
}

/** The config with every unset field filled from the environment, then the defaults. */
export function resolveUserConfig(config: UserSimulatorConfig = {}, env: NodeJS.ProcessEnv = process.env) {
  const timeoutS = envNumber("TIMEOUT", env);
  return {
    baseURL: config.baseURL ?? llmEnv("USER", "BASE_URL", env),
    apiKey: config.apiKey ?? llmEnv("USER", "API_KEY", env) ?? "unset",
    model: config.model ?? llmEnv("USER", "MODEL", env) ?? "gpt-4.1",
    temperature: config.temperature ?? envNumber("TEMPERATURE", env) ?? 0.7,
    timeoutMs: config.timeoutMs ?? (timeoutS !== undefined ? timeoutS * 1000 : 60_000),
    maxRetries: config.maxRetries ?? envNumber("MAX_RETRIES", env) ?? 3,
    maxFormatRetries: config.maxFormatRetries ?? 3,
    cacheDir: config.cacheDir ?? llmEnv("USER", "CACHE", env),
  };
}

/**
 * Why a user reply is the simulator playing the wrong part (a known small-model failure): it
 * answers as the agent, or echoes the agent's greeting. null: the reply is in role.
 */
export function outOfRole(reply: string, agentMessage: string): string | null {
  const norm = (t: string) => t.toLowerCase().replace(/[^a-z0-9]+/g, " ").trim();
  if (/^\s*(\[agent\]|agent\s*:|assistant\s*:)/i.test(reply)) return "your reply is written as the Agent";
  if (norm(reply) === norm(agentMessage) || norm(reply) === norm(GREETING)) return "your reply repeats the Agent's message";
  if (/\bhow (can|may) i (help|assist) you\b|\bis there anything else i can (help|do|assist)\b/i.test(reply)) return "your reply offers help as if you were the Agent";
  return null;
}

/** Why the simulated user could not answer. The episode ends with this as its typed error. */
export class UserSimulatorError extends Error {
  override readonly name = "UserSimulatorError";
}

export function userSystemPrompt(task: string, instructions: string): string {
  return [
    "You are playing a human user who is talking to a customer-service agent (the Agent) to get something done.",
    "",
    `[Task Goal]\n${task}`,
    "",
    `[Your Instructions]\n${instructions}`,
    "",
    "Rules:",
    "- Reveal what you want and the details the Agent needs gradually, only when asked or when it is natural; do not dump everything at once.",
    "- Never invent information that is not in your goal or instructions. If asked for something you do not know, say you do not know.",
    "- Keep names, ids, numbers and other keywords exactly as given.",
    "- When the Agent offers choices, pick only options consistent with your goal.",
    `- When your goal is fully achieved (or clearly cannot be), reply with exactly ${STOP_MARKER} as your whole reply.`,
    "",
    "Answer in this format:",
    "# Thought:",
    "<your private reasoning>",
    "# Reply:",
    "<what you say to the Agent>",
  ].join("\n");
}

/** Extracts the user-visible reply; the stop marker counts only inside the reply, not the thought. */
export function parseUserReply(raw: string): string | null {
  const m = /#\s*Reply:\s*([\s\S]*)$/i.exec(raw);
  const reply = (m ? m[1]! : raw.includes("# Thought") ? "" : raw).trim();
  if (!reply) return null;
  return reply.includes(STOP_MARKER) ? STOP_MARKER : reply;
}

/** A cache folder that cannot be made is the simulated user's failure (a typed episode error), not the bridge's. */
function cacheAt(dir: string): CallCache {
  try {
    return new CallCache(dir);
  } catch (e) {
    throw new UserSimulatorError(`cannot use ${dir} as the simulated user's cache: ${(e as Error).message}`);
  }
}

/**
 * A simulated user over any OpenAI-compatible chat endpoint, following EnvScaler's user agent: the
 * roles are inverted (agent turns are sent as `user` messages prefixed "[Agent] "), and the opening
 * is elicited with the agent's greeting.
 */
export class OpenAIUserSimulator implements UserSimulator {
  private readonly endpoint: ChatEndpoint;
  private readonly messages: TextMessage[];

  private readonly prefill: string[];

  /**
   * @param prefill replies already recorded for this conversation (restoring an episode): they are
   * replayed into the history in order before any new LLM call is made.
   */
  private readonly config: ReturnType<typeof resolveUserConfig>;
  private readonly cache: CallCache | null;

  /**
   * @param salt tells this episode's calls apart in the cache from another episode's with the same
   * conversation (the bridge passes the scenario and seed), so trials are not answered from each other.
   */
  constructor(
    task: string,
    instructions: string,
    config: UserSimulatorConfig = {},
    prefill: readonly string[] = [],
    private readonly salt = "",
  ) {
    this.prefill = [...prefill];
    this.config = resolveUserConfig(config);
    this.endpoint = new ChatEndpoint({ baseURL: this.config.baseURL, apiKey: this.config.apiKey, timeoutMs: this.config.timeoutMs, maxRetries: this.config.maxRetries, backoffMs: 500, backoffCapMs: 8000 });
    this.cache = this.config.cacheDir ? cacheAt(this.config.cacheDir) : null;
    this.messages = [{ role: "system", content: userSystemPrompt(task, instructions) }];
  }

  start(): Promise<string> {
    return this.reply(GREETING);
  }

  /**
   * A simulator that goes on from `conversation` (its history kept as it was, thoughts included,
   * so its next prompt is the one the original would have sent), with the same settings as new.
   */
  static resume(task: string, instructions: string, config: UserSimulatorConfig, conversation: UserConversation, salt = ""): OpenAIUserSimulator {
    const sim = new OpenAIUserSimulator(task, instructions, config, conversation.prefill, salt);
    sim.messages.splice(0, sim.messages.length, ...conversation.messages.map((m) => ({ ...m })));
    return sim;
  }

  conversation(): UserConversation {
    return { messages: this.messages.map((m) => ({ ...m })), prefill: [...this.prefill] };
  }

  fork(): OpenAIUserSimulator {
    const copy = Object.create(OpenAIUserSimulator.prototype) as OpenAIUserSimulator;
    // the same endpoint and settings; its own copy of the history and of the replies still to replay
    Object.assign(copy, this, { messages: this.messages.map((m) => ({ ...m })), prefill: [...this.prefill] });
    return copy;
  }

  async reply(agentMessage: string): Promise<string> {
    this.messages.push({ role: "user", content: `[Agent] ${agentMessage}` });
    const recorded = this.prefill.shift();
    if (recorded !== undefined) {
      this.messages.push({ role: "assistant", content: `# Thought:\n(recorded)\n# Reply:\n${recorded}` });
      return recorded;
    }
    const first = await this.ask();
    const reply = parseUserReply(first);
    const wrong = reply === STOP_MARKER ? null : outOfRole(reply!, agentMessage);
    if (!wrong) {
      this.messages.push({ role: "assistant", content: first });
      return reply!;
    }
    // one re-ask with the reason; whatever comes back is kept, and the detour leaves the history
    const detour = [
      { role: "assistant" as const, content: first },
      { role: "user" as const, content: `[System] ${wrong}. You are the human user, not the Agent: answer the Agent's last message as the user would, in the same format (# Thought: / # Reply:).` },
    ];
    this.messages.push(...detour);
    let second: string;
    try {
      second = await this.ask();
    } finally {
      this.messages.splice(-detour.length, detour.length);
    }
    this.messages.push({ role: "assistant", content: second });
    return parseUserReply(second)!;
  }

  /**
   * One raw reply that has a `# Reply:` section, re-asking (bounded) when it has none. Only an
   * accepted reply is cached: a resumed run must not be handed back a reply that was re-asked.
   */
  private async ask(): Promise<string> {
    const request = { model: this.config.model, temperature: this.config.temperature, messages: this.messages };
    // the key leaves out the API key (a secret the reply does not depend on)
    const key = this.cache ? CallCache.key({ baseURL: this.config.baseURL ?? null, request, salt: this.salt }) : "";
    const hit = this.cache?.get(key);
    if (hit) return hit.content;
    const tries = 1 + this.config.maxFormatRetries;
    for (let i = 0; i < tries; i++) {
      let raw: string;
      let usage: Usage;
      try {
        const done = await this.endpoint.complete(request);
        raw = done.response.choices[0]?.message?.content ?? "";
        usage = done.usage;
      } catch (e) {
        if (!(e instanceof EndpointError)) throw e;
        const tries = e.attempts > 1 ? ` after ${e.attempts} tries` : "";
        throw new UserSimulatorError(`simulated user request failed (${this.config.baseURL ?? "OpenAI"}, model ${this.config.model})${tries}: ${e.detail}`);
      }
      if (parseUserReply(raw) !== null) {
        try {
          this.cache?.put(key, { content: raw, usage });
        } catch (e) {
          throw new UserSimulatorError(`cannot write the simulated user's cache ${this.config.cacheDir}: ${(e as Error).message}`);
        }
        return raw;
      }
    }
    throw new UserSimulatorError(`simulated user gave no '# Reply:' section in ${tries} tries`);
  }
}

/** Plays back recorded replies (replay, tests); asking past the end is an error, never an LLM call. */
export class ScriptedUserSimulator implements UserSimulator {
  private next = 0;
  constructor(private readonly replies: readonly string[]) {}

  start(): Promise<string> {
    return this.take();
  }

  reply(): Promise<string> {
    return this.take();
  }

  fork(): ScriptedUserSimulator {
    const copy = new ScriptedUserSimulator(this.replies);
    copy.next = this.next;
    return copy;
  }

  private take(): Promise<string> {
    const r = this.replies[this.next++];
    return r === undefined ? Promise.reject(new UserSimulatorError(`the recording has only ${this.replies.length} user replies`)) : Promise.resolve(r);
  }
}
