// Types of verify.mjs for the TypeScript that imports it (tests/unit/acebench.test.ts). verify.mjs
// stays plain JavaScript on purpose: it is the oracle, run with nothing compiled, and imports none
// of the ports it checks.
export function loadPorts(defaults: unknown): unknown;
export function verify(golden: unknown, defaults: unknown, answers: unknown): { stats: Record<string, number>; problems: string[] };
export function answersFromBundles(scenarioFiles: string[]): Record<string, unknown>;
