import { join } from "node:path";
import { afterAll } from "vitest";
import { SandboxHost, type SandboxHostOptions } from "../bridge/core/sandbox/sandbox-host.js";
import { EnvManifest } from "../envs/format/bundle-schema.js";
import { EnvBundle, loadBundle } from "../envs/format/load-bundle.js";

export const FIXTURES = join(import.meta.dirname, "fixtures", "envs");
export const notesBundle = (): EnvBundle => loadBundle(join(FIXTURES, "notes"));

/** A bundle built in memory from a class source: one task scenario `<id>-1`, every tool taking any arguments. */
export function inlineBundle(id: string, className: string, source: string, tools: string[], state: Record<string, unknown>, limits: Record<string, number> = {}): EnvBundle {
  const schemas = tools.map((name) => ({ type: "function" as const, function: { name, description: name, parameters: { type: "object" as const, properties: {}, additionalProperties: true } } }));
  const manifest = EnvManifest.parse({ format: "envscaler.env/v1", id: `${id}-v1`, name: id, introduction: id, class_name: className, tools: schemas, default_state: state, limits });
  const scenarios = new Map([[`${id}-1`, { id: `${id}-1`, env_id: `${id}-v1`, mode: "task" as const, task: "t", checks: [], max_steps: 500 }]]);
  return new EnvBundle(`/virtual/${id}`, manifest, source, state, scenarios as never, `${id}-hash`);
}

/**
 * A sandbox host for a test file's episodes and sessions, disposed after the file's tests (the
 * leak check, tests/sandbox-leak-check.ts, then fails the file if a sandbox was left undisposed).
 */
export function fileSandboxHost(options: SandboxHostOptions = {}): SandboxHost {
  const caller = (new Error().stack ?? "").split("\n")[2]?.trim().replace(/^at /, "") ?? "a test file";
  const host = new SandboxHost({ label: `fileSandboxHost() at ${caller}`, ...options });
  afterAll(() => host.dispose());
  return host;
}
