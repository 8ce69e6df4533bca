/**
 * The chat vocabulary every part that talks to a model shares (the agent, the simulated user, the
 * synth stages, the SFT export and the UI): messages, tool calls and token usage in the OpenAI
 * chat-completions shape, which every OpenAI-compatible server (vLLM, llama.cpp, SGLang) speaks.
 */

/** One call of a tool the assistant asked for; `arguments` is the JSON text as the model wrote it (it may not parse). */
export interface ToolCall {
  id: string;
  type: "function";
  function: { name: string; arguments: string };
}

/**
 * A chat message in the OpenAI shape, plus `reasoning_content` when a reasoning server returns
 * one. A `tool` message is a tool's result, tied to its call by `tool_call_id`. The rollout agent
 * keeps its history in this shape and the SFT export writes it.
 */
export interface ChatMessage {
  role: "system" | "user" | "assistant" | "tool";
  content: string | null;
  tool_calls?: ToolCall[];
  tool_call_id?: string;
  name?: string;
  reasoning_content?: string;
}

/** A tool's result as the chat carries it back to the model. */
export type ToolResultMessage = ChatMessage & { role: "tool"; tool_call_id: string };

/** A plain text turn (no tools): what the synth stages and the simulated user send. */
export interface TextMessage {
  role: "system" | "user" | "assistant";
  content: string;
}

/** Tokens one request took, as the endpoint reported them (0 when it reports none). */
export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
}
