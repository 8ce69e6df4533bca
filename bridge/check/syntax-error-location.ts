import { newCappedModule } from "../sandbox/quickjs-loader.js";

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
  const { module } = await newCappedModule(COMPILE_MEMORY_BYTES);
  const runtime = module.newRuntime();
  const deadline = performance.now() + COMPILE_DEADLINE_MS;
  runtime.setInterruptHandler(() => performance.now() > deadline);
  const context = runtime.newContext();
  try {
    const result = context.evalCode(source, filename, { type: "global", compileOnly: true });
    if (!result.error) {
      result.value.dispose();
      return null;
    }
    const err = context.dump(result.error) as { name?: string; message?: string; stack?: string; lineNumber?: number };
    result.error.dispose();
    const at = /:(\d+):(\d+)/.exec(err.stack ?? "");
    const line = at ? Number(at[1]) : (err.lineNumber ?? 0);
    const column = at ? Number(at[2]) : 0;
    const raw = source.split("\n")[line - 1] ?? "";
    return { line, column, message: `${err.name ?? "SyntaxError"}: ${err.message ?? ""}`, text: raw.length > 160 ? `${raw.slice(0, 160)}…` : raw };
  } finally {
    context.dispose();
    runtime.dispose();
  }
}
