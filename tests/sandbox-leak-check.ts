// Fails every test file that ends holding QuickJS resources (vitest setupFiles). Modelled on
// quickjs-emscripten's TestQuickJSWASMModule/assertNoMemoryAllocated: its test module keeps every
// runtime and context made and asserts at the end that all were disposed; here the ledger is kept by
// the code itself (quickjs-machine.ts counts instances made and not dropped; SandboxHost notes hosts
// not disposed, and hosts disposed while their sandboxes were not), so the check also sees instances
// held by a pool no one owns. Registered before the file's own hooks, so it runs after them (vitest
// runs after-hooks in stack order): a file's afterAll may close its runtimes and dispose its hosts.
import { afterAll } from "vitest";
import { liveInstances } from "../bridge/core/sandbox/quickjs-machine.js";
import { SandboxHost } from "../bridge/core/sandbox/sandbox-host.js";

/** What this thread still holds: one line per leak, empty when clean. */
export function sandboxLeaks(): string[] {
  const { undisposed, disposedWithLive } = SandboxHost.leaks();
  const out: string[] = [];
  for (const at of undisposed) out.push(`a SandboxHost was never disposed (made at ${at}): close the runtime or engine that owns it, or dispose it`);
  for (const at of disposedWithLive) out.push(`a SandboxHost was disposed with sandboxes its owners never disposed: ${at} (close every episode and session)`);
  const n = liveInstances();
  if (n > 0) out.push(`${n} QuickJS wasm instance${n === 1 ? " is" : "s are"} still held (pooled or attached) at the end of the file: a pool outlives its host, or a sandbox was not disposed`);
  return out;
}

afterAll(async () => {
  // a host's background refill may be one instantiation away from noticing it was disposed
  await new Promise((r) => setImmediate(r));
  const leaks = sandboxLeaks();
  if (leaks.length === 0) return;
  SandboxHost.forgetLeaks();
  throw new Error(`QuickJS resources leaked by this test file:\n- ${leaks.join("\n- ")}`);
});
