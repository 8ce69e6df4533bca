/**
 * The module a worker thread runs: `name.js` next to `base` (the caller's import.meta.url) in the
 * built package, or `name-dev.mjs` when the caller itself runs from the TypeScript sources (vitest,
 * tsx): that entry registers tsx inside the thread, then loads `name.ts`.
 */
export function workerModule(base: string, name: string): URL {
  return new URL(base.endsWith(".ts") ? `./${name}-dev.mjs` : `./${name}.js`, base);
}
