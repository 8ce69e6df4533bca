import { isUtf8 } from "node:buffer";
import { Packr, Unpackr } from "msgpackr";
import { ProtocolError } from "./error-codes.js";

/** Nesting depth a frame may have (maps and arrays); tool arguments deeper than this are not plausible. */
export const MAX_DEPTH = 64;

// Python's msgpack reads exactly what these write: no records (Python would raise ExtraData), no
// undefined extension, maps of any size, 64-bit ints as Numbers (BigInt breaks JSON.stringify).
const packr = new Packr({ useRecords: false, encodeUndefinedAsNil: true, variableMapSize: true, int64AsType: "number" });
const unpackr = new Unpackr({ useRecords: false, mapsAsObjects: true, int64AsType: "number", structuredClone: false });

const INT32_SPAN = 2 ** 32;

/**
 * Integers msgpackr would write as float64: it writes only 32-bit integers as ints, so an id or a
 * count of 2^32 or more would reach Python as 4294967296.0. Returns the value with those as BigInt
 * (written as int64/uint64) and lone surrogates as U+FFFD, copying only the containers on the way
 * to one; most replies have none and come back as they are.
 */
function widenInts(v: unknown): unknown {
  if (typeof v === "number") return Number.isSafeInteger(v) && (v >= INT32_SPAN || v < -INT32_SPAN / 2) ? BigInt(v) : v;
  // a lone surrogate (JSON text can hold one as an escape, "\ud800") would go out as bytes that
  // are not UTF-8, which every decoder of this protocol refuses (§2): the reply would be lost. It
  // goes as U+FFFD instead, as any UTF-8 encoder writes it.
  if (typeof v === "string") return wellFormed(v);
  if (v === null || typeof v !== "object") return v;
  if (Array.isArray(v)) {
    let out: unknown[] | null = null;
    for (let i = 0; i < v.length; i++) {
      const w = widenInts(v[i]);
      if (w !== v[i]) (out ??= v.slice())[i] = w;
    }
    return out ?? v;
  }
  if (ArrayBuffer.isView(v)) return v;
  let out: Record<string, unknown> | null = null;
  for (const k in v) {
    const x = (v as Record<string, unknown>)[k];
    const w = widenInts(x);
    const key = wellFormed(k);
    if (key !== k) {
      out ??= { ...(v as Record<string, unknown>) };
      delete out[k];
    }
    if (w !== x || key !== k) (out ??= { ...(v as Record<string, unknown>) })[key] = w;
  }
  return out ?? v;
}

type WellFormedString = string & { isWellFormed(): boolean; toWellFormed(): string };
function wellFormed(s: string): string {
  return (s as WellFormedString).isWellFormed() ? s : (s as WellFormedString).toWellFormed();
}

export function encodeFrame(value: unknown): Buffer {
  return packr.pack(widenInts(value));
}

/**
 * Decodes one untrusted frame. A non-allocating scan runs first (see scanFrame), so a hostile
 * frame cannot make the decoder preallocate huge containers, recurse deeply or build extension
 * objects; the decoded value is then plain data for the zod schemas.
 */
export function decodeFrame(frame: Uint8Array, maxDepth = MAX_DEPTH): unknown {
  scanFrame(frame, maxDepth);
  try {
    return unpackr.unpack(frame);
  } catch (e) {
    throw new ProtocolError("bad_request", `not msgpack: ${(e as Error).message}`);
  }
}

/**
 * Walks the msgpack structure without building it: exactly one value, nesting ≤ maxDepth, every
 * declared length within the remaining bytes (a container's elements need ≥ 1 byte each), no
 * extension types, map keys strings, every string valid UTF-8 (a decoder would otherwise put
 * U+FFFD in its place and the request would run on text nobody sent; Python's msgpack refuses it
 * too). Iterative, so depth costs no host stack.
 */
export function scanFrame(b: Uint8Array, maxDepth = MAX_DEPTH): void {
  const bad = (why: string): never => {
    throw new ProtocolError("bad_request", `not a valid frame: ${why}`);
  };
  const view = new DataView(b.buffer, b.byteOffset, b.byteLength);
  // remaining[k] = values still to read in the k-th open container; keyNext[k]: next value is a map key
  const remaining: number[] = [1];
  const isMap: boolean[] = [false];
  const keyNext: boolean[] = [false];
  let pos = 0;
  const need = (n: number) => {
    if (pos + n > b.length) bad(`truncated at byte ${pos}`);
  };
  const u8 = () => (need(1), b[pos++]!);
  const u16 = () => (need(2), (pos += 2), view.getUint16(pos - 2));
  const u32 = () => (need(4), (pos += 4), view.getUint32(pos - 4));
  while (remaining.length) {
    const top = remaining.length - 1;
    if (remaining[top] === 0) {
      remaining.pop();
      isMap.pop();
      keyNext.pop();
      continue;
    }
    remaining[top]!--;
    const asKey = isMap[top]! && keyNext[top]!;
    if (isMap[top]) keyNext[top] = !keyNext[top];
    const t = u8();
    let str = -1;
    let container = -1;
    let map = false;
    if (t <= 0x7f || t >= 0xe0) {
      /* fixint */
    } else if (t >= 0xa0 && t <= 0xbf) str = t & 0x1f;
    else if (t >= 0x90 && t <= 0x9f) container = t & 0x0f;
    else if (t >= 0x80 && t <= 0x8f) {
      container = t & 0x0f;
      map = true;
    } else {
      switch (t) {
        case 0xc0: case 0xc2: case 0xc3: break; // nil, false, true
        case 0xcc: case 0xd0: need(1); pos += 1; break;
        case 0xcd: case 0xd1: need(2); pos += 2; break;
        case 0xca: case 0xce: case 0xd2: need(4); pos += 4; break;
        case 0xcb: need(8); pos += 8; break;
        case 0xcf: case 0xd3: {
          // ints are read as Numbers: beyond 2^53 they would silently change value
          need(8);
          const n = t === 0xcf ? view.getBigUint64(pos) : view.getBigInt64(pos);
          if (n > BigInt(Number.MAX_SAFE_INTEGER) || n < -BigInt(Number.MAX_SAFE_INTEGER)) bad(`integer at byte ${pos - 1} does not fit in ±(2^53 - 1)`);
          pos += 8;
          break;
        }
        case 0xd9: str = u8(); break;
        case 0xda: str = u16(); break;
        case 0xdb: str = u32(); break;
        case 0xc4: { const n = u8(); need(n); pos += n; break; }
        case 0xc5: { const n = u16(); need(n); pos += n; break; }
        case 0xc6: { const n = u32(); need(n); pos += n; break; }
        case 0xdc: container = u16(); break;
        case 0xdd: container = u32(); break;
        case 0xde: container = u16(); map = true; break;
        case 0xdf: container = u32(); map = true; break;
        default: bad(t === 0xc1 ? "reserved byte 0xc1" : `extension type (0x${t.toString(16)}) at byte ${pos - 1}`);
      }
    }
    if (asKey && str < 0) bad(`map key at byte ${pos - 1} is not a string`);
    if (str >= 0) {
      need(str);
      if (str > 0 && !isUtf8(b.subarray(pos, pos + str))) bad(`string at byte ${pos} is not valid UTF-8`);
      pos += str;
    }
    if (container >= 0) {
      const items = map ? container * 2 : container;
      if (items > b.length - pos) bad(`container at byte ${pos} declares ${container} entries in ${b.length - pos} bytes`);
      // remaining[0] is the root's placeholder: remaining.length is the depth this container opens at
      if (remaining.length > maxDepth) bad(`nested deeper than ${maxDepth}`);
      remaining.push(items);
      isMap.push(map);
      keyNext.push(true);
    }
  }
  if (pos !== b.length) bad(`${b.length - pos} bytes after the value`);
}
