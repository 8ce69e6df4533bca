// Types of verify.mjs for the TypeScript that imports it (tests/unit/bfcl.test.ts). verify.mjs
// stays plain JavaScript on purpose: it is the oracle, run as `node envs/bfcl/verify.mjs` with
// nothing compiled, and imports none of the ports it checks.
export function verify(golden: unknown): { stats: Record<string, number>; problems: string[] };
