import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import * as releaseSync from "@jitl/quickjs-wasmfile-release-sync";
import { newQuickJSWASMModuleFromVariant, newVariant, type QuickJSSyncVariant, type QuickJSWASMModule } from "quickjs-emscripten-core";
import { memoryPages } from "./limits.js";

const require = createRequire(import.meta.url);
// the package's types describe a default export, but under NodeNext the namespace object may wrap it
const variant = ((releaseSync as { default?: unknown }).default ?? releaseSync) as QuickJSSyncVariant;
let compiled: Promise<WebAssembly.Module> | undefined;

/** The QuickJS wasm, compiled once per thread; instantiating it again costs under a millisecond. */
function compiledWasm(): Promise<WebAssembly.Module> {
  compiled ??= readFile(require.resolve("@jitl/quickjs-wasmfile-release-sync/wasm")).then((bytes) => WebAssembly.compile(bytes));
  return compiled;
}

export interface CappedModule {
  module: QuickJSWASMModule;
  memory: WebAssembly.Memory;
  maxBytes: number;
}

/**
 * A fresh QuickJS instance with its own linear memory capped at `maxBytes`. QuickJS's own
 * setMemoryLimit does not bound total memory in this build (it counts 8 bytes per block), so the
 * WebAssembly.Memory maximum is the real limit; one instance per trust domain also means a guest
 * bug or an abort can only poison its own instance.
 */
export async function newCappedModule(maxBytes: number): Promise<CappedModule> {
  const pages = memoryPages(maxBytes);
  const memory = new WebAssembly.Memory({ initial: 256, maximum: pages });
  const custom = newVariant(variant, { wasmModule: await compiledWasm(), wasmMemory: memory });
  const module = await newQuickJSWASMModuleFromVariant(custom);
  return { module, memory, maxBytes: pages * 65536 };
}
