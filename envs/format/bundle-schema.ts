import { z } from "zod";

/** Env ids are `name-vN`, as Gymnasium's: the version changes whenever tools or semantics change. */
export const ENV_ID_RE = /^[a-z][a-z0-9_]*(?:-[a-z0-9_]+)*-v\d+$/;
export const SCENARIO_ID_RE = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;
const IDENT_RE = /^[A-Za-z_$][A-Za-z0-9_$]*$/;

const JsonObject = z.record(z.string(), z.unknown());

export const ToolSchema = z.object({
  type: z.literal("function"),
  function: z.object({
    name: z.string().regex(/^[A-Za-z][A-Za-z0-9_]{0,63}$/, "tool names are identifiers (letters, digits, _) starting with a letter"),
    description: z.string(),
    parameters: z
      .object({ type: z.literal("object"), properties: JsonObject.optional(), required: z.array(z.string()).optional() })
      .passthrough(),
  }),
});
export type ToolSchema = z.infer<typeof ToolSchema>;

export const EnvManifest = z
  .object({
    format: z.literal("envscaler.env/v1"),
    id: z.string().regex(ENV_ID_RE, "env ids look like name-v1 (lowercase, digits, _ and -, ending in -vN)"),
    name: z.string().min(1),
    introduction: z.string().min(1),
    rules: z.array(z.string()).default([]),
    class_name: z.string().regex(IDENT_RE),
    source_file: z.string().default("env.js"),
    tools: z.array(ToolSchema).min(1),
    state_schema: JsonObject.optional(),
    default_state: JsonObject.optional(),
    default_state_file: z.string().optional(),
    terminating_tools: z.array(z.string()).default([]),
    /**
     * The env method that answers a call to a name `tools` does not list (a benchmark whose
     * executor runs any public method of its classes, listed or not: ACEBench). It receives
     * `{name, arguments}`; the agent still sees only `tools`. Without it such a call is refused
     * as `unknown_tool` (docs/env-format.md, "Calls to unlisted names").
     */
    // optional rather than defaulted, so that the content hash of a bundle without it is unchanged
    unlisted_call_method: z.string().regex(IDENT_RE).optional(),
    /**
     * Env methods the bridge calls around every action that makes tool calls, for a benchmark whose
     * executor runs one model message's calls as a batch (ACEBench): `start` gets `{calls: [{name,
     * arguments}]}` before the first call (raising: none of them runs), `end` gets `{}` after the
     * last and may return the calls' texts rendered then (docs/env-format.md, "Actions as batches").
     */
    action_methods: z.object({ start: z.string().regex(IDENT_RE), end: z.string().regex(IDENT_RE) }).strict().optional(),
    /**
     * How a tool's result becomes the text the agent reads. `json`: JSON.stringify of the result.
     * `python`: a string result is the text itself; anything else is exactly Python's json.dumps
     * with default arguments, with dict insertion order and integral floats (46.0) kept from the
     * state file through the tool code (docs/env-format.md, "Observation format").
     */
    // optional rather than defaulted, so that the content hash of a bundle without it is unchanged
    observation_format: z.enum(["json", "python"]).optional(),
    max_steps: z.number().int().positive().default(30),
    clock: z
      .object({ start: z.iso.datetime({ offset: true }).default("2025-01-01T09:00:00Z"), tick_ms: z.number().int().min(0).default(1000) })
      .default({ start: "2025-01-01T09:00:00Z", tick_ms: 1000 }),
    limits: z
      .object({ memory_mb: z.number().int().min(16).max(2048).optional(), call_timeout_ms: z.number().int().min(10).max(60000).optional() })
      .default({}),
  })
  .strict()
  .refine((m) => (m.default_state === undefined) !== (m.default_state_file === undefined), {
    message: "give exactly one of default_state or default_state_file",
  });
export type EnvManifest = z.infer<typeof EnvManifest>;

export const ToolCall = z.object({ name: z.string(), arguments: JsonObject.default({}) }).strict();
export type ToolCall = z.infer<typeof ToolCall>;

export const Check = z.discriminatedUnion("kind", [
  z.object({ kind: z.literal("js"), description: z.string().min(1), source: z.string().min(1) }).strict(),
  z
    .object({
      kind: z.literal("reference_state"),
      description: z.string().default("the final state equals the state the reference actions produce"),
      // true: records the episode created may have other ids than the reference's, as long as a
      // consistent renaming makes the states equal (the same work done in another order); false:
      // exact equality (tau-bench's rule)
      match_new_ids: z.boolean().default(true),
    })
    .strict(),
  z
    .object({
      kind: z.literal("outputs"),
      description: z.string().default("the agent told the user every required output"),
      outputs: z.array(z.string()).min(1),
    })
    .strict(),
]);
export type Check = z.infer<typeof Check>;

/** A check without `kind` is a JS check: the common case stays short to write. */
const CheckInput = z.preprocess((v) => (v && typeof v === "object" && !("kind" in v) ? { kind: "js", ...v } : v), Check);

export const Scenario = z
  .object({
    id: z.string().regex(SCENARIO_ID_RE),
    env_id: z.string().regex(ENV_ID_RE),
    task: z.string().min(1),
    mode: z.enum(["task", "conversation"]).default("task"),
    user_instructions: z.string().optional(),
    initial_state: JsonObject.optional(),
    state_overrides: JsonObject.optional(),
    max_steps: z.number().int().positive().optional(),
    checks: z.array(CheckInput).default([]),
    /** `fraction`: the reward is the share of checks passed (EnvScaler). `all`: 1 only when every check passes, else 0 (tau-bench). */
    reward: z.enum(["fraction", "all"]).default("fraction"),
    reference_actions: z.array(ToolCall).optional(),
    /** What a reference agent says to the user (for `outputs` checks when replaying the reference). */
    reference_messages: z.array(z.string()).optional(),
    /**
     * Multi-turn tasks (BFCL): the user's later messages. A reply without tool calls ends the current
     * turn and the next message arrives; `add_tools` makes held-out manifest tools visible from that
     * turn on (they are hidden before it). The last turn's reply ends the episode.
     */
    user_turns: z.array(z.object({ content: z.string(), add_tools: z.array(z.string()).optional() }).strict()).optional(),
    /** Multi-turn tasks: more tool-calling steps than this within one turn ends the episode (BFCL's force-termination). */
    max_steps_per_turn: z.number().int().positive().optional(),
    /** Multi-turn tasks: an env method (no arguments) the episode calls whenever a user turn ends, before the next message. */
    turn_end_method: z.string().regex(IDENT_RE).optional(),
    /**
     * Task scenarios whose loop goes on after a text reply (ACEBench multi-step): a reply that
     * contains `end_marker` ends the episode; any other text, or an action that cannot be read, is
     * answered with `otherwise` as the user's message and the episode goes on (max_steps still caps it).
     */
    text_reply: z.object({ end_marker: z.string().min(1), otherwise: z.string().min(1) }).strict().optional(),
  })
  .strict()
  .refine((s) => !(s.initial_state && s.state_overrides), { message: "give initial_state or state_overrides, not both" })
  .refine((s) => s.mode !== "conversation" || (s.user_instructions ?? "").length > 0, {
    message: "conversation scenarios need user_instructions for the simulated user",
  });
export type Scenario = z.infer<typeof Scenario>;

export const ScenarioFile = z.array(z.unknown());
