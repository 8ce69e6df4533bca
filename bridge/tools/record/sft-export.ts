import { parseAction } from "../../core/episode/action-parser.js";
import type { ChatMessage } from "../../../llm/chat.js";
import type { RecordedEpisode } from "./trajectory-reader.js";

export interface SftRecord {
  messages: ChatMessage[];
  tools: unknown[];
  episode_id: string;
  env_id: string;
  scenario_id: string;
  reward: number | null;
}

export interface SftFilter {
  minReward?: number;
  /** Bounds on the agent's turns (steps: one assistant message each). */
  minTurns?: number;
  maxTurns?: number;
  /** Only episodes that ended (terminal or finished); the default. */
  onlyFinished?: boolean;
  /** Every assistant turn carries reasoning (`<think>` or `reasoning_content`), as the original's filter demands. */
  requireThink?: boolean;
  /**
   * The episode ended the way a finished one does in the original: a task with a last reply
   * containing "Task Completed" (so "Task Failed" is dropped), a conversation with the user's
   * `###STOP###`.
   */
  requireDone?: boolean;
}

/** The original's trajectory filter (traj_filter.py): assistant turns in [3, 29] for tasks and [5, 39] for conversations, think present, ended done. */
export function originalFilter(e: RecordedEpisode): SftFilter {
  const conversation = isConversation(e);
  return { minTurns: conversation ? 5 : 3, maxTurns: conversation ? 39 : 29, requireThink: true, requireDone: true };
}

/** The trajectory does not record the scenario's mode; the simulated user's opening reply marks a conversation. */
export function isConversation(e: RecordedEpisode): boolean {
  return e.start.user_replies.length > 0 || endReason(e) === "user_stop";
}

function endReason(e: RecordedEpisode): string | undefined {
  return e.end?.result?.end_reason ?? e.steps.at(-1)?.end_reason;
}

/**
 * The opening words of the bridge's stand-in for a user who is not there (a conversation played
 * with no simulated user; older bridges wrote "…; the message was recorded)" and went on). Text
 * the bridge wrote, not a user's: exported as a user turn it would teach a fake user.
 */
export const NO_USER_PREFIX = "(no simulated user is attached";

/** Why an episode is never exported, whatever the filter: it holds a turn nobody said. */
export const NO_USER_REASON = "no simulated user: a placeholder stands where the user's turn would be";

function hasPlaceholderTurn(e: RecordedEpisode): boolean {
  return endReason(e) === "no_user" || e.steps.some((st) => st.observation.role === "user" && st.observation.content.startsWith(NO_USER_PREFIX));
}

/** Why an episode fails the filter, or null when it passes. */
export function filterProblem(e: RecordedEpisode, f: SftFilter): string | null {
  if (hasPlaceholderTurn(e)) return NO_USER_REASON;
  // its turns before the fork point were recorded (with their observations) only in its source
  if (e.start.prefix_actions?.length) return `a fork: its first ${e.start.prefix_actions.length} turns are not in its own recording`;
  const reward = episodeReward(e);
  if ((f.onlyFinished ?? true) && reward === null) return "did not end";
  if (f.minReward !== undefined && (reward ?? 0) < f.minReward) return `reward ${reward} < ${f.minReward}`;
  const turns = e.steps.length;
  if (f.minTurns !== undefined && turns < f.minTurns) return `${turns} turns < ${f.minTurns}`;
  if (f.maxTurns !== undefined && turns > f.maxTurns) return `${turns} turns > ${f.maxTurns}`;
  if (f.requireThink && e.steps.some((st) => { const p = parseAction(st.action, st.step); return p.kind === "invalid" || !p.reasoning?.trim(); }))
    return "an assistant turn without <think>";
  if (f.requireDone) {
    const why = endReason(e);
    const last = e.steps.at(-1);
    const parsed = last ? parseAction(last.action, last.step) : null;
    const done = why === "user_stop" || (why === "text_reply" && parsed?.kind === "text" && parsed.text.includes("Task Completed"));
    if (!done) return `did not end done (${why ?? "no end"})`;
  }
  return null;
}

/** The reward an episode ended with, or null when it did not end. */
export function episodeReward(e: RecordedEpisode): number | null {
  const last = e.steps.at(-1);
  if (e.end?.how === "finish" && e.end.result) return e.end.result.reward;
  if (last && (last.terminated || last.truncated)) return last.reward;
  return null;
}

/**
 * One episode as OpenAI-format chat messages (what LlamaFactory's and TRL's tool-calling SFT
 * formats read): the env's introduction and rules as the system message, the task or the user's
 * messages, the agent's tool calls with their results as `tool` messages, its text replies.
 */
export function toChat(e: RecordedEpisode): SftRecord {
  const s = e.start;
  const system = `${s.introduction}${s.rules.length ? `\n\nRules:\n${s.rules.map((r) => `- ${r}`).join("\n")}` : ""}`;
  const messages: ChatMessage[] = [{ role: "system", content: system }, { role: "user", content: s.observation.content }];
  for (const step of e.steps) {
    const parsed = parseAction(step.action, step.step);
    const reasoning = parsed.kind !== "invalid" && parsed.reasoning ? { reasoning_content: parsed.reasoning } : {};
    if (step.tool_calls.length) {
      const text = parsed.kind === "tool_calls" ? parsed.text : "";
      messages.push({
        role: "assistant",
        content: text || null,
        tool_calls: step.tool_calls.map((c) => ({ id: c.id, type: "function", function: { name: c.name, arguments: JSON.stringify(c.arguments) } })),
        ...reasoning,
      });
      for (const r of step.observation.tool_results ?? []) messages.push({ role: "tool", tool_call_id: r.tool_call_id, name: r.name, content: r.content });
    } else {
      messages.push({ role: "assistant", content: parsed.kind === "invalid" ? String(typeof step.action === "string" ? step.action : JSON.stringify(step.action)) : parsed.text, ...reasoning });
      // what the agent heard back (the simulated user's reply, or an error about its action);
      // a conversation's closing line is not a turn the agent answers, so it is left out
      if (!step.terminated && !step.truncated) messages.push({ role: "user", content: step.observation.content });
    }
  }
  return { messages, tools: s.tools, episode_id: s.episode_id, env_id: s.env_id, scenario_id: s.scenario_id, reward: episodeReward(e) };
}

export function selectForSft(episodes: RecordedEpisode[], f: SftFilter): SftRecord[] {
  return episodes.filter((e) => filterProblem(e, f) === null).map(toChat);
}

const THINK = /<think>[\s\S]*?<\/think>\s*/gi;
const withThink = (reasoning: string | undefined, rest: string) => (reasoning?.trim() ? `<think>\n${reasoning.trim()}\n</think>\n\n${rest}` : rest);

/** Qwen3's tool advertisement in the system prompt (what its chat template writes for `tools`). */
export function qwenToolsSection(tools: unknown[]): string {
  return `# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>\n${tools.map((t) => JSON.stringify(t)).join("\n")}\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>`;
}

/**
 * The chat flattened the way the original's sft step 1 does it with Qwen3's template: tool calls
 * as `<tool_call>` text in the assistant turn, tool results as one user turn of
 * `<tool_response>` blocks, and every assistant turn's reasoning put back as `<think>`.
 * Returns the system text and alternating user/assistant turns.
 */
export function flattenQwen(r: SftRecord): { system: string; turns: { role: "user" | "assistant"; content: string }[] } {
  const turns: { role: "user" | "assistant"; content: string }[] = [];
  const push = (role: "user" | "assistant", content: string) => {
    const last = turns.at(-1);
    if (last?.role === role) last.content += `\n${content}`;
    else turns.push({ role, content });
  };
  let system = "";
  for (const m of r.messages) {
    if (m.role === "system") system = m.content ?? "";
    else if (m.role === "user") push("user", m.content ?? "");
    else if (m.role === "tool") push("user", `<tool_response>\n${m.content ?? ""}\n</tool_response>`);
    else {
      const calls = (m.tool_calls ?? []).map((c) => `<tool_call>\n${JSON.stringify({ name: c.function.name, arguments: JSON.parse(c.function.arguments) as unknown })}\n</tool_call>`);
      push("assistant", withThink(m.reasoning_content, [m.content ?? "", ...calls].filter(Boolean).join("\n")));
    }
  }
  while (turns.at(-1)?.role === "user") turns.pop();
  return { system: r.tools.length ? `${system}\n\n${qwenToolsSection(r.tools)}` : system, turns };
}

export interface AlpacaSample {
  instruction: string;
  input: "";
  output: string;
  system: string;
  history: [string, string][];
  episode_id: string;
}

/**
 * LlamaFactory alpaca with `history`, as the original's sft step 2: one sample per assistant turn,
 * its own output with `<think>` (supervised), earlier turns as history with the think removed
 * (train with `mask_history: true`, so only the last turn is learned).
 */
export function toAlpaca(r: SftRecord): AlpacaSample[] {
  const { system, turns } = flattenQwen(r);
  const samples: AlpacaSample[] = [];
  const history: [string, string][] = [];
  for (let i = 0; i + 1 < turns.length; i += 2) {
    const [u, a] = [turns[i]!, turns[i + 1]!];
    if (u.role !== "user" || a.role !== "assistant") throw new Error(`episode ${r.episode_id}: turns do not alternate at ${i}`);
    samples.push({ instruction: u.content, input: "", output: a.content, system, history: history.map(([x, y]) => [x, y]), episode_id: r.episode_id });
    history.push([u.content, a.content.replace(THINK, "")]);
  }
  return samples;
}

export interface ShareGptRecord {
  conversations: { from: "human" | "gpt" | "function_call" | "observation"; value: string }[];
  system: string;
  /** The function schemas, as LlamaFactory reads them (a JSON string). */
  tools: string;
  episode_id: string;
}

/**
 * LlamaFactory's ShareGPT with tools: `function_call` turns (the call as JSON, a list for parallel
 * calls, reasoning as a leading `<think>` block, which LlamaFactory's function formatter splits
 * off), `observation` turns (one result, or a JSON list of them), `gpt` text turns.
 */
export function toShareGpt(r: SftRecord): ShareGptRecord {
  const conversations: ShareGptRecord["conversations"] = [];
  let system = "";
  const msgs = r.messages;
  for (let i = 0; i < msgs.length; i++) {
    const m = msgs[i]!;
    if (m.role === "system") system = m.content ?? "";
    else if (m.role === "user") conversations.push({ from: "human", value: m.content ?? "" });
    else if (m.role === "tool") {
      const results = [m.content ?? ""];
      while (msgs[i + 1]?.role === "tool") results.push(msgs[++i]!.content ?? "");
      conversations.push({ from: "observation", value: results.length === 1 ? results[0]! : `[${results.join(",")}]` });
    } else if (m.tool_calls?.length) {
      const calls = m.tool_calls.map((c) => ({ name: c.function.name, arguments: JSON.parse(c.function.arguments) as unknown }));
      conversations.push({ from: "function_call", value: withThink(m.reasoning_content, JSON.stringify(calls.length === 1 ? calls[0] : calls)) });
    } else conversations.push({ from: "gpt", value: withThink(m.reasoning_content, m.content ?? "") });
  }
  while (conversations.length && !["gpt", "function_call"].includes(conversations.at(-1)!.from)) conversations.pop();
  const tools = r.tools.map((t) => (t as { function?: unknown }).function ?? t);
  return { conversations, system, tools: JSON.stringify(tools), episode_id: r.episode_id };
}

export type SftFormat = "chat" | "alpaca" | "sharegpt";

export interface SftExport {
  records: object[];
  /** Episodes exported (each gives one record, or one per assistant turn in alpaca). */
  kept: number;
  /** Episodes left out, with why; `kept + dropped.length` is every episode given. */
  dropped: { episode_id: string; why: string }[];
}

/** Reasons left out, counted; numbers in a reason are generalised ("N") so like reasons add up. */
export function droppedByReason(dropped: { why: string }[]): Map<string, number> {
  const reasons = new Map<string, number>();
  for (const d of dropped) {
    const why = d.why.replace(/\d+/g, "N");
    reasons.set(why, (reasons.get(why) ?? 0) + 1);
  }
  return reasons;
}

/** The export's one-line summary: episodes read = exported + left out (counted by reason). */
export function exportSummary(x: SftExport, output: string): string {
  const total = x.kept + x.dropped.length;
  const reasons = [...droppedByReason(x.dropped)].map(([w, n]) => `${w} ×${n}`).join(", ");
  return `${total} episodes read: ${x.kept} exported as ${x.records.length} records → ${output}; ${x.dropped.length} left out${reasons ? ` (${reasons})` : ""}`;
}

/** Filtered episodes in one of the three formats, one JSON object per element (JSONL lines). */
export function exportSft(
  episodes: RecordedEpisode[], format: SftFormat, filter: SftFilter | ((e: RecordedEpisode) => SftFilter), system?: (e: RecordedEpisode) => string,
): SftExport {
  const records: object[] = [];
  const dropped: { episode_id: string; why: string }[] = [];
  let kept = 0;
  for (const e of episodes) {
    const why = filterProblem(e, typeof filter === "function" ? filter(e) : filter);
    if (why) {
      dropped.push({ episode_id: e.start.episode_id, why });
      continue;
    }
    kept++;
    const chat = toChat(e);
    if (system) chat.messages[0] = { role: "system", content: system(e) };
    if (format === "chat") records.push(chat);
    else if (format === "alpaca") records.push(...toAlpaca(chat));
    else records.push(toShareGpt(chat));
  }
  return { records, kept, dropped };
}
