import OpenAI from "openai";

/** The simulated user's side of a conversation-mode episode. */
export interface UserSimulator {
  /** The user's opening message. */
  start(): Promise<string>;
  /** The user's answer to the agent's message; contains STOP_MARKER when the user is done. */
  reply(agentMessage: string): Promise<string>;
  /** An independent simulator with this one's conversation so far (forking an episode). */
  fork(): UserSimulator;
}

export const STOP_MARKER = "###STOP###";

export interface UserSimulatorConfig {
  /** OpenAI-compatible base URL; falls back to USER_OPENAI_BASE_URL, then OPENAI_BASE_URL. */
  baseURL?: string;
  /** Falls back to USER_OPENAI_API_KEY, then OPENAI_API_KEY. */
  apiKey?: string;
  /** @default "gpt-4.1" (as in EnvScaler) */
  model?: string;
  /** @default 0.7 */
  temperature?: number;
  /** Per-request timeout. @unit milliseconds @default 60000 */
  timeoutMs?: number;
  /** Retries of one request on transport errors. @default 3 */
  maxRetries?: number;
  /** Re-asks when a reply has no `# Reply:` section. @default 3 */
  maxFormatRetries?: number;
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

/**
 * A simulated user over any OpenAI-compatible chat endpoint, following EnvScaler's user agent: the
 * roles are inverted (agent turns are sent as `user` messages prefixed "[Agent] "), and the opening
 * is elicited with the agent's greeting.
 */
export class OpenAIUserSimulator implements UserSimulator {
  private readonly client: OpenAI;
  private readonly messages: { role: "system" | "user" | "assistant"; content: string }[];

  private readonly prefill: string[];

  /**
   * @param prefill replies already recorded for this conversation (restoring an episode): they are
   * replayed into the history in order before any new LLM call is made.
   */
  constructor(
    task: string,
    instructions: string,
    private readonly config: UserSimulatorConfig = {},
    prefill: readonly string[] = [],
  ) {
    this.prefill = [...prefill];
    this.client = new OpenAI({
      baseURL: config.baseURL ?? process.env.USER_OPENAI_BASE_URL ?? process.env.OPENAI_BASE_URL,
      apiKey: config.apiKey ?? process.env.USER_OPENAI_API_KEY ?? process.env.OPENAI_API_KEY ?? "unset",
      timeout: config.timeoutMs ?? 60_000,
      maxRetries: config.maxRetries ?? 3,
    });
    this.messages = [{ role: "system", content: userSystemPrompt(task, instructions) }];
  }

  start(): Promise<string> {
    return this.reply("Hi! How can I help you today?");
  }

  fork(): OpenAIUserSimulator {
    const copy = Object.create(OpenAIUserSimulator.prototype) as OpenAIUserSimulator;
    // the same client and settings; its own copy of the history and of the replies still to replay
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
    const tries = 1 + (this.config.maxFormatRetries ?? 3);
    for (let i = 0; i < tries; i++) {
      let raw: string;
      try {
        const res = await this.client.chat.completions.create({
          model: this.config.model ?? "gpt-4.1",
          temperature: this.config.temperature ?? 0.7,
          messages: this.messages,
        });
        raw = res.choices[0]?.message?.content ?? "";
      } catch (e) {
        throw new UserSimulatorError(`simulated user request failed: ${(e as Error).message}`);
      }
      const reply = parseUserReply(raw);
      if (reply !== null) {
        this.messages.push({ role: "assistant", content: raw });
        return reply;
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

  private async take(): Promise<string> {
    const r = this.replies[this.next++];
    if (r === undefined) throw new UserSimulatorError(`the recording has only ${this.replies.length} user replies`);
    return r;
  }
}
