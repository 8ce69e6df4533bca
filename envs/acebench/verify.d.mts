// Types of verify.mjs for the TypeScript that imports it (tests/unit/acebench.test.ts). verify.mjs
// stays plain JavaScript on purpose: it is the oracle, run with nothing compiled, and imports none
// of the ports it checks.
/** The ports in a fresh context (only what the tests read is typed). */
export function loadPorts(defaults: unknown): { AceRuntime: { PY_SYNTAX_KEYWORDS: string[] } } & Record<string, unknown>;
export function verify(golden: unknown, defaults: unknown, answers: unknown): { stats: Record<string, number>; problems: string[] };
export function answersFromBundles(scenarioFiles: string[]): Record<string, unknown>;
/** One message of several calls through the env as the bridge runs an action (its start, each call, its end): each call's text shown, or why it did not run. */
export function runMessage(env: unknown, calls: { name: string; args: unknown }[]): ({ text: string; own: string } | { thrown: string })[];
