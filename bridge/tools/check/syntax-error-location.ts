import { DEFAULT_FUEL_ALLOWANCE } from "../../core/sandbox/wasm-fuel.js";
import { dropInstance, Machine, newBlankInstance } from "../../core/sandbox/quickjs-machine.js";

export interface SyntaxErrorLocation {
  line: number;
  column: number;
  message: string;
  /** The offending source line, trimmed to a readable length. */
  text: string;
}

/** Compiling is cheap; these bound a hostile source anyway (it is parsed, never run). */
const COMPILE_MEMORY_BYTES = 64 << 20;
const COMPILE_DEADLINE_MS = 5000;

/**
 * Where a source file's syntax error is, for `envscaler check`: the sandbox reports a load failure
 * as "SyntaxError: <message>", without the position. The source is only compiled (never run), in
 * a QuickJS instance of its own with capped memory and a deadline, and QuickJS's `fileName:line:column`
 * is read from the error. null: the source compiles (the load failed for another reason).
 */
export async function syntaxErrorLocation(source: string, filename: string): Promise<SyntaxErrorLocation | null> {
  const deadline = performance.now() + COMPILE_DEADLINE_MS;
  // a throwaway instance of its own: no prelude, no host function, never recycled
  const late = () => performance.now() > deadline;
  const machine = Machine.create(await newBlankInstance(COMPILE_MEMORY_BYTES), 256 * 1024, {
    hostCall: () => 0,
    shouldInterrupt: late,
    fuel: () => {
      if (late()) throw new Error("compiling ran past its deadline");
      return DEFAULT_FUEL_ALLOWANCE;
    },
  });
  try {
    return locate(machine, source, filename);
  } finally {
    dropInstance(machine.instance); // never recycled; given up here, not left to whoever drops the last reference
  }
}

function locate(machine: Machine, source: string, filename: string): SyntaxErrorLocation | null {
  let result;
  try {
    result = machine.eval(source, filename, true);
  } catch {
    return null; // the parser itself was stopped at the deadline: no position to report
  }
  if (result.ok) {
    machine.free(result.value);
    return null;
  }
  const name = machine.stringProp(result.error, "name");
  const message = machine.stringProp(result.error, "message");
  const stack = machine.stringProp(result.error, "stack");
  machine.free(result.error);
  const at = /:(\d+):(\d+)/.exec(stack);
  const line = at ? Number(at[1]) : 0;
  const column = at ? Number(at[2]) : 0;
  const raw = source.split("\n")[line - 1] ?? "";
  return { line, column, message: `${name || "SyntaxError"}: ${message}`, text: raw.length > 160 ? `${raw.slice(0, 160)}…` : raw };
}
