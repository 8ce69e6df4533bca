/**
 * Fuel checks for a wasm module: every loop iteration and every entry into a function that calls
 * others spends one unit of a global counter, and when it runs out the module calls the host
 * (import `envscaler.fuel`, `() -> i32`), which either throws (the guest call is past its deadline)
 * or returns the next allowance.
 *
 * Why: QuickJS polls its interrupt handler only between bytecodes, so a native builtin (a join over
 * 16M holes, indexOf on an array-like of length 2^32) runs for as long as it likes. With a check on
 * every back edge and every non-leaf call, no code path in the module can run long without asking
 * the host, so a guest call is stopped at its deadline wherever it is, on the thread that runs it.
 * That is what lets a replica run guest code on its socket's own thread without a watchdog thread.
 *
 * The rewrite is structural, so it is safe to do on bytes: wasm has no code offsets (branches name
 * enclosing blocks), so inserting instructions moves nothing. The new import is the last function
 * import, which shifts every defined function's index by one: `call`, `return_call`, `ref.func`,
 * exports, the start function and element segments are renumbered, and the `name` section (debug
 * names only) is dropped. The new global is the last one, so no global index moves.
 */

/** Where the host's fuel function is imported from. */
export const FUEL_IMPORT = { module: "envscaler", name: "fuel" } as const;

/** Units between two calls of the host's fuel function, unless it returns another allowance. */
export const DEFAULT_FUEL_ALLOWANCE = 1 << 16;

export class WasmRewriteError extends Error {
  override readonly name = "WasmRewriteError";
}

class Reader {
  pos: number;
  constructor(
    readonly buf: Uint8Array,
    pos = 0,
    readonly end = buf.length,
  ) {
    this.pos = pos;
  }
  byte(): number {
    if (this.pos >= this.end) throw new WasmRewriteError(`unexpected end of data at ${this.pos}`);
    return this.buf[this.pos++]!;
  }
  u32(): number {
    let result = 0;
    let shift = 0;
    for (;;) {
      const b = this.byte();
      result |= (b & 0x7f) << shift;
      if ((b & 0x80) === 0) return result >>> 0;
      shift += 7;
      if (shift > 35) throw new WasmRewriteError(`bad LEB128 at ${this.pos}`);
    }
  }
  /** Skips a signed LEB128 of any width (i32/i64 constants, block types). */
  skipLeb(): void {
    while (this.byte() & 0x80);
  }
  skip(n: number): void {
    this.pos += n;
    if (this.pos > this.end) throw new WasmRewriteError(`unexpected end of data at ${this.pos}`);
  }
  bytes(n: number): Uint8Array {
    const out = this.buf.subarray(this.pos, this.pos + n);
    this.skip(n);
    return out;
  }
  name(): string {
    return new TextDecoder().decode(this.bytes(this.u32()));
  }
}

class Writer {
  private chunks: number[] = [];
  private parts: Uint8Array[] = [];
  private flushBytes(): void {
    if (this.chunks.length) {
      this.parts.push(Uint8Array.from(this.chunks));
      this.chunks = [];
    }
  }
  byte(b: number): this {
    this.chunks.push(b);
    return this;
  }
  u32(n: number): this {
    do {
      let b = n & 0x7f;
      n >>>= 7;
      if (n !== 0) b |= 0x80;
      this.chunks.push(b);
    } while (n !== 0);
    return this;
  }
  /** Signed LEB128 of a 32-bit integer. */
  s32(n: number): this {
    for (;;) {
      const b = n & 0x7f;
      n >>= 7;
      if ((n === 0 && (b & 0x40) === 0) || (n === -1 && (b & 0x40) !== 0)) {
        this.chunks.push(b);
        return this;
      }
      this.chunks.push(b | 0x80);
    }
  }
  raw(bytes: Uint8Array): this {
    this.flushBytes();
    this.parts.push(bytes);
    return this;
  }
  name(s: string): this {
    const b = new TextEncoder().encode(s);
    return this.u32(b.length).raw(b);
  }
  /** A vector-length-prefixed copy of another writer's bytes (section payloads, function bodies). */
  sized(inner: Writer): this {
    const b = inner.finish();
    return this.u32(b.length).raw(b);
  }
  finish(): Uint8Array<ArrayBuffer> {
    this.flushBytes();
    const size = this.parts.reduce((n, p) => n + p.length, 0);
    const out = new Uint8Array(size);
    let at = 0;
    for (const p of this.parts) {
      out.set(p, at);
      at += p.length;
    }
    return out;
  }
}

/** What the rewrite needs to know about the module before it touches code. */
interface Indices {
  importedFuncs: number;
  /** The index of the fuel global (after every existing global). */
  fuelGlobal: number;
  /** The index of the fuel import (the old number of imported functions). */
  fuelFunc: number;
}

/**
 * Copies one instruction sequence (a function body's code or a constant expression) from `r` to
 * `w` up to and including the `end` that closes it, renumbering function references and, when
 * `check` is given, inserting it after every `loop`. Returns whether the sequence calls anything.
 */
function copyCode(r: Reader, w: Writer, ix: Indices, check: Uint8Array | null, stopAtEnd: number): boolean {
  let depth = 0;
  let calls = false;
  const shift = (f: number) => (f >= ix.importedFuncs ? f + 1 : f);
  while (r.pos < stopAtEnd) {
    const start = r.pos;
    const op = r.byte();
    switch (op) {
      case 0x02: // block
      case 0x04: // if
        blockType(r);
        depth++;
        w.raw(r.buf.subarray(start, r.pos));
        continue;
      case 0x03: // loop: the check goes first in its body, so every iteration (each branch back to it) runs it
        blockType(r);
        depth++;
        w.raw(r.buf.subarray(start, r.pos));
        if (check) w.raw(check);
        continue;
      case 0x0b: // end
        w.byte(op);
        if (depth === 0) return calls;
        depth--;
        continue;
      case 0x10: // call
      case 0x12: // return_call
        calls = true;
        w.byte(op).u32(shift(r.u32()));
        continue;
      case 0xd2: // ref.func
        w.byte(op).u32(shift(r.u32()));
        continue;
      case 0x11: // call_indirect
      case 0x13: // return_call_indirect
        calls = true;
        r.u32();
        r.u32();
        break;
      default:
        skipImmediates(op, r);
    }
    w.raw(r.buf.subarray(start, r.pos));
  }
  throw new WasmRewriteError("code ran past its end without closing");
}

/** A block type: 0x40 (none), a value type (one byte), or a type index (a signed LEB128): all skip as a LEB128. */
function blockType(r: Reader): void {
  r.skipLeb();
}

/** Skips the immediates of every opcode that needs no renumbering (the MVP, sign extension, saturating truncation, bulk memory, reference types, SIMD, atomics). */
function skipImmediates(op: number, r: Reader): void {
  if (op <= 0x01 || op === 0x05 || op === 0x0f || op === 0x1a || op === 0x1b || op === 0xd1) return; // unreachable nop else return drop select ref.is_null
  if (op === 0x0c || op === 0x0d) return void r.u32(); // br br_if
  if (op === 0x0e) {
    // br_table
    const n = r.u32();
    for (let i = 0; i <= n; i++) r.u32();
    return;
  }
  // exception handling (try/catch/delegate) changes how blocks end; C builds without -fwasm-exceptions never use it
  if (op >= 0x06 && op <= 0x09) throw new WasmRewriteError(`exception-handling opcode 0x${op.toString(16)} is not supported`);
  if (op === 0x1c) {
    // select t*
    const n = r.u32();
    r.skip(n);
    return;
  }
  if (op >= 0x20 && op <= 0x26) return void r.u32(); // local.* global.* table.get/set
  if (op >= 0x28 && op <= 0x3e) return memarg(r);
  if (op === 0x3f || op === 0x40) return void r.u32(); // memory.size/grow (memory index)
  if (op === 0x41 || op === 0x42) return r.skipLeb(); // i32/i64.const
  if (op === 0x43) return r.skip(4);
  if (op === 0x44) return r.skip(8);
  if (op >= 0x45 && op <= 0xc4) return; // numeric, sign extension
  if (op === 0xd0) return void r.byte(); // ref.null t
  if (op === 0xfc) return prefixedFc(r);
  if (op === 0xfd) return prefixedSimd(r);
  if (op === 0xfe) {
    // atomics: all take a memarg except atomic.fence (a reserved byte)
    const sub = r.u32();
    if (sub === 0x03) r.byte();
    else memarg(r);
    return;
  }
  throw new WasmRewriteError(`unknown opcode 0x${op.toString(16)} at ${r.pos - 1}`);
}

function memarg(r: Reader): void {
  const align = r.u32();
  if (align & 0x40) r.u32(); // multi-memory: a memory index follows
  r.u32();
}

function prefixedFc(r: Reader): void {
  const sub = r.u32();
  if (sub <= 7) return; // saturating truncations
  switch (sub) {
    case 8: // memory.init data mem
      r.u32();
      r.u32();
      return;
    case 9: // data.drop
    case 13: // elem.drop
    case 15: // table.grow
    case 16: // table.size
    case 17: // table.fill
    case 11: // memory.fill mem
      r.u32();
      return;
    case 10: // memory.copy dst src
    case 12: // table.init elem table
    case 14: // table.copy dst src
      r.u32();
      r.u32();
      return;
  }
  throw new WasmRewriteError(`unknown 0xfc opcode ${sub}`);
}

function prefixedSimd(r: Reader): void {
  const sub = r.u32();
  if (sub <= 11) return memarg(r); // v128.load* / store
  if (sub === 12) return r.skip(16); // v128.const
  if (sub === 13) return r.skip(16); // i8x16.shuffle
  if (sub >= 21 && sub <= 34) return void r.byte(); // extract/replace lane
  if (sub >= 84 && sub <= 91) {
    // load/store lane: memarg + lane
    memarg(r);
    r.byte();
    return;
  }
  if (sub === 92 || sub === 93) return memarg(r); // load32_zero load64_zero
  return; // every other SIMD opcode has no immediates
}

/**
 * The instructions that spend one unit and, when the counter goes below zero, ask the host for
 * more (the host throws instead when the running call is past its deadline).
 */
function checkSequence(ix: Indices): Uint8Array {
  const w = new Writer();
  const g = ix.fuelGlobal;
  w.byte(0x23).u32(g).byte(0x41).s32(1).byte(0x6b).byte(0x24).u32(g); // fuel = fuel - 1
  w.byte(0x23).u32(g).byte(0x41).s32(0).byte(0x48); // fuel < 0 ?
  w.byte(0x04).byte(0x40).byte(0x10).u32(ix.fuelFunc).byte(0x24).u32(g).byte(0x0b); // if: fuel = host()
  return w.finish();
}

/**
 * The module with fuel checks. The instance needs the import `envscaler.fuel: () => number`; the
 * counter starts at `allowance`.
 */
export function addFuelChecks(wasm: Uint8Array, allowance = DEFAULT_FUEL_ALLOWANCE): Uint8Array<ArrayBuffer> {
  const r = new Reader(wasm);
  const magic = r.bytes(8);
  if (magic[0] !== 0 || magic[1] !== 0x61 || magic[2] !== 0x73 || magic[3] !== 0x6d || magic[4] !== 1) throw new WasmRewriteError("not a version-1 wasm module");
  const sections: { id: number; body: Uint8Array }[] = [];
  while (r.pos < wasm.length) {
    const id = r.byte();
    const size = r.u32();
    sections.push({ id, body: r.bytes(size) });
  }
  const section = (id: number) => sections.find((s) => s.id === id);
  if (sections.some((s) => s.id === 0 && new Reader(s.body).name() === "envscaler.fuel")) throw new WasmRewriteError("the module already has fuel checks");

  // types: append () -> i32
  const types = section(1);
  const typeCount = types ? new Reader(types.body).u32() : 0;
  const fuelType = typeCount;
  // imports: count functions and globals, append the fuel import
  let importedFuncs = 0;
  let importedGlobals = 0;
  const imports = section(2);
  let importCount = 0;
  if (imports) {
    const ir = new Reader(imports.body);
    importCount = ir.u32();
    for (let i = 0; i < importCount; i++) {
      ir.name();
      ir.name();
      const kind = ir.byte();
      if (kind === 0x00) {
        ir.u32();
        importedFuncs++;
      } else if (kind === 0x01) {
        ir.byte();
        limits(ir);
      } else if (kind === 0x02) limits(ir);
      else if (kind === 0x03) {
        ir.byte();
        ir.byte();
        importedGlobals++;
      } else if (kind === 0x04) {
        ir.byte();
        ir.u32();
      } else throw new WasmRewriteError(`unknown import kind ${kind}`);
    }
  }
  const globals = section(6);
  const definedGlobals = globals ? new Reader(globals.body).u32() : 0;
  const ix: Indices = { importedFuncs, fuelFunc: importedFuncs, fuelGlobal: importedGlobals + definedGlobals };
  const check = checkSequence(ix);

  const out = new Writer().raw(magic);
  const emit = (id: number, body: Writer | Uint8Array) => {
    out.byte(id);
    if (body instanceof Writer) out.sized(body);
    else out.u32(body.length).raw(body);
  };
  const order = (id: number) => (id === 12 ? 9.5 : id === 13 ? 5.5 : id); // datacount sits before code, tags after memory
  const wrote = new Set<number>();
  const emitMissingBefore = (id: number) => {
    // sections this rewrite must add when the module has none of them (in their place in the order)
    if (!types && !wrote.has(1) && order(id) > 1) {
      wrote.add(1);
      emit(1, new Writer().u32(1).byte(0x60).u32(0).u32(1).byte(0x7f));
    }
    if (!imports && !wrote.has(2) && order(id) > 2) {
      wrote.add(2);
      emit(2, new Writer().u32(1).name(FUEL_IMPORT.module).name(FUEL_IMPORT.name).byte(0x00).u32(fuelType));
    }
    if (!globals && !wrote.has(6) && order(id) > 6) {
      wrote.add(6);
      emit(6, new Writer().u32(1).byte(0x7f).byte(0x01).byte(0x41).s32(allowance).byte(0x0b));
    }
  };
  for (const { id, body } of sections) {
    if (id !== 0) emitMissingBefore(id);
    const br = new Reader(body);
    switch (id) {
      case 0: {
        const name = br.name();
        if (name === "name") continue; // debug names, indexed by the old function numbers
        emit(0, body);
        continue;
      }
      case 1: {
        br.u32();
        emit(1, new Writer().u32(typeCount + 1).raw(body.subarray(br.pos)).byte(0x60).u32(0).u32(1).byte(0x7f));
        wrote.add(1);
        continue;
      }
      case 2: {
        br.u32();
        emit(2, new Writer().u32(importCount + 1).raw(body.subarray(br.pos)).name(FUEL_IMPORT.module).name(FUEL_IMPORT.name).byte(0x00).u32(fuelType));
        wrote.add(2);
        continue;
      }
      case 6: {
        const n = br.u32();
        const w = new Writer().u32(n + 1);
        for (let i = 0; i < n; i++) {
          const start = br.pos;
          br.byte();
          br.byte();
          w.raw(body.subarray(start, br.pos));
          copyCode(br, w, ix, null, body.length);
        }
        w.byte(0x7f).byte(0x01).byte(0x41).s32(allowance).byte(0x0b);
        emit(6, w);
        wrote.add(6);
        continue;
      }
      case 7: {
        const n = br.u32();
        const w = new Writer().u32(n);
        for (let i = 0; i < n; i++) {
          w.name(br.name());
          const kind = br.byte();
          const index = br.u32();
          w.byte(kind).u32(kind === 0x00 && index >= importedFuncs ? index + 1 : index);
        }
        emit(7, w);
        continue;
      }
      case 8: {
        const f = br.u32();
        emit(8, new Writer().u32(f >= importedFuncs ? f + 1 : f));
        continue;
      }
      case 9:
        emit(9, elements(br, ix));
        continue;
      case 10:
        emit(10, code(br, ix, check));
        continue;
      default:
        emit(id, body);
    }
  }
  emitMissingBefore(Infinity);
  // a marker, so a module is never instrumented twice
  emit(0, new Writer().name("envscaler.fuel"));
  return out.finish();
}

function limits(r: Reader): void {
  const flags = r.byte();
  r.u32();
  if (flags & 0x01) r.u32();
}

function elements(r: Reader, ix: Indices): Writer {
  const n = r.u32();
  const w = new Writer().u32(n);
  const shift = (f: number) => (f >= ix.importedFuncs ? f + 1 : f);
  const expr = () => copyCode(r, w, ix, null, r.end);
  for (let i = 0; i < n; i++) {
    const flags = r.u32();
    w.u32(flags);
    if (flags === 2 || flags === 6) w.u32(r.u32()); // table index
    if (flags === 0 || flags === 2 || flags === 4 || flags === 6) expr(); // offset
    if (flags === 1 || flags === 2 || flags === 3 || flags === 5 || flags === 6 || flags === 7) w.byte(r.byte()); // elemkind or reftype
    const count = r.u32();
    w.u32(count);
    for (let k = 0; k < count; k++) {
      if (flags & 0x04) expr();
      else w.u32(shift(r.u32()));
    }
  }
  return w;
}

function code(r: Reader, ix: Indices, check: Uint8Array): Writer {
  const n = r.u32();
  const w = new Writer().u32(n);
  for (let i = 0; i < n; i++) {
    const size = r.u32();
    const end = r.pos + size;
    const localsStart = r.pos;
    const groups = r.u32();
    for (let g = 0; g < groups; g++) {
      r.u32();
      r.byte();
    }
    const locals = r.buf.subarray(localsStart, r.pos);
    const bodyStart = r.pos;
    // a first pass tells whether the function calls anything: only those get a check on entry (a
    // leaf without loops runs in bounded time; recursion needs a call)
    const probe = new Writer();
    const calls = copyCode(new Reader(r.buf, bodyStart, end), probe, ix, check, end);
    const fn = new Writer().raw(locals);
    if (calls) fn.raw(check);
    fn.raw(probe.finish());
    r.pos = end;
    w.sized(fn);
  }
  return w;
}
