import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { afterAll, beforeAll, expect, test } from "vitest";
import { EnvRuntime } from "../../bridge/core/engine/env-runtime.js";
import { addFuelChecks, FUEL_IMPORT, WasmRewriteError } from "../../bridge/core/sandbox/wasm-fuel.js";
import { FIXTURES } from "../helpers.js";

const require = createRequire(import.meta.url);

/**
 * A module by hand: import `env.f`, `run(n)` (function 1) loops `n = n - step()` until n is 0,
 * `step()` (function 2, a leaf) returns 1; both exported (`run`, `f2`).
 */
function loopModule(): Uint8Array<ArrayBuffer> {
  const run = [0x00, 0x03, 0x40, 0x20, 0x00, 0x10, 0x02, 0x6b, 0x22, 0x00, 0x0d, 0x00, 0x0b, 0x20, 0x00, 0x0b];
  const step = [0x00, 0x41, 0x01, 0x0b];
  const code = [0x02, run.length, ...run, step.length, ...step];
  return Uint8Array.from([
    0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00,
    0x01, 0x0a, 0x02, 0x60, 0x00, 0x01, 0x7f, 0x60, 0x01, 0x7f, 0x01, 0x7f, // types: () -> i32, (i32) -> i32
    0x02, 0x09, 0x01, 0x03, 0x65, 0x6e, 0x76, 0x01, 0x66, 0x00, 0x00, // import env.f: () -> i32
    0x03, 0x03, 0x02, 0x01, 0x00, // functions: run, step
    0x07, 0x0c, 0x02, 0x03, 0x72, 0x75, 0x6e, 0x00, 0x01, 0x02, 0x66, 0x32, 0x00, 0x02, // exports
    0x0a, code.length, ...code,
  ]);
}

test("a hand-made module: the loop asks the host for fuel, calls are renumbered past the new import, exports still work", () => {
  const plain = loopModule();
  expect(WebAssembly.validate(plain)).toBe(true);
  const fueled = addFuelChecks(plain, 10);
  expect(WebAssembly.validate(fueled)).toBe(true);
  const m = new WebAssembly.Module(fueled);
  expect(WebAssembly.Module.imports(m).map((i) => `${i.module}.${i.name}`)).toEqual(["env.f", `${FUEL_IMPORT.module}.${FUEL_IMPORT.name}`]);
  let asked = 0;
  const inst = new WebAssembly.Instance(m, { env: { f: () => 7 }, [FUEL_IMPORT.module]: { [FUEL_IMPORT.name]: () => (asked++, 10) } });
  const run = inst.exports.run as (n: number) => number;
  // run counts down by calling step (now function 2 + 1): the same answer as without the checks
  expect(run(100)).toBe(0);
  // 101 units: 100 iterations and the entry into run (step is a leaf: no check); the counter starts
  // at 10 and the host is asked each time it goes below zero, so once every 11 units
  expect(asked).toBe(Math.floor(101 / 11));
  expect((inst.exports.f2 as () => number)()).toBe(1);
  // the host stops a runaway loop by throwing from the fuel call
  const stopped = new WebAssembly.Instance(m, { env: { f: () => 7 }, [FUEL_IMPORT.module]: { [FUEL_IMPORT.name]: () => { throw new Error("deadline"); } } });
  expect(() => (stopped.exports.run as (n: number) => number)(1_000_000)).toThrow("deadline");
});

test("the pinned QuickJS build rewrites to a valid module, once only", () => {
  const bytes = readFileSync(require.resolve("@jitl/quickjs-wasmfile-release-sync/wasm"));
  const fueled = addFuelChecks(bytes);
  expect(WebAssembly.validate(fueled)).toBe(true);
  const imports = WebAssembly.Module.imports(new WebAssembly.Module(fueled));
  expect(imports.at(-1)).toEqual({ module: FUEL_IMPORT.module, name: FUEL_IMPORT.name, kind: "function" });
  expect(() => addFuelChecks(fueled)).toThrow(WasmRewriteError);
  expect(() => addFuelChecks(Uint8Array.from([1, 2, 3, 4, 5, 6, 7, 8]))).toThrow(WasmRewriteError);
});

// Guest code on this very thread (workers: 0): a native builtin that never polls QuickJS's
// interrupt handler is stopped at its deadline by the fuel checks, ends only its own episode, and
// leaves no hard stop, no restore and no lost co-tenant behind.
let rt: EnvRuntime;
beforeAll(async () => {
  rt = await EnvRuntime.start({ envs: [FIXTURES, join(FIXTURES, "..", "hostile")], workers: 0 });
});
afterAll(() => rt.close());

test("in this thread: a native hang ends its own episode with env_timeout; the co-tenant goes on untouched", async () => {
  const a = await rt.reset("notes-1", 0);
  const s1 = await rt.step(a.episode_id, { name: "add_note", arguments: { user_id: "u2", title: "todo", body: "call mom" } });
  for (const tool of ["native_hang", "spin"]) {
    const b = await rt.reset("hostile-1", 1);
    const hung = await rt.step(b.episode_id, { name: tool, arguments: {} });
    expect(hung).toMatchObject({ terminated: true, reward: 0, info: { error: { code: "env_timeout" }, end_reason: "env_fault" } });
    // the same text whichever stopped it (the interrupt handler for spin, the fuel check for the
    // native hang: no watchdog was involved, see hard_stops below)
    expect(hung.info.error!.message).toBe("call: exceeded the 300 ms deadline (callTimeoutMs)");
    await expect(rt.step(b.episode_id, { name: "ping", arguments: {} })).rejects.toMatchObject({ code: "episode_done" });
  }
  expect(rt.stats()).toMatchObject({ hard_stops: 0, restored: 0, lost: 0 });
  expect(JSON.parse(await rt.state(a.episode_id)).notes.n2.title).toBe("todo");
  expect(rt.stateHash(a.episode_id)).toBe(s1.info.state_hash);
  const s2 = await rt.step(a.episode_id, { name: "delete_note", arguments: { note_id: "n1" } });
  expect(s2.info.state_hash).not.toBe(s1.info.state_hash);
  expect((await rt.finish(a.episode_id)).reward).toBe(1);
  // a new episode of the hostile env gets a fresh sandbox and answers
  const c = await rt.reset("hostile-1", 2);
  expect((await rt.step(c.episode_id, { name: "ping", arguments: {} })).observation.content).toBe('"pong"');
});
