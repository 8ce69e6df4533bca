import { readFileSync } from "node:fs";
import { qwenToolsSection } from "../bridge/tools/record/sft-export.js";

export type ScenarioMode = "task" | "conversation";
export type AgentMode = "fc" | "prompt";

/** The last reply a task agent gives when it is done (the original's convention; the SFT filter looks for it). */
export const TASK_DONE = "Task Completed";

// Our wording, with the original's structure (interact_with_env agent/system_prompt_util.py):
// work with tools step by step, one call per step, read before you write, a fixed closing reply
// for tasks; for conversations also ask the user for what is missing and report back.
const TASK_PROMPT = [
  "You are an agent that completes the task you are given by operating an environment through its tools.",
  "",
  "How to work:",
  "- Work step by step: call one tool, read its result, then decide the next step.",
  "- Avoid making several tool calls in one step.",
  "- Look things up before you change them: use the query tools to confirm ids and current values, then use the tools that modify state.",
  "- Use only the information in the task and in tool results; do not invent ids or values.",
  "- Follow the environment's rules below.",
  `- When you believe the task is complete, reply with only '${TASK_DONE}' and no tool call.`,
].join("\n");

const CONVERSATION_PROMPT = [
  "You are an agent that helps a user by talking with them and operating an environment through its tools.",
  "",
  "How to work:",
  "- Work step by step: call one tool, read its result, then decide the next step.",
  "- Avoid making several tool calls in one step.",
  "- If you need information only the user has (who they are, which item, which option), ask the user for it.",
  "- In one step, either call a tool or talk to the user, never both.",
  "- Look things up before you change them: use the query tools to confirm ids and current values, then use the tools that modify state.",
  "- Use only the information the user gives and tool results; do not invent ids or values.",
  "- Follow the environment's rules below.",
  "- When you have done what the user asked, tell them what you did.",
].join("\n");

/** The environment part the original appends to every system prompt. */
export function environmentIntroduction(introduction: string, rules: string[]): string {
  return `# Environment Information\n\n## Brief Introduction:\n${introduction}\n\n## Environment Rules / Constraints:\n${rules.map((r) => `- ${r}`).join("\n") || "- (none)"}`;
}

/** Qwen3's tool advertisement (what its chat template writes for `tools`), for prompt mode. */
export const toolsSection = qwenToolsSection;

export interface SystemPromptOptions {
  mode: ScenarioMode;
  agentMode: AgentMode;
  introduction: string;
  rules: string[];
  tools: unknown[];
  /** Replaces the built-in instructions for this scenario mode (the environment and tools are still appended). */
  override?: Partial<Record<ScenarioMode, string>>;
}

export function systemPrompt(o: SystemPromptOptions): string {
  const head = o.override?.[o.mode] ?? (o.mode === "task" ? TASK_PROMPT : CONVERSATION_PROMPT);
  const env = `${head}\n\nThe following is an introduction to the current environment:\n${environmentIntroduction(o.introduction, o.rules)}`;
  return o.agentMode === "prompt" ? `${env}\n\n${toolsSection(o.tools)}` : env;
}

/**
 * Reads prompt overrides: a JSON file `{"task": "...", "conversation": "..."}` (either key), or any
 * other file as one text used for both modes.
 */
export function readSystemPromptFile(path: string): Partial<Record<ScenarioMode, string>> {
  const text = readFileSync(path, "utf8");
  if (path.endsWith(".json")) {
    const j = JSON.parse(text) as Record<string, unknown>;
    const out: Partial<Record<ScenarioMode, string>> = {};
    for (const k of ["task", "conversation"] as const) if (typeof j[k] === "string") out[k] = j[k];
    if (!out.task && !out.conversation) throw new Error(`${path}: expected {"task": "...", "conversation": "..."}`);
    return out;
  }
  return { task: text.trim(), conversation: text.trim() };
}
