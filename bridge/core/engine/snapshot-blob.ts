// A snapshot as bytes, so one replica can hand an episode to another (protocol op export_snapshot /
// import_snapshot). The bytes come back from a client, so everything in them is checked before it
// costs anything: a fixed header that says what the blob is (format, bridge version, env, bundle
// hash, sizes, digest) is read and judged first; only then is a deflated payload inflated (bounded
// by the size the header declared) and decoded (scanned like a request frame), and its shape validated.
// What the payload holds is guest memory and the host-side parts of an episode; the engine that
// imports it checks the image against its own env image (engine-host.ts).
import { createHash } from "node:crypto";
import { deflateRawSync, inflateRawSync } from "node:zlib";
import { Packr, Unpackr } from "msgpackr";
import { z } from "zod";
import { scanFrame } from "../../../protocol/codec.js";
import { ProtocolError } from "../../../protocol/error-codes.js";
import { PROTOCOL_VERSION } from "../../../protocol/messages.js";
import type { PortableSnapshot } from "../episode/portable-snapshot.js";

/** The blob's first bytes: what it is, then the format version as one byte. */
const MAGIC = Buffer.from("ESSNAP", "latin1");
/** Bumped whenever the payload's layout changes; a blob of another format is refused (snapshot_incompatible). */
export const SNAPSHOT_FORMAT = 1;
/** The header is a small msgpack map; anything larger is not one of ours. */
const MAX_HEADER_BYTES = 16 << 10;
/** Nesting the payload may have: a request's (64) plus the snapshot's own levels above the actions it keeps. */
const PAYLOAD_DEPTH = 96;
/**
 * Payloads up to this size travel as they are; larger ones are deflated. Deflating costs ~25 ms per
 * MB of sandbox memory on a busy 2-core machine, more than copying the bytes over loopback costs;
 * past 1 MiB the size of the frame matters more (a blob must fit in one frame).
 */
const DEFLATE_ABOVE = 1 << 20;

const packr = new Packr({ useRecords: false, variableMapSize: true, int64AsType: "number" });
const unpackr = new Unpackr({ useRecords: false, mapsAsObjects: true, int64AsType: "number" });

export interface SnapshotBlobHeader {
  format: number;
  protocol_version: number;
  /** The bridge that wrote it: sandbox memory is only meaningful to the same engine build. */
  server_version: string;
  env_id: string;
  /** The env bundle's content hash (manifest, source, state, scenarios): the same env, byte for byte. */
  bundle_hash: string;
  scenario_id: string;
  step: number;
  state_hash: string;
  /** The payload's size once inflated: checked against the snapshot memory limit before inflating. */
  raw_bytes: number;
  /** How the payload follows the header: as it is, or raw deflate. */
  encoding: "none" | "deflate";
  /** sha256 of the payload as it follows the header. */
  sha256: string;
}

const Header = z.strictObject({
  format: z.number().int(),
  protocol_version: z.number().int(),
  server_version: z.string().max(100),
  env_id: z.string().min(1).max(200),
  bundle_hash: z.string().max(200),
  scenario_id: z.string().min(1).max(200),
  step: z.number().int().min(0),
  state_hash: z.string().max(200),
  raw_bytes: z.number().int().min(0),
  encoding: z.enum(["none", "deflate"]),
  sha256: z.string().regex(/^[0-9a-f]{64}$/),
});

/** What an imported snapshot's episode opened with, so forks of it are recorded like any fork. */
export type BlobOpening = Record<string, unknown>;

export interface SnapshotPayload {
  snapshot: PortableSnapshot;
  opening: BlobOpening | null;
}

const bytes = z.instanceof(Uint8Array);
const view = z.strictObject({
  records: z.array(z.tuple([z.string(), z.array(z.tuple([z.string(), z.string().nullable()]))])),
  top: z.array(z.tuple([z.string(), z.union([z.string(), z.strictObject({ collection: z.literal(true) })])])),
});
const int = z.number().int().min(0);
// the shape every part of a PortableSnapshot must have before an engine gets it; the image's own
// bounds (pages inside its memory, the memory cap) are checked by the engine against its env image
const Payload = z.strictObject({
  snapshot: z.looseObject({
    image: z.strictObject({
      machine: z.strictObject({ pages: z.array(z.tuple([int, bytes])), memoryBytes: int, maxBytes: int, rt: int, ctx: int, dispatcher: int, bytes: int }),
      mode: z.literal("env"),
      limits: z.strictObject({ memoryBytes: int, stackBytes: int, callTimeoutMs: int, maxOutputBytes: int }),
      stackBytes: int,
    }),
    methods: z.array(z.string()),
    state: view,
    initial: view,
    user: z.strictObject({ messages: z.array(z.strictObject({ role: z.enum(["system", "user", "assistant"]), content: z.string() })), prefill: z.array(z.string()) }).nullable(),
    steps: int,
    actions: z.array(z.looseObject({ name: z.string(), arguments: z.record(z.string(), z.unknown()), error: z.string().optional() })),
    messages: z.array(z.string()),
    inputs: z.strictObject({ env_id: z.string(), scenario_id: z.string(), seed: int, actions: z.array(z.unknown()), user_replies: z.array(z.string()) }),
    scenarioId: z.string(),
    seed: int,
    bytes: int,
    stateHash: z.string().regex(/^[0-9a-f]{1,64}$/),
    progress: z.strictObject({ turn: int, turnSteps: int, visibleTools: z.array(z.looseObject({ type: z.literal("function"), function: z.looseObject({ name: z.string() }) })), stoppedAtOpening: z.boolean() }),
  }),
  opening: z.record(z.string(), z.unknown()).nullable(),
});

/** `v` as plain data msgpack writes without extensions: undefined properties left out (not written as nil), undefined array items as null. */
function plain(v: unknown): unknown {
  if (v === undefined) return null;
  if (v === null || typeof v !== "object" || ArrayBuffer.isView(v)) return v;
  if (Array.isArray(v)) return v.map(plain);
  const out: Record<string, unknown> = {};
  for (const [k, x] of Object.entries(v as Record<string, unknown>)) if (x !== undefined) out[k] = plain(x);
  return out;
}

/** The blob of a snapshot; `header` is everything but the sizes and digest, which are computed here. */
export function encodeSnapshotBlob(payload: SnapshotPayload, header: Omit<SnapshotBlobHeader, "format" | "protocol_version" | "raw_bytes" | "encoding" | "sha256">, deflateAbove = DEFLATE_ABOVE): Buffer<ArrayBuffer> {
  const raw = packr.pack(plain(payload));
  const deflate = raw.length > deflateAbove;
  // level 1: sandbox memory shrinks 2-3× even so
  const body = deflate ? deflateRawSync(raw, { level: 1 }) : raw;
  const full: SnapshotBlobHeader = {
    format: SNAPSHOT_FORMAT, protocol_version: PROTOCOL_VERSION, ...header, raw_bytes: raw.length, encoding: deflate ? "deflate" : "none", sha256: createHash("sha256").update(body).digest("hex"),
  };
  const head = packr.pack(full);
  const prefix = Buffer.alloc(MAGIC.length + 1 + 4);
  MAGIC.copy(prefix);
  prefix.writeUInt8(SNAPSHOT_FORMAT, MAGIC.length);
  prefix.writeUInt32BE(head.length, MAGIC.length + 1);
  return Buffer.concat([prefix, head, body]);
}

/** The header of a blob, without touching its payload; a blob that is not one of ours is a bad_request, one of another format snapshot_incompatible. */
export function readSnapshotBlobHeader(blob: Uint8Array): { header: SnapshotBlobHeader; body: Uint8Array } {
  const b = Buffer.from(blob.buffer, blob.byteOffset, blob.byteLength);
  const fixed = MAGIC.length + 1 + 4;
  if (b.length < fixed || !b.subarray(0, MAGIC.length).equals(MAGIC)) throw new ProtocolError("bad_request", "blob: not an EnvScaler snapshot (export one with export_snapshot)");
  const format = b.readUInt8(MAGIC.length);
  if (format !== SNAPSHOT_FORMAT) throw new ProtocolError("snapshot_incompatible", `blob: snapshot format ${format}; this bridge reads format ${SNAPSHOT_FORMAT} (export it from a bridge of the same version)`);
  const headLength = b.readUInt32BE(MAGIC.length + 1);
  if (headLength > MAX_HEADER_BYTES || fixed + headLength > b.length) throw new ProtocolError("bad_request", `blob: a header of ${headLength} bytes does not fit (at most ${MAX_HEADER_BYTES}, within the blob)`);
  const head = b.subarray(fixed, fixed + headLength);
  scanFrame(head, 4);
  const parsed = Header.safeParse(unpackr.unpack(head));
  if (!parsed.success) throw new ProtocolError("bad_request", `blob: bad header: ${parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; ")}`);
  return { header: parsed.data, body: b.subarray(fixed + headLength) };
}

/** The payload of a blob whose header was judged acceptable: digest, bounded inflate, scan, shape. Every failure is a bad_request. */
export function decodeSnapshotPayload(header: SnapshotBlobHeader, body: Uint8Array): SnapshotPayload {
  if (createHash("sha256").update(body).digest("hex") !== header.sha256) throw new ProtocolError("bad_request", "blob: the payload does not match its digest (corrupted or cut short)");
  let raw: Uint8Array = body;
  if (header.encoding === "deflate") {
    try {
      // never more than the header declared (and was admitted for): a deflate bomb stops there
      raw = inflateRawSync(body, { maxOutputLength: Math.max(1, header.raw_bytes) });
    } catch (e) {
      throw new ProtocolError("bad_request", `blob: the payload does not inflate to its declared ${header.raw_bytes} bytes: ${(e as Error).message}`);
    }
  }
  if (raw.length !== header.raw_bytes) throw new ProtocolError("bad_request", `blob: the payload is ${raw.length} bytes (inflated), not the declared ${header.raw_bytes}`);
  try {
    scanFrame(raw, PAYLOAD_DEPTH);
  } catch (e) {
    throw new ProtocolError("bad_request", `blob: payload ${(e as Error).message}`);
  }
  const parsed = Payload.safeParse(unpackr.unpack(raw));
  if (!parsed.success) throw new ProtocolError("bad_request", `blob: bad payload: ${parsed.error.issues.slice(0, 5).map((i) => `${i.path.join(".")}: ${i.message}`).join("; ")}`);
  const p = parsed.data as unknown as SnapshotPayload;
  const s = p.snapshot;
  if (s.scenarioId !== header.scenario_id || s.inputs.scenario_id !== header.scenario_id || s.inputs.env_id !== header.env_id || s.stateHash !== header.state_hash || s.steps !== header.step) {
    throw new ProtocolError("bad_request", "blob: the payload is not the snapshot its header describes");
  }
  return p;
}
