import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { memoryPages } from "./limits.js";
import { addFuelChecks, DEFAULT_FUEL_ALLOWANCE, FUEL_IMPORT } from "./wasm-fuel.js";

const require = createRequire(import.meta.url);

/**
 * The raw QuickJS wasm build (`@jitl/quickjs-wasmfile-release-sync`, pinned), driven through its C
 * exports directly instead of quickjs-emscripten's handle wrappers. Owning every pointer ourselves
 * is what makes a machine's whole state a function of its linear memory plus four numbers (runtime,
 * context, dispatcher, install function): so an image of that memory can be copied into a fresh
 * wasm instance and run on as if it had been built there (reset and fork in O(copy)).
 */
interface Exports {
  _malloc(n: number): number;
  _free(p: number): void;
  _QTS_NewRuntime(): number;
  _QTS_FreeRuntime(rt: number): void;
  _QTS_RuntimeSetMemoryLimit(rt: number, n: number): void;
  _QTS_RuntimeSetMaxStackSize(rt: number, n: number): void;
  _QTS_RuntimeEnableInterruptHandler(rt: number): void;
  _QTS_NewContext(rt: number, intrinsics: number): number;
  _QTS_FreeContext(ctx: number): void;
  _QTS_Eval(ctx: number, code: number, len: number, filename: number, detectModule: number, flags: number): number;
  _QTS_Call(ctx: number, fn: number, self: number, argc: number, argv: number): number;
  _QTS_ResolveException(ctx: number, value: number): number;
  _QTS_FreeValuePointer(ctx: number, value: number): void;
  _QTS_NewString(ctx: number, chars: number): number;
  _QTS_GetString(ctx: number, value: number): number;
  _QTS_FreeCString(ctx: number, chars: number): void;
  _QTS_Typeof(ctx: number, value: number): number;
  _QTS_GetProp(ctx: number, obj: number, key: number): number;
  _QTS_GetUndefined(): number;
  _QTS_NewFunction(ctx: number, name: number, length: number, isCtor: number, hostRef: number): number;
  _QTS_ArgvGetJSValueConstPointer(argv: number, i: number): number;
}

interface Callbacks {
  callFunction(asyncify: unknown, ctx: number, self: number, argc: number, argv: number, fnId: number): number;
  shouldInterrupt(asyncify: unknown, rt: number): number;
  freeHostRef(asyncify: unknown, rt: number, id: number): void;
  loadModuleSource(): number;
  normalizeModule(): number;
}

type Factory = (arg: Record<string, unknown>) => Promise<Exports & { callbacks?: Callbacks }>;

let wasm: Promise<WebAssembly.Module> | undefined;
let factory: Promise<Factory> | undefined;

/**
 * The QuickJS wasm with fuel checks (wasm-fuel.ts: every loop and non-leaf call asks the host once
 * its allowance is spent, so no builtin can outrun a call's deadline), compiled once per thread;
 * instantiating it again costs under a millisecond.
 */
function compiledWasm(): Promise<WebAssembly.Module> {
  wasm ??= readFile(require.resolve("@jitl/quickjs-wasmfile-release-sync/wasm")).then((bytes) => WebAssembly.compile(fuelChecksOn() ? addFuelChecks(bytes) : bytes));
  return wasm;
}

/**
 * ENVSCALER_NO_FUEL=1 leaves the checks out (read once per thread): only for measuring what they
 * cost and for testing the watchdogs they make idle. Without them a native builtin can overrun its
 * deadline again, and only a thread or process watchdog stops it.
 */
export function fuelChecksOn(): boolean {
  return process.env.ENVSCALER_NO_FUEL !== "1";
}

function emscriptenFactory(): Promise<Factory> {
  factory ??= import("@jitl/quickjs-wasmfile-release-sync/emscripten-module").then((m) => (m as unknown as { default: Factory }).default);
  return factory;
}

// @types/node declares only part of the WebAssembly JS API
type WasmExports = Record<string, unknown>;
type WasmInstance = { exports: WasmExports };
const WasmInstanceCtor = (WebAssembly as unknown as { Instance: new (m: WebAssembly.Module, imports: unknown) => WasmInstance }).Instance;

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** The one host function a machine exposes to its guest (see Machine.hostCall). */
export const HOST_FUNCTION_ID = 1;

/**
 * A wasm instance ready for a machine: fresh (emscripten's runtime initialised, nothing of QuickJS
 * created yet) or recycled (a machine ran in it and was released healthy; `dirty` says which memory
 * it may have written, so a restore can make every such byte the image's again).
 */
export interface BlankInstance {
  exports: Exports;
  memory: WebAssembly.Memory;
  maxBytes: number;
  callbacks: Callbacks;
  /** The wasm stack pointer at rest: the stack lies below it, the heap above. */
  stackTop: number;
  /** Where emscripten's static data ends (the stack region starts). */
  dataEnd: number;
  /** For a recycled instance: the lowest stack page and the heap top its last machine wrote. */
  dirty: { stackLow: number; heapTop: number } | null;
  /**
   * The lowest stack page and highest heap top any of its machines wrote (the heap's break never
   * goes down in this build, and pages once written stay resident): what it holds of the host's
   * RAM lies within this and the static data (see touchedBytes), however large its memory is.
   */
  extent: { stackLow: number; heapTop: number } | null;
  /** Set when the heap asked to grow past the memory cap (an allocation failed for lack of memory). */
  capHit: boolean;
  /** Whether a SandboxHost's pool holds it (else a machine has it, or no one): never both, see SandboxHost. */
  pooled: boolean;
  /** Given up for good (dropInstance): no pool or machine may hold it again. */
  dropped: boolean;
}

/**
 * Instances made in this thread and not dropped yet: every one is held by a pool or a machine, and
 * whoever lets one go calls dropInstance. Only a count (the leak check's: a test file must end with
 * none), never a list, so it keeps nothing alive.
 */
let instancesHeld = 0;

/** Instances of this thread that are pooled or attached to a machine (made and not dropped). */
export function liveInstances(): number {
  return instancesHeld;
}

/**
 * Bytes of memory a released instance may hold resident: its static data and the span of stack and
 * heap its machines wrote. An untouched instance's memory (16 MiB at least) is mostly reserved
 * address space, not RAM; counting it whole let a pool hold only 16 instances of a few hundred KB.
 */
export function touchedBytes(inst: BlankInstance): number {
  const e = inst.extent;
  return e ? inst.dataEnd + (e.heapTop - e.stackLow) : inst.memory.buffer.byteLength;
}

/** Gives an instance up for good (its memory goes with the last reference); idempotent. */
export function dropInstance(inst: BlankInstance): void {
  if (inst.dropped) return;
  if (inst.pooled) throw new Error("an instance still in a pool was dropped");
  inst.dropped = true;
  instancesHeld--;
}

/** The wasm instance's callbacks route here; a machine installs itself when it takes the instance. */
interface CallbackTarget {
  hostCall(self: number, argc: number, argv: number): number;
  shouldInterrupt(): boolean;
  /**
   * Called from inside any wasm code once its fuel allowance is spent: returns the next allowance,
   * or throws to stop the running call wherever it is (the instance is then unusable).
   */
  fuel(): number;
}

export async function newBlankInstance(maxBytes: number): Promise<BlankInstance> {
  if (!layout) {
    // the first instance of a thread only measures this build's layout (it is then dirty)
    const probe = await instantiate(maxBytes);
    probe.dataEnd = firstZeroPage(new Uint8Array(probe.memory.buffer));
    layout = { dataEnd: probe.dataEnd, brk: findBrk(probe) };
    dropInstance(probe);
  }
  return instantiate(maxBytes);
}

async function instantiate(maxBytes: number): Promise<BlankInstance> {
  const pages = memoryPages(maxBytes);
  const memory = new WebAssembly.Memory({ initial: 256, maximum: pages });
  const [module, make] = await Promise.all([compiledWasm(), emscriptenFactory()]);
  let target: CallbackTarget | null = null;
  const callbacks: Callbacks & { target: (t: CallbackTarget | null) => void } = {
    callFunction: (_a, _ctx, self, argc, argv) => (target ? target.hostCall(self, argc, argv) : 0),
    shouldInterrupt: () => (target?.shouldInterrupt() ? 1 : 0),
    freeHostRef: () => undefined,
    loadModuleSource: () => 0,
    normalizeModule: () => 0,
    target: (t) => {
      target = t;
    },
  };
  let raw: WasmExports | undefined;
  // assigned once below, but read by the resize hook defined before it (a const would be in its TDZ there)
  // eslint-disable-next-line prefer-const
  let inst: BlankInstance | undefined;
  const exports = await make({
    wasmMemory: memory,
    instantiateWasm(imports: unknown, done: (i: WasmInstance, m: WebAssembly.Module) => void) {
      // emscripten_resize_heap (import "k" of this pinned build) answers false when the memory
      // cannot grow: that, not the text of an error, is what an out-of-memory is
      const env = (imports as { a: Record<string, unknown> }).a;
      (imports as Record<string, unknown>)[FUEL_IMPORT.module] = { [FUEL_IMPORT.name]: () => (target ? target.fuel() : DEFAULT_FUEL_ALLOWANCE) };
      const resize = env.k as (n: number) => number;
      env.k = (n: number) => {
        const ok = resize(n);
        if (!ok && inst) inst.capHit = true;
        return ok;
      };
      const instance = new WasmInstanceCtor(module, imports);
      raw = instance.exports;
      done(instance, module);
      return instance.exports;
    },
    // emscripten's stdio would otherwise print guest-side aborts to the host's stderr
    print: () => undefined,
    printErr: () => undefined,
  });
  exports.callbacks = callbacks;
  const stackTop = stackSave(raw!);
  inst = { exports, memory, maxBytes: pages * 65536, callbacks, stackTop, dataEnd: layout?.dataEnd ?? 0, dirty: null, extent: null, capHit: false, pooled: false, dropped: false };
  instancesHeld++;
  return inst;
}

/** This build's static layout, the same for every instance (measured once per thread). */
let layout: { dataEnd: number; brk: number | null } | undefined;

/**
 * emscripten's stackSave, which this pinned build exports minified as `Oa` (the glue's own
 * `stackSave` binding). Checked for plausibility: 16-byte aligned and inside the first 64 MiB.
 */
function stackSave(raw: WasmExports): number {
  const fn = raw.Oa;
  const sp = typeof fn === "function" ? (fn as () => number)() : 0;
  if (!(sp > 0 && sp % 16 === 0 && sp < 64 << 20)) throw new Error(`unexpected QuickJS wasm build: no stack pointer (${sp}); pin @jitl/quickjs-wasmfile-release-sync to 0.32.0`);
  return sp;
}

function firstZeroPage(u8: Uint8Array): number {
  const words = new Uint32Array(u8.buffer, 0, u8.length / 4);
  for (let offset = 0; offset < u8.length; offset += PAGE) if (isZeroPage(words, offset)) return offset;
  return u8.length;
}

type Range = [from: number, to: number];

function pageFloor(n: number): number {
  return Math.floor(n / PAGE) * PAGE;
}

/** [0, dataEnd) and [lowest used stack page, heap top): everything a machine can have written. */
function usedRanges(inst: BlankInstance, u8: Uint8Array): Range[] {
  return [[0, inst.dataEnd], [lowestStackPage(u8, inst), Math.max(heapTop(u8), inst.stackTop)]];
}

/**
 * The stack grows down from stackTop; the part a machine used is contiguous below it. Scan down
 * until 16 all-zero pages in a row (no QuickJS frame leaves 64 KiB of zeros between used frames).
 */
function lowestStackPage(u8: Uint8Array, inst: BlankInstance): number {
  const words = new Uint32Array(u8.buffer, 0, inst.stackTop / 4 + 1);
  let lowest = pageFloor(inst.stackTop - 1);
  let zeros = 0;
  for (let page = lowest - PAGE; page >= inst.dataEnd && zeros < 16; page -= PAGE) {
    if (isZeroPage(words, page)) zeros++;
    else {
      zeros = 0;
      lowest = page;
    }
  }
  return lowest;
}

function isZeroPage(words: Uint32Array, offset: number): boolean {
  for (let w = offset / 4, end = w + PAGE / 4; w < end; w++) if (words[w] !== 0) return false;
  return true;
}

function nonZeroRuns(u8: Uint8Array, from: number, to: number): Range[] {
  const words = new Uint32Array(u8.buffer, 0, to / 4);
  const runs: Range[] = [];
  for (let page = from; page < to; page += PAGE) {
    if (isZeroPage(words, page)) continue;
    const last = runs[runs.length - 1];
    const end = Math.min(page + PAGE, to);
    if (last && last[1] === page) last[1] = end;
    else runs.push([page, end]);
  }
  return runs;
}

/**
 * Finds the sbrk word by growing the heap by a known amount: of the words in static data that grew
 * by about that much (the break; dlmalloc's top chunk pointer; its footprint counters), the break
 * is the one with the highest value. The build is pinned, so this is the same address every time;
 * if the probe ever fails, heapTop falls back to scanning for the last used page.
 */
function findBrk(inst: BlankInstance): number | null {
  const words = () => new Uint32Array(inst.memory.buffer, 0, inst.dataEnd / 4);
  const before = words().slice();
  const big = 4 << 20;
  const p = inst.exports._malloc(big);
  const after = words();
  let best: number | null = null;
  for (let i = 0; i < before.length; i++) {
    const v = after[i]!;
    if (v - before[i]! > big / 2 && v >= p + big && v <= inst.memory.buffer.byteLength && (best === null || v > after[best]!)) best = i;
  }
  inst.exports._free(p);
  return best === null ? null : best * 4;
}

/** A copy of a machine: its used memory (sparse: zero pages are not stored) and its pointers. */
export interface MachineImage {
  /** [offset, bytes] of every 4 KiB page that is not all zero, below the heap's break. */
  readonly pages: [number, Uint8Array][];
  /** The wasm memory's size when captured (a restore grows to it first). */
  readonly memoryBytes: number;
  readonly maxBytes: number;
  readonly rt: number;
  readonly ctx: number;
  readonly dispatcher: number;
  /** Bytes held by this image. */
  readonly bytes: number;
}

const PAGE = 4096;

/**
 * One QuickJS runtime and context inside one wasm instance, with the prelude's dispatcher. All
 * strings cross as UTF-8 in linear memory; the only guest-callable host function is `hostCall`.
 */
export class Machine {
  private u8: Uint8Array;
  private constructor(
    private readonly inst: BlankInstance,
    readonly rt: number,
    readonly ctx: number,
    public dispatcher: number,
    private readonly target: CallbackTarget,
  ) {
    this.u8 = new Uint8Array(inst.memory.buffer);
    (inst.callbacks as unknown as { target: (t: CallbackTarget) => void }).target(target);
  }

  get memory(): WebAssembly.Memory {
    return this.inst.memory;
  }

  get maxBytes(): number {
    return this.inst.maxBytes;
  }

  /** The instance, for dropping it without releasing (a faulted machine's memory is not read again). */
  get instance(): BlankInstance {
    return this.inst;
  }

  /** A new runtime and context in a fresh instance (the slow path: images avoid it). */
  static create(inst: BlankInstance, stackBytes: number, target: CallbackTarget): Machine {
    if (inst.dirty) throw new Error("Machine.create needs a fresh instance; a recycled one is only restored into");
    const x = inst.exports;
    const rt = x._QTS_NewRuntime();
    // setMemoryLimit only refuses single huge allocations in this build; the wasm memory maximum is the real cap
    x._QTS_RuntimeSetMemoryLimit(rt, inst.maxBytes);
    x._QTS_RuntimeSetMaxStackSize(rt, stackBytes);
    x._QTS_RuntimeEnableInterruptHandler(rt);
    const ctx = x._QTS_NewContext(rt, 0);
    return new Machine(inst, rt, ctx, 0, target);
  }

  /**
   * A machine continuing from an image, in a fresh or recycled instance of the same memory cap.
   * Afterwards every byte the instance's earlier user (or emscripten's constructors) may have
   * written holds the image's value: what a guest can observe is exactly the captured machine.
   */
  static restore(inst: BlankInstance, image: MachineImage, target: CallbackTarget): Machine {
    if (image.maxBytes !== inst.maxBytes) throw new Error("an image is restored into an instance of the same memory cap");
    const memory = inst.memory;
    const before = new Uint8Array(memory.buffer);
    const dirty: Range[] = inst.dirty
      ? [[0, inst.dataEnd], [inst.dirty.stackLow, inst.dirty.heapTop]]
      : [[0, inst.dataEnd], [pageFloor(inst.stackTop - 1), heapTop(before)]];
    const grow = Math.ceil((image.memoryBytes - memory.buffer.byteLength) / 65536);
    if (grow > 0) memory.grow(grow);
    const u8 = new Uint8Array(memory.buffer);
    for (const [offset, bytes] of image.pages) u8.set(bytes, offset);
    // zero what may be dirty and the image does not cover (writing zeros to untouched pages would
    // make them resident, so only these ranges, never the whole memory)
    for (const [from, to] of dirty) {
      let at = from;
      for (const [offset, bytes] of image.pages) {
        const end = offset + bytes.length;
        if (end <= at) continue;
        if (offset >= to) break;
        if (offset > at) u8.fill(0, at, offset);
        at = end;
      }
      if (at < to) u8.fill(0, at, to);
    }
    inst.dirty = null;
    inst.capHit = false;
    return new Machine(inst, image.rt, image.ctx, image.dispatcher, target);
  }

  private view(): Uint8Array {
    if (this.u8.buffer !== this.inst.memory.buffer) this.u8 = new Uint8Array(this.inst.memory.buffer);
    return this.u8;
  }

  /**
   * Copies the machine's used memory: static data, the used part of the stack and the heap. Only
   * valid between guest calls (the wasm stack is at rest). `sparse` leaves out all-zero pages (an
   * image restored many times then touches only the pages it needs, which keeps each restored
   * sandbox's resident memory small); a one-off copy (a fork) is cheaper dense.
   */
  capture(sparse: boolean): MachineImage {
    const u8 = this.view();
    const ranges = usedRanges(this.inst, u8);
    const runs: Range[] = sparse ? ranges.flatMap(([from, to]) => nonZeroRuns(u8, from, to)) : ranges;
    const pages = runs.map(([from, to]) => [from, u8.slice(from, to)] as [number, Uint8Array]);
    const bytes = runs.reduce((n, [from, to]) => n + to - from, 0);
    return { pages, memoryBytes: u8.length, maxBytes: this.inst.maxBytes, rt: this.rt, ctx: this.ctx, dispatcher: this.dispatcher, bytes };
  }

  /**
   * Hands the instance back for recycling, noting what this machine may have written. The QuickJS
   * runtime is not freed: the next restore overwrites all of it. Never call after a fault.
   */
  release(): BlankInstance {
    const [, [stackLow, top]] = usedRanges(this.inst, this.view()) as [Range, Range];
    this.inst.dirty = { stackLow, heapTop: top };
    const was = this.inst.extent;
    this.inst.extent = was ? { stackLow: Math.min(was.stackLow, stackLow), heapTop: Math.max(was.heapTop, top) } : { stackLow, heapTop: top };
    (this.inst.callbacks as unknown as { target: (t: CallbackTarget | null) => void }).target(null);
    return this.inst;
  }

  /** Bytes of linear memory the guest has grown to (it never shrinks). */
  get memoryBytes(): number {
    return this.inst.memory.buffer.byteLength;
  }

  /** True once an allocation failed because the memory cap was reached (set by the heap's resize hook). */
  get capHit(): boolean {
    return this.inst.capHit;
  }

  // ---- strings ----

  /** A NUL-terminated UTF-8 copy of `s` in guest memory; the caller frees it. */
  cString(s: string): number {
    const max = s.length * 3 + 1;
    const p = this.inst.exports._malloc(max);
    if (p === 0) throw new MachineOutOfMemory();
    const u8 = this.view();
    const { written } = encoder.encodeInto(s, u8.subarray(p, p + max - 1));
    u8[p + written] = 0;
    return p;
  }

  readCString(p: number): string {
    const u8 = this.view();
    const end = u8.indexOf(0, p);
    return decoder.decode(u8.subarray(p, end));
  }

  newString(s: string): number {
    const chars = this.cString(s);
    try {
      return this.inst.exports._QTS_NewString(this.ctx, chars);
    } finally {
      this.inst.exports._free(chars);
    }
  }

  /** The string value of a guest value (ToString; the prelude only ever hands back strings). */
  getString(value: number): string {
    const chars = this.inst.exports._QTS_GetString(this.ctx, value);
    if (chars === 0) throw new MachineOutOfMemory();
    try {
      return this.readCString(chars);
    } finally {
      this.inst.exports._QTS_FreeCString(this.ctx, chars);
    }
  }

  typeOf(value: number): string {
    const p = this.inst.exports._QTS_Typeof(this.ctx, value);
    try {
      return this.readCString(p);
    } finally {
      this.inst.exports._free(p);
    }
  }

  /** A string property of a guest value, or "" (reading it may run guest getters: call under a deadline). */
  stringProp(obj: number, key: string): string {
    const k = this.newString(key);
    try {
      const v = this.inst.exports._QTS_GetProp(this.ctx, obj, k);
      try {
        if (this.inst.exports._QTS_ResolveException(this.ctx, v) !== 0) return "";
        return this.typeOf(v) === "string" ? this.getString(v) : "";
      } finally {
        this.free(v);
      }
    } finally {
      this.free(k);
    }
  }

  // ---- values and calls ----

  free(value: number): void {
    if (value !== 0) this.inst.exports._QTS_FreeValuePointer(this.ctx, value);
  }

  newHostFunction(name: string): number {
    const n = this.cString(name);
    try {
      return this.inst.exports._QTS_NewFunction(this.ctx, n, 3, 0, HOST_FUNCTION_ID);
    } finally {
      this.inst.exports._free(n);
    }
  }

  argString(argv: number, i: number): string {
    return this.getString(this.inst.exports._QTS_ArgvGetJSValueConstPointer(argv, i));
  }

  get undefinedValue(): number {
    return this.inst.exports._QTS_GetUndefined();
  }

  /** Evaluates global code (`compileOnly`: parse and compile, run nothing); the value or the guest's exception value (caller frees either). */
  eval(code: string, filename: string, compileOnly = false): Outcome {
    const x = this.inst.exports;
    const src = this.cString(code);
    const len = this.view().indexOf(0, src) - src;
    const file = this.cString(filename);
    try {
      // JS_EVAL_TYPE_GLOBAL, plus JS_EVAL_FLAG_COMPILE_ONLY (1 << 5) when asked
      return this.settle(x._QTS_Eval(this.ctx, src, len, file, 0, compileOnly ? 1 << 5 : 0));
    } finally {
      x._free(src);
      x._free(file);
    }
  }

  /** Calls `fn` with string arguments. */
  call(fn: number, args: string[]): Outcome {
    const x = this.inst.exports;
    const handles = args.map((a) => this.newString(a));
    const argv = x._malloc(4 * Math.max(1, handles.length));
    const words = new Uint32Array(this.view().buffer, argv, handles.length);
    handles.forEach((h, i) => (words[i] = h));
    // no finally: a call that threw out of wasm (stopped at its deadline, a trap) left QuickJS
    // mid-operation, and the instance is never used again, so nothing is freed in it
    const out = this.settle(x._QTS_Call(this.ctx, fn, this.undefinedValue, handles.length, argv));
    x._free(argv);
    for (const h of handles) this.free(h);
    return out;
  }

  /** Calls `fn` with value arguments (guest pointers, not freed here). */
  callValues(fn: number, args: number[]): Outcome {
    const x = this.inst.exports;
    const argv = x._malloc(4 * Math.max(1, args.length));
    try {
      new Uint32Array(this.view().buffer, argv, args.length).set(args);
      return this.settle(x._QTS_Call(this.ctx, fn, this.undefinedValue, args.length, argv));
    } finally {
      x._free(argv);
    }
  }

  private settle(result: number): Outcome {
    const error = this.inst.exports._QTS_ResolveException(this.ctx, result);
    if (error === 0) return { ok: true, value: result };
    this.free(result);
    return { ok: false, error };
  }

  /** Frees the context and runtime (not after a fault: a damaged runtime may abort on free). */
  dispose(): void {
    const x = this.inst.exports;
    if (this.dispatcher) this.free(this.dispatcher);
    x._QTS_FreeContext(this.ctx);
    x._QTS_FreeRuntime(this.rt);
  }
}

export type Outcome = { ok: true; value: number } | { ok: false; error: number };

/** QuickJS could not allocate what the host asked for (the sandbox is at its memory cap). */
export class MachineOutOfMemory extends Error {
  override readonly name = "MachineOutOfMemory";
  constructor() {
    super("the sandbox's memory is exhausted");
  }
}

function heapTop(u8: Uint8Array): number {
  if (layout?.brk) {
    const brk = new Uint32Array(u8.buffer, layout.brk, 1)[0]!;
    if (brk > 0 && brk <= u8.length) return Math.ceil(brk / PAGE) * PAGE;
  }
  // fallback: the last page that is not all zero
  const words = new Uint32Array(u8.buffer);
  for (let w = words.length - 1; w >= 0; w--) if (words[w] !== 0) return Math.ceil(((w + 1) * 4) / PAGE) * PAGE;
  return 0;
}
