import { randomBytes } from "node:crypto";
import { ProtocolError } from "../../../protocol/error-codes.js";
import type { EnvRuntime } from "../../core/engine/env-runtime.js";
import { SessionService, type Session as ServiceSession } from "../../core/sessions/session-service.js";

/** A wire session: the service's common part, nothing of its own. */
export type Session = ServiceSession<null>;

/** How many closed session ids a replica remembers, so a late request learns why its session is gone. */
const TOMBSTONES = 100_000;

/**
 * The sessions of one replica, on the session service: unguessable ids that name their replica
 * and process (`s-REPLICA-INSTANCE-…`, so a session of an earlier process of this replica slot
 * reads as `session_lost`), `max_sessions` and `max_sessions_per_client` (owner: the ZeroMQ
 * routing identity), and the wire's wording of each refusal.
 */
export class WireSessions extends SessionService<null> {
  private readonly prefix: string;

  constructor(runtime: EnvRuntime, replica: number, instance: string, previousInstances: readonly string[], maxSessions: number, maxPerClient = maxSessions) {
    super({
      runtime,
      maxSessions,
      maxPerOwner: maxPerClient,
      closedMemory: TOMBSTONES,
      words: {
        where: ` on replica ${replica}`,
        closed: (why) => `was ${why}`,
        lost: (id) => {
          const m = /^s-(\d+)-([0-9a-f]+)-/.exec(id);
          return m && Number(m[1]) === replica && previousInstances.includes(m[2]!) ? `replica ${replica} restarted (its process died) and sessions do not survive that` : undefined;
        },
        refuse: (scope) =>
          scope === "total"
            ? new ProtocolError("too_many_sessions", `this replica holds its limit of ${maxSessions} sessions (max_sessions); close some`)
            : new ProtocolError("too_many_sessions", `this client holds its limit of ${maxPerClient} sessions on this replica (max_sessions_per_client); close some`),
      },
    });
    this.prefix = `s-${replica}-${instance}-`;
  }

  /** Opens a session for the client `owner` under a new id. */
  openFor(owner: string): Session {
    return this.open(this.prefix + randomBytes(16).toString("hex"), owner, null);
  }
}
