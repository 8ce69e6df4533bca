import { ProtocolError } from "../../../protocol/error-codes.js";
import type { EnvRegistry } from "../../../envs/format/registry.js";

/**
 * Every "unknown …" the fronts answer is raised here, so each reads the same on every front (its
 * code mapped by failure-table.ts). The runtime raises its own for what it alone can know (a
 * snapshot lost with its engine worker, an episode closed under a request); the table maps those.
 */

/** The scenario `id`, or `unknown_scenario` (with `detail`, e.g. what a front serves instead). */
export function requireScenario(registry: Pick<EnvRegistry, "scenario">, id: string): NonNullable<ReturnType<EnvRegistry["scenario"]>> {
  const found = registry.scenario(id);
  if (!found) throw unknownScenario(id);
  return found;
}

export function unknownScenario(id: string, detail?: string): ProtocolError {
  return new ProtocolError("unknown_scenario", detail ?? `no scenario ${id}`);
}

/** The snapshot's info, or `unknown_snapshot`. */
export function requireSnapshot<T>(info: T | null | undefined, id: string): T {
  if (info === null || info === undefined) throw unknownSnapshot(id);
  return info;
}

export function unknownSnapshot(id: string): ProtocolError {
  return new ProtocolError("unknown_snapshot", `no snapshot ${id} (dropped, or the session it was taken in closed)`);
}

/**
 * A session id a front does not hold: `session_closed` when it remembers closing it (and why),
 * `session_lost` when it went with an earlier process (`lost` says how), else `unknown_session`.
 * `noun`: what the front calls a session (the UI names its sessions by their episode).
 */
export function sessionGone(id: string, why: string | undefined, where: string, lost?: string, noun = "session"): ProtocolError {
  if (why !== undefined) return sessionClosed(`${noun} ${id} ${why}`);
  if (lost !== undefined) return new ProtocolError("session_lost", `${noun} ${id} was lost: ${lost}`);
  return new ProtocolError("unknown_session", `no ${noun} ${id}${where}`);
}

/** A session the front still knows but that is closed (or closed under a request): `message` says which and why. */
export function sessionClosed(message: string): ProtocolError {
  return new ProtocolError("session_closed", message);
}
