import type { EpisodeStarted } from "./mcp-episode.js";

/**
 * The episode's task as one markdown text, the same in the initialize instructions, the
 * `envscaler://task` resource and the `task` prompt: what the system is, its rules, and the task
 * (in a conversation, the user's first message, with how to answer them).
 */
export function taskText(s: EpisodeStarted, messageTool: string | null): string {
  const parts = [`# About the system\n\n${s.introduction}`];
  if (s.rules.length) parts.push(`# Rules\n\n${s.rules.map((r) => `- ${r}`).join("\n")}`);
  if (s.mode === "conversation") {
    parts.push(`# Conversation\n\nYou are talking with a user. Their first message:\n\n${s.first_message}`);
    if (messageTool) parts.push(`Reply to the user with the \`${messageTool}\` tool; its result is the user's next message. Use the other tools to act on the system.`);
  } else {
    parts.push(`# Task\n\n${s.first_message}`);
    if (messageTool && (s.turns ?? 1) > 1)
      parts.push(`This task has ${s.turns} requests from the user, one at a time. When you are done with a request, say so with the \`${messageTool}\` tool; its result is the user's next request (the tool list may grow with it), or "Task finished" after the last one.`);
  }
  parts.push(`(scenario ${s.scenario_id}, seed ${s.seed}, at most ${s.max_steps} tool calls)`);
  return parts.join("\n\n");
}
