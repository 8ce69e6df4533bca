import { existsSync } from "node:fs";
import { join, resolve } from "node:path";

/**
 * Data the tests read from outside the repository (never committed): the `shared` folder next
 * to the checkout (`../shared`), or wherever `ENVSCALER_SHARED` points. A fresh clone has no
 * such folder, so a test that needs it skips, its name saying what to point where. CI must not
 * skip silently: scripts/test-all.sh sets `ENVSCALER_SHARED_REQUIRED=1` when the folder is
 * there, and then a missing file fails the suite instead of skipping it.
 */
export const SHARED = resolve(process.env.ENVSCALER_SHARED ?? join(import.meta.dirname, "..", "..", "shared"));

export function sharedPath(...parts: string[]): string {
  return join(SHARED, ...parts);
}

/** Whether every path exists; with ENVSCALER_SHARED_REQUIRED=1 a missing one throws instead. */
export function haveShared(...paths: string[]): boolean {
  const missing = paths.filter((p) => !existsSync(p));
  if (missing.length === 0) return true;
  if (process.env.ENVSCALER_SHARED_REQUIRED === "1") {
    throw new Error(`ENVSCALER_SHARED_REQUIRED=1 but ${missing.join(", ")} is missing (ENVSCALER_SHARED=${SHARED})`);
  }
  return false;
}

/** The part of a test's name that says what it reads and how to point it there. */
export function needsShared(path: string): string {
  return `needs ${path}; set ENVSCALER_SHARED to the shared folder, default ../shared next to the checkout`;
}
