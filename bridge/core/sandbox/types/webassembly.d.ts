// Node has WebAssembly at runtime, but neither @types/node nor lib.es* declare it (only lib.dom does).
// The few members this project uses:
declare namespace WebAssembly {
  class Module {
    constructor(bytes: BufferSource);
  }
  interface MemoryDescriptor {
    initial: number;
    maximum?: number;
  }
  class Memory {
    constructor(descriptor: MemoryDescriptor);
    readonly buffer: ArrayBuffer;
    grow(delta: number): number;
  }
  function compile(bytes: BufferSource): Promise<Module>;
}
type BufferSource = ArrayBufferView | ArrayBuffer;
