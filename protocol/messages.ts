// The wire messages of docs/protocol.md, as zod schemas. Requests are strict (an unknown field is
// a bad_request); replies are described for clients and tests.
import { z } from "zod";
import { ERROR_CODES } from "./error-codes.js";

export const PROTOCOL_VERSION = 2;

export const RequestId = z.union([z.number().int().min(0).max(Number.MAX_SAFE_INTEGER), z.string().max(128)]);
const sessionId = z.string().min(1).max(200);
/**
 * Anything the episode's action parser accepts; its shape is checked there, and mistakes are
 * observations. `null` included (an `invalid_action` observation like any other unreadable
 * action: the `null_action` feature); only a missing action is a `bad_request`.
 */
const action = z.unknown().refine((a) => a !== undefined, "action is required");

const base = { v: z.number().int(), id: RequestId };
const snapshotId = z.string().min(1).max(200);
/** The most entries a step_batch can ever hold; a replica's own `max_batch` may be lower. */
export const MAX_BATCH_ENTRIES = 65536;

export const HelloRequest = z.strictObject({ ...base, op: z.literal("hello"), client: z.string().max(1000).optional() });
export const ListEnvsRequest = z.strictObject({ ...base, op: z.literal("list_envs") });
export const ListScenariosRequest = z.strictObject({ ...base, op: z.literal("list_scenarios"), env_id: z.string().min(1).max(200).optional() });
export const ResetRequest = z.strictObject({
  ...base,
  op: z.literal("reset"),
  scenario_id: z.string().min(1).max(200),
  seed: z.number().int().min(0).max(2 ** 32 - 1).optional(),
  session_id: sessionId.optional(),
  /**
   * With `session_id`: end and score the session's running episode in this request
   * (`info.previous_episode`); `"later"`: end it now and score it after the reply (its result by
   * `episode_result`; feature `reset_finish_previous_later`).
   */
  finish_previous: z.union([z.boolean(), z.literal("later")]).optional(),
  /**
   * The `env_hash` and `scenario_hash` of a reset reply the client keeps the opening of
   * (`introduction`, `rules`, `tools`): when they are this episode's, the reply leaves those out
   * and says `opening_omitted: true` (feature `reset_known_opening`).
   */
  known_opening: z.strictObject({ env_hash: z.string().min(1).max(128), scenario_hash: z.string().min(1).max(128) }).optional(),
});
export const StepRequest = z.strictObject({ ...base, op: z.literal("step"), session_id: sessionId, action });
export const StepBatchRequest = z.strictObject({
  ...base,
  op: z.literal("step_batch"),
  // the replica's own limit (max_batch, at most its max_sessions) is checked by the bridge: too_large
  steps: z
    .array(z.strictObject({ session_id: sessionId, action }))
    .min(1)
    .max(MAX_BATCH_ENTRIES)
    .refine((s) => new Set(s.map((x) => x.session_id)).size === s.length, "each session may appear once per batch"),
});
export const FinishRequest = z.strictObject({ ...base, op: z.literal("finish"), session_id: sessionId });
/** The result of an episode a reset ended with `finish_previous: "later"` (waits for its scoring). */
export const EpisodeResultRequest = z.strictObject({ ...base, op: z.literal("episode_result"), episode_id: z.string().min(1).max(200) });
export const StateRequest = z.strictObject({ ...base, op: z.literal("state"), session_id: sessionId });
export const CloseRequest = z.strictObject({ ...base, op: z.literal("close"), session_id: sessionId });
export const StatsRequest = z.strictObject({ ...base, op: z.literal("stats") });
export const SnapshotRequest = z.strictObject({ ...base, op: z.literal("snapshot"), session_id: sessionId });
export const ForkRequest = z
  .strictObject({ ...base, op: z.literal("fork"), session_id: sessionId.optional(), snapshot_id: snapshotId.optional() })
  .refine((r) => (r.session_id === undefined) !== (r.snapshot_id === undefined), "give exactly one of session_id and snapshot_id");
export const RestoreRequest = z.strictObject({ ...base, op: z.literal("restore"), session_id: sessionId, snapshot_id: snapshotId });
export const DropSnapshotRequest = z.strictObject({ ...base, op: z.literal("drop_snapshot"), snapshot_id: snapshotId });
/** A snapshot as bytes another replica can import: of a held snapshot, or of a session's episode as it is now. */
export const ExportSnapshotRequest = z
  .strictObject({ ...base, op: z.literal("export_snapshot"), session_id: sessionId.optional(), snapshot_id: snapshotId.optional() })
  .refine((r) => (r.session_id === undefined) !== (r.snapshot_id === undefined), "give exactly one of session_id and snapshot_id");
/** msgpack bin (a Buffer once decoded); its size is bounded by the frame and by `max_snapshot_blob_bytes`, checked by the bridge. */
export const ImportSnapshotRequest = z.strictObject({ ...base, op: z.literal("import_snapshot"), blob: z.instanceof(Uint8Array) });

export const Request = z.discriminatedUnion("op", [
  HelloRequest,
  ListEnvsRequest,
  ListScenariosRequest,
  ResetRequest,
  StepRequest,
  StepBatchRequest,
  FinishRequest,
  EpisodeResultRequest,
  StateRequest,
  CloseRequest,
  StatsRequest,
  SnapshotRequest,
  ForkRequest,
  RestoreRequest,
  DropSnapshotRequest,
  ExportSnapshotRequest,
  ImportSnapshotRequest,
]);
export type Request = z.infer<typeof Request>;
export type Op = Request["op"];
export const OPS = [
  "hello", "list_envs", "list_scenarios", "reset", "step", "step_batch", "finish", "state", "close", "stats", "snapshot", "fork", "restore", "drop_snapshot",
  "export_snapshot", "import_snapshot", "episode_result",
] as const satisfies readonly Op[];

export const ErrorBody = z.object({ code: z.enum(ERROR_CODES), message: z.string() });
export type ErrorBody = z.infer<typeof ErrorBody>;

export const OkReply = z.object({ v: z.literal(PROTOCOL_VERSION), id: RequestId, ok: z.literal(true), result: z.record(z.string(), z.unknown()) });
export const ErrorReply = z.object({ v: z.literal(PROTOCOL_VERSION), id: RequestId.nullable(), ok: z.literal(false), error: ErrorBody });
export const Reply = z.discriminatedUnion("ok", [OkReply, ErrorReply]);
export type Reply = z.infer<typeof Reply>;

const toolResult = z.object({ tool_call_id: z.string(), name: z.string(), content: z.string(), ok: z.boolean() });
const observation = z.object({
  role: z.enum(["tool", "user"]),
  content: z.string(),
  tool_results: z.array(toolResult).optional(),
});
/** On the wire a tool observation leaves out `content` (each output appears once; see step-wire.ts). */
const wireObservation = z.union([observation, z.object({ role: z.literal("tool"), tool_results: z.array(toolResult).min(1) })]);
/** A call as the step reply lists it; its output is in observation.tool_results. */
const callRecord = z.object({ id: z.string(), name: z.string(), arguments: z.record(z.string(), z.unknown()), error: z.string().optional() });

/** A step result as the server sends it (step, finish, step_batch entries). */
export const StepResultSchema = z.object({
  observation: wireObservation,
  reward: z.number(),
  terminated: z.boolean(),
  truncated: z.boolean(),
  info: z.looseObject({ step: z.number().int(), episode_id: z.string(), state_hash: z.string(), diff: z.array(z.unknown()), tool_calls: z.array(callRecord) }),
});

/** A reset's `info.previous_episode` (asked for with `finish_previous`): how the session's earlier episode ended. */
export const PreviousEpisodeSchema = z.looseObject({
  episode_id: z.string(),
  /** true: this reset ended and scored it; false: it had ended before (or could not be scored: `error`). */
  finished: z.boolean(),
  /** With `finish_previous: "later"`: ended, not scored yet (no reward here; `episode_result` gives it). */
  pending: z.literal(true).optional(),
  state_hash: z.string().optional(),
  reward: z.number().optional(),
  terminated: z.boolean().optional(),
  truncated: z.boolean().optional(),
  step: z.number().int().optional(),
  end_reason: z.string().optional(),
  error: ErrorBody.optional(),
});

export const ResetResultSchema = z.object({
  session_id: z.string(),
  observation,
  info: z
    .looseObject({
      episode_id: z.string(),
      env_id: z.string(),
      scenario_id: z.string(),
      seed: z.number().int(),
      tools: z.array(z.unknown()).optional(),
      /** The request's `known_opening` named this episode's: introduction, rules and tools are left out. */
      opening_omitted: z.literal(true).optional(),
      previous_episode: PreviousEpisodeSchema.optional(),
    })
    .refine((i) => (i.tools !== undefined) !== (i.opening_omitted === true), { message: "info has tools unless opening_omitted is true, and not both" }),
});

export const ForkResultSchema = z.object({
  session_id: z.string(),
  info: z.looseObject({
    episode_id: z.string(),
    env_id: z.string(),
    scenario_id: z.string(),
    seed: z.number().int(),
    step: z.number().int(),
    state_hash: z.string(),
    forked_from: z.object({ session_id: z.string().optional(), snapshot_id: z.string().optional(), step: z.number().int() }),
  }),
});

/** Result schemas by op, for clients and the golden-vector tests. */
export const RESULT_SCHEMAS = {
  hello: z.object({
    protocol_version: z.number().int(),
    server: z.string(),
    server_version: z.string(),
    replica: z.number().int(),
    instance: z.string(),
    limits: z.looseObject({ max_frame_bytes: z.number(), max_sessions: z.number(), max_in_flight: z.number(), idle_timeout_s: z.number(), max_depth: z.number() }),
    ops: z.array(z.string()),
    features: z.array(z.string()).optional(),
  }),
  list_envs: z.object({ envs: z.array(z.object({ env_id: z.string(), name: z.string(), introduction: z.string(), rules: z.array(z.string()), tools: z.array(z.unknown()), scenario_count: z.number().int() })) }),
  list_scenarios: z.object({ scenarios: z.array(z.object({ scenario_id: z.string(), env_id: z.string(), mode: z.enum(["task", "conversation"]), task: z.string(), max_steps: z.number().int(), check_count: z.number().int() })) }),
  reset: ResetResultSchema,
  step: StepResultSchema,
  step_batch: z.object({ results: z.array(z.union([z.object({ ok: z.literal(true), result: StepResultSchema }), z.object({ ok: z.literal(false), error: ErrorBody })])) }),
  finish: StepResultSchema,
  episode_result: PreviousEpisodeSchema.extend({ finished: z.literal(true), reward: z.number(), terminated: z.boolean(), truncated: z.boolean(), step: z.number().int(), state_hash: z.string() }),
  state: z.object({ state_json: z.string(), state_hash: z.string() }),
  close: z.object({ closed: z.literal(true) }),
  stats: z.looseObject({
    replica: z.number().int(), instance: z.string(), uptime_s: z.number(), sessions: z.number().int(), requests: z.number().int(), errors: z.number().int(),
    in_flight: z.number().int(), hard_stops: z.number().int(), restored: z.number().int(), lost: z.number().int(), replayed_steps: z.number().int(), workers: z.array(z.number().int()),
    snapshots: z.number().int(), snapshot_bytes: z.number().int(), quarantined: z.array(z.string()),
  }),
  snapshot: z.object({ snapshot_id: z.string(), step: z.number().int(), bytes: z.number().int(), state_hash: z.string() }),
  fork: ForkResultSchema,
  restore: ForkResultSchema.omit({ session_id: true }),
  drop_snapshot: z.object({ dropped: z.boolean() }),
  export_snapshot: z.object({ blob: z.instanceof(Uint8Array), bytes: z.number().int(), scenario_id: z.string(), step: z.number().int(), state_hash: z.string() }),
  import_snapshot: z.object({ snapshot_id: z.string(), scenario_id: z.string(), step: z.number().int(), bytes: z.number().int(), state_hash: z.string() }),
} satisfies Record<Op, z.ZodType>;
