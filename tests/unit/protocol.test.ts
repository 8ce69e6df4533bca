import { readFileSync } from "node:fs";
import { join } from "node:path";
import { expect, test } from "vitest";
import { decodeFrame, encodeFrame, scanFrame } from "../../protocol/codec.js";
import { ERROR_CODES } from "../../protocol/error-codes.js";
import { ErrorReply, OkReply, OPS, PROTOCOL_VERSION, Request, RESULT_SCHEMAS } from "../../protocol/messages.js";
import { compactStep, expandStep } from "../../protocol/step-wire.js";

const VECTORS = join(import.meta.dirname, "..", "..", "protocol", "vectors");
/** The vector files write bytes (msgpack bin) as {"$bytes": "<hex>"}: read back as a Buffer, which is what the decoder gives. */
const bytesOf = (_k: string, v: unknown) => (v && typeof v === "object" && typeof (v as { $bytes?: unknown }).$bytes === "string" ? Buffer.from((v as { $bytes: string }).$bytes, "hex") : v);
const messages = JSON.parse(readFileSync(join(VECTORS, "messages.json"), "utf8"), bytesOf) as { name: string; kind: string; op: keyof typeof RESULT_SCHEMAS; value: any; msgpack_hex: string; expanded?: any }[];
const badFrames = JSON.parse(readFileSync(join(VECTORS, "bad-frames.json"), "utf8")) as { name: string; hex: string; code: string }[];

test.each(messages.map((m) => [m.name, m] as const))("golden vector %s: bytes ⇄ value, and it fits the schema", (_, m) => {
  const bytes = Buffer.from(m.msgpack_hex, "hex");
  expect(decodeFrame(bytes)).toEqual(m.value);
  expect(encodeFrame(m.value).toString("hex")).toBe(m.msgpack_hex);
  if (m.kind === "request") expect(Request.parse(m.value)).toBeTruthy();
  else if (m.value.ok) {
    OkReply.parse(m.value);
    RESULT_SCHEMAS[m.op].parse(m.value.result);
  } else ErrorReply.parse(m.value);
});

test.each(messages.filter((m) => m.expanded).map((m) => [m.name, m] as const))("golden vector %s: each tool output crosses once, and the client puts the observation text back", (_, m) => {
  const wire = decodeFrame(Buffer.from(m.msgpack_hex, "hex")) as { result: Record<string, unknown> };
  const steps = (m.op === "step_batch" ? (wire.result.results as { ok: boolean; result?: any }[]).filter((e) => e.ok).map((e) => e.result) : [wire.result]);
  for (const st of steps) {
    expect(st.observation.content).toBeUndefined();
    for (const c of st.info.tool_calls) expect(c.result).toBeUndefined();
  }
  expect(expandStep(wire.result)).toEqual(m.expanded);
  // and the server's compaction is the inverse
  if (m.op === "step") expect(compactStep(m.expanded)).toEqual(m.value.result);
});

test("an observation whose text is not the one derived from its tool results keeps its text on the wire", () => {
  const odd = { observation: { role: "tool", content: "something else", tool_results: [{ tool_call_id: "c", name: "t", content: "x", ok: true }] } };
  expect(compactStep(odd)).toEqual(odd);
  const user = { observation: { role: "user", content: "hi" } };
  expect(compactStep(user)).toBe(user);
});

test("golden vectors hold no integral floats (JavaScript cannot tell 1.0 from 1; the spec says readers accept both)", () => {
  for (const m of messages) expect(JSON.stringify(m.value)).not.toMatch(/\d\.0\b/);
});

test.each(badFrames.map((b) => [b.name, b] as const))("bad frame %s is refused by the scanner or the schemas", (_, b) => {
  const bytes = Buffer.from(b.hex, "hex");
  let code: string;
  try {
    const raw = decodeFrame(bytes) as Record<string, unknown>;
    if (typeof raw !== "object" || raw === null || Array.isArray(raw)) code = "bad_request";
    else if (raw.v !== PROTOCOL_VERSION) code = "unsupported_version";
    else if (!(OPS as readonly string[]).includes(raw.op as string)) code = "unknown_op";
    else code = Request.safeParse(raw).success ? "accepted" : "bad_request";
  } catch (e) {
    code = (e as { code: string }).code;
  }
  expect(code).toBe(b.code);
});

test("the scanner rejects declared lengths beyond the frame before anything is allocated", () => {
  const started = process.memoryUsage().rss;
  for (let i = 0; i < 1000; i++) expect(() => scanFrame(Buffer.from("dd7fffffff" + "c0".repeat(100), "hex"))).toThrow(/declares/);
  expect(process.memoryUsage().rss - started).toBeLessThan(50 << 20);
  // MAX_DEPTH (64) nested containers are allowed, as docs/protocol.md and hello's max_depth say
  expect(() => scanFrame(Buffer.from("91".repeat(65) + "c0", "hex"))).toThrow(/deeper than 64/);
  expect(() => scanFrame(Buffer.from("91".repeat(64) + "c0", "hex"))).not.toThrow();
});

test("the error code list is closed and documented", () => {
  const doc = readFileSync(join(import.meta.dirname, "..", "..", "docs", "protocol.md"), "utf8");
  for (const code of ERROR_CODES) expect(doc).toContain(`\`${code}\``);
});

test("values Python sends decode without BigInt, and undefined encodes as nil", () => {
  // Python packs 2**40 as uint64; msgpackr would make a BigInt without int64AsType
  expect(decodeFrame(Buffer.from("cf0000010000000000", "hex"))).toBe(2 ** 40);
  expect(encodeFrame({ a: undefined }).toString("hex")).toBe("81a161c0");
});

test("integers of 32 bits or more go out as msgpack ints, and ints beyond ±(2^53 - 1) are refused on the way in", () => {
  // msgpackr alone writes 2^32 as float64, which Python reads as 4294967296.0
  expect(encodeFrame(2 ** 32).toString("hex")).toBe("d30000000100000000"); // int64: Python reads an int
  expect(encodeFrame(-(2 ** 40)).toString("hex")).toBe("d3ffffff0000000000");
  expect(encodeFrame(Number.MAX_SAFE_INTEGER)[0]).toBe(0xd3);
  expect(encodeFrame(1.5)[0]).toBe(0xcb);
  expect(encodeFrame(2 ** 31)[0]).toBe(0xce);
  // only the containers on the way to a wide int are copied; the caller's value is untouched
  const shared = { tools: [{ n: 1 }], deep: { list: [1, 2 ** 40] } };
  expect(decodeFrame(encodeFrame(shared))).toEqual(shared);
  expect(typeof shared.deep.list[1]).toBe("number");
  expect(decodeFrame(Buffer.from("cf001fffffffffffff", "hex"))).toBe(Number.MAX_SAFE_INTEGER);
  expect(() => decodeFrame(Buffer.from("cf0020000000000000", "hex"))).toThrow(/does not fit/);
  expect(() => decodeFrame(Buffer.from("d3ffe0000000000000", "hex"))).toThrow(/does not fit/);
  expect(decodeFrame(Buffer.from("d3ffe0000000000001", "hex"))).toBe(-Number.MAX_SAFE_INTEGER);
});
