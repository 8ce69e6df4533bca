// Regenerates protocol/vectors/*.json (golden vectors). Run: npx tsx scripts/gen-vectors.ts
// Only when the protocol changes on purpose: both test suites compare against these files.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { encodeFrame } from "../protocol/codec.js";
import { PROTOCOL_VERSION as V } from "../protocol/messages.js";
import { compactStep } from "../protocol/step-wire.js";

const dir = join(import.meta.dirname, "..", "protocol", "vectors");
const hex = (v: unknown) => encodeFrame(v).toString("hex");

/** A step as the bridge has it; on the wire it is compactStep(step), and clients expand it back. */
const step = {
  observation: { role: "tool", content: '{"ok":true,"note_id":"n3"}', tool_results: [{ tool_call_id: "call_0", name: "add_note", content: '{"ok":true,"note_id":"n3"}', ok: true }] },
  reward: 0,
  terminated: false,
  truncated: false,
  info: { step: 1, episode_id: "e-1", tool_calls: [{ id: "call_0", name: "add_note", arguments: { text: "buy milk" } }], diff: [{ op: "add", path: "/notes/n3", value: { id: "n3", text: "buy milk" } }], state_hash: "ab".repeat(32) },
};
const twoCalls = {
  ...step,
  observation: {
    role: "tool",
    content: '[{"ok":true,"note_id":"n3"},{"error":{"type":"unknown_tool","message":"unknown tool \'rm\'"}}]',
    tool_results: [
      { tool_call_id: "call_0", name: "add_note", content: '{"ok":true,"note_id":"n3"}', ok: true },
      { tool_call_id: "call_1", name: "rm", content: '{"error":{"type":"unknown_tool","message":"unknown tool \'rm\'"}}', ok: false },
    ],
  },
  info: { ...step.info, tool_calls: [...step.info.tool_calls, { id: "call_1", name: "rm", arguments: {}, error: "unknown tool 'rm'" }] },
};

/** Stands for a blob in the vectors (a real one is ~100 KB): bytes as msgpack bin, 0x00 and 0xff included. */
const BLOB = Buffer.from("4553534e4150010000000a00ff", "hex");
/** Bytes have no JSON form: the vector files write them as {"$bytes": "<hex>"}, which both suites read back as bytes. */
const asJson = (_k: string, v: unknown) => (v && typeof v === "object" && (v as { type?: string }).type === "Buffer" ? { $bytes: Buffer.from((v as { data: number[] }).data).toString("hex") } : v);

const messages: { name: string; kind: "request" | "reply"; op: string; value: unknown; expanded?: unknown }[] = [
  { name: "hello", kind: "request", op: "hello", value: { v: V, id: 1, op: "hello", client: "pytest" } },
  { name: "list_scenarios filtered", kind: "request", op: "list_scenarios", value: { v: V, id: 2, op: "list_scenarios", env_id: "notes-v1" } },
  { name: "reset new session", kind: "request", op: "reset", value: { v: V, id: 3, op: "reset", scenario_id: "notes-1", seed: 4294967295 } },
  { name: "reset in place, finishing the running episode", kind: "request", op: "reset", value: { v: V, id: 30, op: "reset", scenario_id: "notes-2", session_id: "s-a", finish_previous: true } },
  {
    name: "reset result with the previous episode's end",
    kind: "reply",
    op: "reset",
    value: {
      v: V, id: 30, ok: true,
      result: {
        session_id: "s-a",
        observation: { role: "user", content: "Hi, I'm u3." },
        info: {
          episode_id: "e-5", env_id: "notes-v1", scenario_id: "notes-2", mode: "conversation", seed: 11, introduction: "Notes.", rules: [], tools: [], max_steps: 30, state_hash: "ab".repeat(32), env_hash: "01".repeat(32), scenario_hash: "02".repeat(32),
          previous_episode: { episode_id: "e-4", finished: true, reward: 0.5, terminated: true, truncated: false, step: 2, state_hash: "cd".repeat(32), end_reason: "client", reward_info: { checks: [], passed: 1, total: 2, no_checks: false, mode: "fraction" } },
        },
      },
    },
  },
  { name: "reset in place, ending the running episode and scoring it after the reply", kind: "request", op: "reset", value: { v: V, id: 34, op: "reset", scenario_id: "notes-1", session_id: "s-a", finish_previous: "later" } },
  {
    name: "reset result with the previous episode ended, its score pending",
    kind: "reply",
    op: "reset",
    value: {
      v: V, id: 34, ok: true,
      result: {
        session_id: "s-a",
        observation: { role: "user", content: "Add a note." },
        info: {
          episode_id: "e-6", env_id: "notes-v1", scenario_id: "notes-1", mode: "task", seed: 12, introduction: "Notes.", rules: [], tools: [], max_steps: 30, state_hash: "ab".repeat(32), env_hash: "01".repeat(32), scenario_hash: "02".repeat(32),
          previous_episode: { episode_id: "e-5", finished: true, pending: true, step: 3, state_hash: "ef".repeat(32) },
        },
      },
    },
  },
  {
    name: "reset naming the opening the client keeps",
    kind: "request",
    op: "reset",
    value: { v: V, id: 36, op: "reset", scenario_id: "notes-1", session_id: "s-a", finish_previous: "later", known_opening: { env_hash: "01".repeat(32), scenario_hash: "02".repeat(32) } },
  },
  {
    name: "reset result with the opening left out",
    kind: "reply",
    op: "reset",
    value: {
      v: V, id: 36, ok: true,
      result: {
        session_id: "s-a",
        observation: { role: "user", content: "Add a note." },
        info: {
          episode_id: "e-7", env_id: "notes-v1", scenario_id: "notes-1", mode: "task", seed: 13, max_steps: 30, state_hash: "ab".repeat(32), env_hash: "01".repeat(32), scenario_hash: "02".repeat(32), opening_omitted: true,
          previous_episode: { episode_id: "e-6", finished: true, pending: true, step: 0, state_hash: "ab".repeat(32) },
        },
      },
    },
  },
  { name: "episode_result", kind: "request", op: "episode_result", value: { v: V, id: 35, op: "episode_result", episode_id: "e-5" } },
  {
    name: "episode_result result",
    kind: "reply",
    op: "episode_result",
    value: { v: V, id: 35, ok: true, result: { episode_id: "e-5", finished: true, reward: 1, terminated: true, truncated: false, step: 3, state_hash: "ef".repeat(32), end_reason: "client", reward_info: { checks: [], passed: 2, total: 2, no_checks: false, mode: "fraction" } } },
  },
  { name: "step with a null action", kind: "request", op: "step", value: { v: V, id: 31, op: "step", session_id: "s-a", action: null } },
  { name: "step with a name/arguments action", kind: "request", op: "step", value: { v: V, id: "req-4", op: "step", session_id: "s-0-0a1b2c3d-00", action: { name: "add_note", arguments: { text: "buy milk", pinned: false, tags: ["home", "ünïcödé ✓"], priority: -3, weight: 0.25 } } } },
  { name: "step with raw assistant text", kind: "request", op: "step", value: { v: V, id: 5, op: "step", session_id: "s-0-0a1b2c3d-00", action: '<think>plan</think><tool_call>{"name": "list_notes", "arguments": {}}</tool_call>' } },
  { name: "step_batch", kind: "request", op: "step_batch", value: { v: V, id: 6, op: "step_batch", steps: [{ session_id: "s-a", action: { id: "c1", type: "function", function: { name: "list_notes", arguments: "{}" } } }, { session_id: "s-b", action: "All done." }] } },
  { name: "close", kind: "request", op: "close", value: { v: V, id: 7, op: "close", session_id: "s-a" } },
  { name: "snapshot", kind: "request", op: "snapshot", value: { v: V, id: 20, op: "snapshot", session_id: "s-a" } },
  { name: "fork a session", kind: "request", op: "fork", value: { v: V, id: 21, op: "fork", session_id: "s-a" } },
  { name: "fork a snapshot", kind: "request", op: "fork", value: { v: V, id: 22, op: "fork", snapshot_id: "snap-1" } },
  { name: "restore", kind: "request", op: "restore", value: { v: V, id: 23, op: "restore", session_id: "s-a", snapshot_id: "snap-1" } },
  { name: "drop_snapshot", kind: "request", op: "drop_snapshot", value: { v: V, id: 24, op: "drop_snapshot", snapshot_id: "snap-1" } },
  { name: "export a session's episode", kind: "request", op: "export_snapshot", value: { v: V, id: 26, op: "export_snapshot", session_id: "s-a" } },
  { name: "export a snapshot", kind: "request", op: "export_snapshot", value: { v: V, id: 27, op: "export_snapshot", snapshot_id: "snap-1" } },
  { name: "import_snapshot", kind: "request", op: "import_snapshot", value: { v: V, id: 28, op: "import_snapshot", blob: BLOB } },
  { name: "export_snapshot result", kind: "reply", op: "export_snapshot", value: { v: V, id: 27, ok: true, result: { blob: BLOB, bytes: BLOB.length, scenario_id: "notes-1", step: 3, state_hash: "cd".repeat(32) } } },
  { name: "import_snapshot result", kind: "reply", op: "import_snapshot", value: { v: V, id: 28, ok: true, result: { snapshot_id: "snap-2", scenario_id: "notes-1", step: 3, bytes: 458752, state_hash: "cd".repeat(32) } } },
  { name: "snapshot_incompatible error", kind: "reply", op: "import_snapshot", value: { v: V, id: 29, ok: false, error: { code: "snapshot_incompatible", message: "blob: env notes-v1 here is another bundle (hash 0123456789ab, the blob's ba9876543210)" } } },
  { name: "snapshot result", kind: "reply", op: "snapshot", value: { v: V, id: 20, ok: true, result: { snapshot_id: "snap-1", step: 3, bytes: 458752, state_hash: "cd".repeat(32) } } },
  { name: "fork result", kind: "reply", op: "fork", value: { v: V, id: 21, ok: true, result: { session_id: "s-0-0a1b2c3d-01", info: { episode_id: "e-2", env_id: "notes-v1", scenario_id: "notes-1", mode: "task", seed: 7, step: 3, state_hash: "cd".repeat(32), tools: [], forked_from: { session_id: "s-a", step: 3 } } } } },
  { name: "restore result", kind: "reply", op: "restore", value: { v: V, id: 23, ok: true, result: { info: { episode_id: "e-3", env_id: "notes-v1", scenario_id: "notes-1", mode: "task", seed: 7, step: 3, state_hash: "cd".repeat(32), tools: [], forked_from: { snapshot_id: "snap-1", step: 3 } } } } },
  { name: "drop_snapshot result", kind: "reply", op: "drop_snapshot", value: { v: V, id: 24, ok: true, result: { dropped: true } } },
  { name: "too_large error", kind: "reply", op: "snapshot", value: { v: V, id: 25, ok: false, error: { code: "too_large", message: "the episode holds its limit of 32 snapshots (maxSnapshotsPerEpisode); drop some" } } },
  { name: "step result", kind: "reply", op: "step", value: { v: V, id: "req-4", ok: true, result: compactStep(step) }, expanded: step },
  { name: "step result with two calls", kind: "reply", op: "step", value: { v: V, id: 7, ok: true, result: compactStep(twoCalls) }, expanded: twoCalls },
  {
    name: "step_batch result",
    kind: "reply",
    op: "step_batch",
    value: { v: V, id: 6, ok: true, result: { results: [{ ok: true, result: compactStep(step) }, { ok: false, error: { code: "unknown_session", message: "no session s-b" } }] } },
    expanded: { results: [{ ok: true, result: step }, { ok: false, error: { code: "unknown_session", message: "no session s-b" } }] },
  },
  { name: "terminal step with reward", kind: "reply", op: "step", value: { v: V, id: 8, ok: true, result: { ...compactStep(step), reward: 0.6667, terminated: true, info: { ...step.info, end_reason: "text_reply", reward_info: { checks: [{ index: 0, kind: "js", description: "note added", passed: true }, { index: 1, kind: "js", description: "throws", passed: false, error: "TypeError: x is undefined" }], passed: 1, total: 2, no_checks: false } } } } },
  { name: "state", kind: "reply", op: "state", value: { v: V, id: 9, ok: true, result: { state_json: '{"notes":{"n1":{"big":9007199254740991}}}', state_hash: "00".repeat(32) } } },
  { name: "error reply", kind: "reply", op: "step", value: { v: V, id: 10, ok: false, error: { code: "session_lost", message: "session s-1-aa-00 was lost: replica 1 restarted" } } },
  { name: "error reply without id", kind: "reply", op: "step", value: { v: V, id: null, ok: false, error: { code: "bad_request", message: "not msgpack" } } },
];
writeFileSync(join(dir, "messages.json"), JSON.stringify(messages.map((m) => ({ ...m, msgpack_hex: hex(m.value) })), asJson, 1) + "\n");

// Frames a hostile or broken client may send, and the error each must get (the bridge survives all).
const nested = (depth: number) => Buffer.concat([Buffer.alloc(depth, 0x91), Buffer.from([0xc0])]).toString("hex");
const bad = [
  { name: "not msgpack (reserved byte)", hex: "c1", code: "bad_request" },
  { name: "truncated map", hex: "82a1760181", code: "bad_request" },
  { name: "extension type", hex: "d40100", code: "bad_request" },
  { name: "timestamp extension inside a request", hex: hex({ v: V, id: 1, op: "hello" }).replace(/^83/, "84") + "a174d6ff00000000", code: "bad_request" },
  { name: "array32 declaring 4 billion entries", hex: "dd ffffffff 00".replace(/ /g, ""), code: "bad_request" },
  { name: "map32 declaring 4 billion entries", hex: "df ffffffff".replace(/ /g, ""), code: "bad_request" },
  { name: "str32 declaring 4 GB", hex: "db ffffffff 61".replace(/ /g, ""), code: "bad_request" },
  { name: "nesting 5000 deep", hex: nested(5000), code: "bad_request" },
  { name: "a string that is not UTF-8", hex: hex({ v: V, id: 21, op: "hello", client: "AB" }).replace("a24142", "a2eda0"), code: "bad_request" },
  { name: "integer map key", hex: "81 01 02".replace(/ /g, ""), code: "bad_request" },
  { name: "trailing bytes", hex: hex({ v: V, id: 1, op: "hello" }) + "c0", code: "bad_request" },
  { name: "a request that is not a map", hex: hex([1, 2, 3]), code: "bad_request" },
  { name: "missing op", hex: hex({ v: V, id: 11 }), code: "unknown_op" },
  { name: "unknown op", hex: hex({ v: V, id: 12, op: "rm_rf" }), code: "unknown_op" },
  { name: "an older version (1)", hex: hex({ v: 1, id: 13, op: "hello" }), code: "unsupported_version" },
  { name: "a newer version", hex: hex({ v: V + 1, id: 13, op: "hello" }), code: "unsupported_version" },
  { name: "wrong field type", hex: hex({ v: V, id: 14, op: "reset", scenario_id: 42 }), code: "bad_request" },
  { name: "unknown field", hex: hex({ v: V, id: 15, op: "hello", colour: "red" }), code: "bad_request" },
  { name: "id that is a map", hex: hex({ v: V, id: { a: 1 }, op: "hello" }), code: "bad_request" },
  { name: "__proto__ key", hex: hex({ v: V, id: 16, op: "hello" }).replace(/^83/, "84") + "a95f5f70726f746f5f5f81a16101", code: "bad_request" },
  { name: "seed out of range", hex: hex({ v: V, id: 17, op: "reset", scenario_id: "notes-1", seed: -1 }), code: "bad_request" },
  { name: "finish_previous that is not a boolean", hex: hex({ v: V, id: 32, op: "reset", scenario_id: "notes-1", session_id: "s-a", finish_previous: 1 }), code: "bad_request" },
  { name: "finish_previous that is neither a boolean nor \"later\"", hex: hex({ v: V, id: 36, op: "reset", scenario_id: "notes-1", session_id: "s-a", finish_previous: "soon" }), code: "bad_request" },
  { name: "episode_result without an episode id", hex: hex({ v: V, id: 37, op: "episode_result" }), code: "bad_request" },
  { name: "step without an action", hex: hex({ v: V, id: 33, op: "step", session_id: "s-a" }), code: "bad_request" },
  { name: "fork naming both a session and a snapshot", hex: hex({ v: V, id: 19, op: "fork", session_id: "s", snapshot_id: "snap-1" }), code: "bad_request" },
  { name: "fork naming neither", hex: hex({ v: V, id: 20, op: "fork" }), code: "bad_request" },
  { name: "export_snapshot naming both a session and a snapshot", hex: hex({ v: V, id: 30, op: "export_snapshot", session_id: "s", snapshot_id: "snap-1" }), code: "bad_request" },
  { name: "import_snapshot with a blob that is a string", hex: hex({ v: V, id: 31, op: "import_snapshot", blob: "ESSNAP" }), code: "bad_request" },
  { name: "step_batch naming a session twice", hex: hex({ v: V, id: 18, op: "step_batch", steps: [{ session_id: "s", action: "x" }, { session_id: "s", action: "y" }] }), code: "bad_request" },
];
writeFileSync(join(dir, "bad-frames.json"), JSON.stringify(bad, null, 1) + "\n");
console.log(`${messages.length} messages, ${bad.length} bad frames`);
