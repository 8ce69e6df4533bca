/**
 * A tool result `{success: false, ...}`: the env refused the call (the convention synth's code
 * prompts ask for, and what `envscaler check` lists as a reference solution's refusals). A result
 * that is not JSON (a python-format env's "Error: order not found") is not one.
 */
export function isRefusal(text: string): boolean {
  try {
    const value: unknown = JSON.parse(text);
    return typeof value === "object" && value !== null && (value as { success?: unknown }).success === false;
  } catch {
    return false;
  }
}
