// The prompts of every synth stage, in one place so they can be read and tuned together. Each
// names its stage in the first line ("[envscaler synth: <stage>]"): logs and test fixtures route on it.
import type { Message } from "./llm/llm-client.js";
import { collectionsOf } from "./stages/repair-hints.js";

const head = (stage: string) => `[envscaler synth: ${stage}]`;

/** The mine prompt's examples of an environment. Small models copy them into their descriptions (see withoutCopiedExamples). */
export const MINE_EXAMPLES = "a clinic's appointments, a library's loans, an inventory";
/** What the mine stage calls an environment. */
export const MINE_DEFINITION = `a domain system with persistent records (entities with attributes) that tools read and change, e.g. ${MINE_EXAMPLES}`;

export function minePrompt(task: string): Message[] {
  return [
    {
      role: "system",
      content: `${head("mine")}
You decide whether a user task needs a *stateful, tool-interactive environment*: ${MINE_DEFINITION}. Pure lookups of external facts, chit-chat, maths or one-shot API calls do not.
Reply with JSON only, with the fields in this order: {"needs_env": boolean, "topic": string (2-5 words, the domain), "description": string (2-3 sentences: the system this task needs, its main entities, what users do with it; not the examples above), "reason": string (one sentence: why it does or does not need such a system)}. Keep every string short and do not repeat yourself.`,
    },
    { role: "user", content: `Task: ${task}` },
  ];
}

export function planPrompt(topic: string, description: string): Message[] {
  return [
    {
      role: "system",
      content: `${head("plan")}
You design a simulated environment for training tool-using agents. Plan its state and its tools.
Reply with JSON only:
{"env_name": "snake_case_name", "title": string, "introduction": string, "rules": [string, ...],
 "state_schema": <JSON Schema of the whole state, type object>,
 "initial_state": <a realistic initial state: every top-level key that holds records is an object keyed by record id (never an array), and each record also carries its id and every other field its schema marks required>,
 "tools": [{"name": "snake_case", "description": string, "kind": "query" | "change", "parameters": <JSON Schema, type object, with properties and required>}, ...]}
Give 6 to 20 tools mixing queries and state changes, rules the tools enforce, and an initial state with 2 to 4 short records per collection.`,
    },
    { role: "user", content: `Topic: ${topic}\nDescription: ${description}` },
  ];
}

/** The commonest mistake of small models in the code stage (docs/local-model.md), said up front: collections are objects, not arrays. */
function collectionLine(initialState: unknown): string {
  const names = collectionsOf(initialState !== null && typeof initialState === "object" ? (initialState as Record<string, unknown>) : {});
  if (names.length === 0) return "";
  const [first] = names;
  return `\n- ${names.map((n) => `this.${n}`).join(", ")} ${names.length > 1 ? "are objects" : "is an object"} keyed by record id, NOT arrays: look a record up with this.${first}[id], iterate with Object.values(this.${first}) or Object.entries(this.${first}); a new record is this.${first}[newId] = {...}.`;
}

export function codePrompt(plan: { title: string; rules: string[]; tools: unknown[]; initial_state: unknown }, className: string): Message[] {
  return [
    {
      role: "system",
      content: `${head("code")}
Write the environment as one JavaScript class named ${className}, in a single \`\`\`js block and nothing else.
- constructor(state): keep each top-level key of state as a field of the same name (this.books = state.books). The instance's fields ARE the state.${collectionLine(plan.initial_state)}
- One method per tool, with the tool's name, taking ONE object of named arguments: get_book({ book_id }).
- Return plain JSON: {success: true, data} or {success: false, error: "..."}; do not throw for expected failures (unknown ids, broken rules).
- Enforce the rules. Mutate records in place. No imports, no require, no timers, no I/O. Date and Math.random may be used (they are virtual and seeded).`,
    },
    { role: "user", content: `Environment: ${plan.title}\nRules:\n${plan.rules.map((r) => `- ${r}`).join("\n")}\nTools:\n${JSON.stringify(plan.tools, null, 1)}\nExample state:\n${JSON.stringify(plan.initial_state).slice(0, 4000)}` },
  ];
}

/**
 * The fallback when a whole class does not come out right (small models lose the thread over a
 * thousand tokens): one tool's method at a time, as the original's step4 writes them, with the
 * same contract as codePrompt. The constructor is ours (the state's keys become fields).
 */
export function methodPrompt(plan: { title: string; rules: string[]; tools: { name: string }[]; initial_state: Record<string, unknown> }, className: string, tool: { name: string }): Message[] {
  const others = plan.tools.map((t) => t.name).filter((n) => n !== tool.name);
  return [
    {
      role: "system",
      content: `${head("method")}
Write ONE method of the JavaScript class ${className}: the tool ${tool.name}. Reply with that method only, in a single \`\`\`js block: ${tool.name}({ ...named arguments }) { ... } with no class around it and no other method.
- The state is in fields of the instance, one per top-level key: ${Object.keys(plan.initial_state).map((k) => `this.${k}`).join(", ")}.${collectionLine(plan.initial_state)}
- It takes ONE object of named arguments and returns plain JSON: {success: true, data} or {success: false, error: "..."}; it does not throw for expected failures (unknown ids, broken rules).
- Enforce the rules. Mutate records in place. No imports, no require, no timers, no I/O. Date and Math.random may be used.
- The class's other methods, which it may call as this.name({...}): ${others.join(", ") || "none"}.`,
    },
    { role: "user", content: `Environment: ${plan.title}\nRules:\n${plan.rules.map((r) => `- ${r}`).join("\n")}\nThe tool:\n${JSON.stringify(tool, null, 1)}\nExample state:\n${JSON.stringify(plan.initial_state).slice(0, 3000)}` },
  ];
}

/**
 * Scaffolded code mode (synth/stages/scaffold.ts): the class is ours, the model writes one tool's
 * body at a time. It sees the skeleton (helpers whole, this tool's argument checks, a marker where
 * its code goes), the helpers it may call, the state schema, the rules and the tool.
 */
export function bodyPrompt(
  plan: { title: string; rules: string[]; state_schema: unknown; initial_state: Record<string, unknown> },
  className: string,
  tool: { name: string; description: string; kind: string; parameters: unknown },
  scaffold: { skeleton: string; helpers: readonly string[]; marker: string },
): Message[] {
  return [
    {
      role: "system",
      content: `${head("body")}
The JavaScript class ${className} below is written except for the logic of its tools. Write the BODY of the tool ${tool.name}: the statements that replace ${scaffold.marker}. Reply with those statements only, in a single \`\`\`js block: no method header, no class, no other method.
- The arguments are already local constants, checked against the tool's schema: ${Object.keys((tool.parameters as { properties?: object }).properties ?? {}).join(", ") || "(none)"} (each also args.<name>).
- The state is in fields of the instance: ${Object.keys(plan.initial_state).map((k) => `this.${k}`).join(", ")}.${collectionLine(plan.initial_state)}
- Helpers to use:\n${scaffold.helpers.map((h) => `  - ${h}`).join("\n")}
- Return this._ok(data) on success and this._fail("why") for expected failures (unknown ids, broken rules); do not throw.
- Enforce the rules that concern this tool. Change records in place (record.status = "cancelled"). No imports, no require, no timers, no I/O. Date and Math.random may be used.`,
    },
    {
      role: "user",
      content: `Environment: ${plan.title}\nRules:\n${plan.rules.map((r) => `- ${r}`).join("\n")}\nThe tool (${tool.kind}):\n${JSON.stringify({ name: tool.name, description: tool.description, parameters: tool.parameters })}\nState schema:\n${JSON.stringify(plan.state_schema).slice(0, 2500)}\nExample state:\n${JSON.stringify(plan.initial_state).slice(0, 2500)}\nThe class:\n\`\`\`js\n${scaffold.skeleton}\n\`\`\``,
    },
  ];
}

export function testerPrompt(args: { introduction: string; tools: unknown[]; state: string; stats: string; leastTested: string[]; round: number }): Message[] {
  return [
    {
      role: "system",
      content: `${head("test")}
You test a tool-based environment. Pick ONE tool call that exercises it: balance coverage over tools, and mix positive cases (valid calls that should succeed) with negative ones (calls that should be refused: unknown ids, rule violations, bad values).
Reply with JSON only: {"tool": string, "arguments": object, "case_type": "positive" | "negative", "expectation": string}.`,
    },
    { role: "user", content: `Round ${args.round}.\nEnvironment: ${args.introduction}\nTools:\n${JSON.stringify(args.tools)}\nCalls so far per tool:\n${args.stats}\nLeast tested so far (prefer one of these): ${args.leastTested.join(", ")}\nCurrent state:\n${args.state.slice(0, 6000)}` },
  ];
}

/**
 * The judge sees the call, the code, the state it ran on and what it did, and not the tester's
 * label and expectation: the 1.5B tester labels calls "positive" that the state makes wrong (a
 * time that is not free, an id that does not exist), and the 1.5B judge followed the label and
 * failed the env's correct refusal (5 of 7 failed rounds of run 14, docs/local-model.md).
 */
export function judgePrompt(args: { rules: string[]; source: string; stateBefore: string; tool: string; argumentsJson: string; result: string; diff: string }): Message[] {
  return [
    {
      role: "system",
      content: `${head("judge")}
You review one tool call of an environment's code (white box). First write in "reason" what the state before the call and the rules say about this call. Then "allowed": false when they make it invalid (an id that does not exist, a rule it breaks), true otherwise. Then judge whether the method behaved correctly: the return value and the state change are right for these arguments and the state before the call, and the rules are enforced. A refusal of a call that is not allowed is correct.
Reply with JSON only: {"reason": string, "allowed": boolean, "result": "pass" | "warning" | "fail"}. warning: works but with a robustness or validation gap. fail: wrong logic or state, an unhandled exception, or a rule violation.`,
    },
    {
      role: "user",
      content: `Rules:\n${args.rules.map((r) => `- ${r}`).join("\n")}\nClass source:\n${args.source.slice(0, 12000)}\nState before the call:\n${args.stateBefore.slice(0, 4000)}\nCall: ${args.tool}(${args.argumentsJson})\nReturned: ${args.result.slice(0, 3000)}\nState changes (JSON Patch): ${args.diff.slice(0, 3000)}`,
    },
  ];
}

export function scenarioPrompt(args: { introduction: string; rules: string[]; tools: unknown[]; state: string; mode: "task" | "conversation"; taken: string[]; examples: string[] }): Message[] {
  return [
    {
      role: "system",
      content: `${head("scenario")}
You write one ${args.mode} scenario for training agents in the environment below: a challenging task that is solvable from the state, a checklist, and a check per item.
Reply with JSON only:
{"task": string, ${args.mode === "conversation" ? `"user_instructions": string (who the simulated user is, what they want, what they know; they reveal details gradually), ` : ""}"state_overrides": object (record-level changes to the default state, {"collection": {"id": {...record} | null}}, may be {}),
 "checklist": [{"description": string, "source": string (the check: an arrow function returning a boolean, written like the examples below)}, ...],
 "reference_actions": [{"name": tool name, "arguments": object}, ...] (a correct solution, in order)}
Checks compare the final state with the initial one, are deterministic, and must NOT already pass on the initial state as a whole.
A check is called with ONE object {initial, final, actions, messages}: initial and final are states shaped like the default state below (each collection an object keyed by record id, not an array). Checks for this environment look like:
${args.examples.map((e) => `  ${e}`).join("\n")}`,
    },
    {
      role: "user",
      content: `Environment: ${args.introduction}\nRules:\n${args.rules.map((r) => `- ${r}`).join("\n")}\nTools:\n${JSON.stringify(args.tools)}\nDefault state:\n${args.state.slice(0, 8000)}${args.taken.length ? `\nTasks already written (write a different one):\n${args.taken.map((t) => `- ${t}`).join("\n")}` : ""}`,
    },
  ];
}

export function derivedTaskPrompt(args: { introduction: string; call: string; result: string; diff: string; taken: string[] }): Message[] {
  return [
    {
      role: "system",
      content: `${head("scenario")}
You write the task text of one training scenario: what a user asks an agent to do in the environment below. The solution is already known: the one tool call shown, which makes the state change shown. Write the request a user would make so that an agent must make exactly this call: state every value the call needs (ids, names, dates, amounts), in plain words, without naming the tool.
Reply with JSON only: {"task": string}`,
    },
    {
      role: "user",
      content: `Environment: ${args.introduction}\nThe call: ${args.call}\nIt returned: ${args.result.slice(0, 1500)}\nState change (JSON Patch): ${args.diff.slice(0, 2000)}${args.taken.length ? `\nTasks already written (write a different one):\n${args.taken.map((t) => `- ${t}`).join("\n")}` : ""}`,
    },
  ];
}
