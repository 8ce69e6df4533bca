import type { IncomingMessage } from "node:http";
import type { ClosedResult } from "../../core/sessions/closed-results.js";
import { requireSnapshot, sessionClosed } from "../../core/sessions/unknowns.js";
import { McpHttpError } from "./mcp-error.js";
import type { EpisodeScore } from "./mcp-episode.js";
import type { ControlSession } from "./mcp-sessions.js";
import { ProtocolError } from "../../../protocol/error-codes.js";

/** Where a fork starts: a live session's episode now, or a snapshot. */
export type ForkSource = { session: ControlSession } | { snapshot_id: string };

export interface ControlContext {
  /** A live session by MCP session id or rollout tag; throws `unknown_session` / `session_closed`. */
  find(idOrRollout: string): ControlSession;
  list(): ControlSession[];
  /** What is kept of a closed session (by id or rollout tag), or null when it was dropped or never existed. */
  closedResult(idOrRollout: string): ClosedResult<EpisodeScore> | null;
  close(id: string, why: string): Promise<void>;
  stats(): Record<string, unknown>;
  /** Opens a session (pending until a client connects to it) whose episode continues from `source`. */
  fork(source: ForkSource, rollout: string | null): Promise<Record<string, unknown>>;
  snapshotInfo(id: string): Record<string, unknown> | null;
  dropSnapshot(id: string): Promise<boolean>;
}

function status(s: ControlSession): Record<string, unknown> {
  const ep = s.extra.episode;
  const st = ep.started;
  return {
    session_id: s.id,
    rollout: s.rollout,
    scenario_id: st?.scenario_id ?? null,
    seed: st?.seed ?? null,
    mode: st?.mode ?? null,
    episode_id: ep.episodeId,
    steps: ep.steps,
    ended: ep.ended,
    connected: !s.extra.pending,
    idle_s: Math.round((Date.now() - ep.lastUsed) / 1000),
    age_s: Math.round((Date.now() - s.opened) / 1000),
  };
}

/**
 * The trainer's side of a session, apart from the agent's tools (docs/mcp.md, "Control routes"):
 *
 *   GET    /control/stats                     sessions, limits, runtime counters
 *   GET    /control/sessions                  every live session's status
 *   GET    /control/sessions/ID               one session's status (ID: MCP session id or rollout tag)
 *   POST   /control/sessions/ID/finish        end and score: {reward, reward_info, …}; body {"message": final reply}?
 *   GET    /control/sessions/ID/reward        the score of an ended episode (`episode_running` before)
 *   GET    /control/sessions/ID/state         {state, state_hash} now
 *   GET    /control/sessions/ID/inputs        what replays the episode exactly
 *   POST   /control/sessions/ID/snapshot      freeze the episode now: {snapshot_id, step, bytes, state_hash}
 *   POST   /control/sessions/ID/fork          a new session continuing from this one now; body {"rollout": tag}?
 *   POST   /control/sessions/ID/restore       back to a snapshot's point; body {"snapshot_id"}
 *   DELETE /control/sessions/ID               close: the episode ends and its sandbox is freed
 *
 * After a session closes, its status, `reward` and `finish` (without a message) still answer from
 * what was kept of it (closed-results.ts), for a bounded time; everything else is `session_closed`.
 *   GET    /control/snapshots/SNAP            what the snapshot is of
 *   POST   /control/snapshots/SNAP/fork       a new session continuing from the snapshot; body {"rollout": tag}?
 *   DELETE /control/snapshots/SNAP            drop it: {dropped}
 */
export async function controlRoute(ctx: ControlContext, req: IncomingMessage, parts: string[], body: unknown): Promise<unknown> {
  const method = req.method ?? "GET";
  if (parts.length === 1 && parts[0] === "stats" && method === "GET") return ctx.stats();
  if (parts[0] === "snapshots") return snapshotRoute(ctx, method, parts, body);
  if (parts[0] !== "sessions") throw new McpHttpError("not_found", `no control route /control/${parts.join("/")}`);
  if (parts.length === 1 && method === "GET") return { sessions: ctx.list().map(status) };
  let id: string;
  try {
    id = decodeURIComponent(parts[1] ?? "");
  } catch {
    throw new McpHttpError("bad_request", `not a valid session id in the path: ${parts[1]}`);
  }
  const action = parts[2];
  if (parts.length > 3 || !id) throw new McpHttpError("not_found", `no control route /control/${parts.join("/")}`);
  let s: ControlSession;
  try {
    s = ctx.find(id);
  } catch (e) {
    const kept = e instanceof ProtocolError && e.code === "session_closed" ? ctx.closedResult(id) : null;
    if (!kept) throw e;
    return closedRoute(kept, `${method} ${action ?? ""}`, body, e as ProtocolError);
  }
  const base = { session_id: s.id, rollout: s.rollout, scenario_id: s.extra.episode.started?.scenario_id ?? null, seed: s.extra.episode.started?.seed ?? null };
  switch (`${method} ${action ?? ""}`) {
    case "GET ":
      return status(s);
    case "DELETE ":
      await ctx.close(s.id, "closed by the trainer (control route)");
      return { closed: true, ...base };
    case "POST finish": {
      const message = fields(body).message;
      if (message !== undefined && typeof message !== "string") throw new McpHttpError("bad_request", "finish: message must be a string");
      return { ...base, ...(await s.extra.episode.finish(message)) };
    }
    case "GET reward": {
      const score = s.extra.episode.score();
      if (!score) throw new McpHttpError("episode_running", "the episode has not ended; POST …/finish ends and scores it");
      return { ...base, ...score };
    }
    case "GET state":
      return { ...base, ...(await s.extra.episode.state()) };
    case "GET inputs":
      return { ...base, inputs: s.extra.episode.inputs() };
    case "POST snapshot":
      return { ...base, ...(await s.extra.episode.snapshot()) };
    case "POST fork":
      return ctx.fork({ session: s }, rolloutOf(body));
    case "POST restore": {
      const snapshotId = fields(body).snapshot_id;
      if (typeof snapshotId !== "string" || !snapshotId) throw new McpHttpError("bad_request", "restore: the body needs snapshot_id (a string)");
      const r = await s.extra.episode.restore(snapshotId);
      return { ...base, seed: r.seed, step: r.step, state_hash: r.state_hash, restored_from: { snapshot_id: snapshotId, step: r.forked_from.step } };
    }
    default:
      throw new McpHttpError("not_found", `no control route ${method} /control/${parts.join("/")}`);
  }
}

/** The routes that still answer once the session closed: its status, its score, `finish` as a read of it. */
function closedRoute(r: ClosedResult<EpisodeScore>, route: string, body: unknown, closedError: ProtocolError): unknown {
  const base = { session_id: r.session_id, rollout: r.rollout, scenario_id: r.scenario_id, seed: r.seed };
  const closed = { closed: r.closed, closed_s_ago: Math.round((Date.now() - r.closed_at) / 1000) };
  const noScore = () => sessionClosed(`session ${r.session_id} closed before its episode ended (${r.closed}), so it has no score: end it with POST …/finish (or a terminal step) before the session closes`);
  switch (route) {
    case "GET ":
      return { ...base, episode_id: r.episode_id, steps: r.steps, ended: r.score !== null, connected: false, ...closed };
    case "GET reward":
      if (!r.score) throw noScore();
      return { ...base, ...r.score, ...closed };
    case "POST finish": {
      const message = fields(body).message;
      if (message !== undefined) throw sessionClosed(`session ${r.session_id} is closed (${r.closed}): a final message cannot be sent now${r.score ? "; GET …/reward reads the score it ended with" : ""}`);
      if (!r.score) throw noScore();
      return { ...base, ...r.score, ...closed };
    }
    default:
      throw closedError;
  }
}

/** A route's body: none, or a JSON object; anything else (an array, a number, a string) is `bad_request`, never read as "no fields". */
function fields(body: unknown): Record<string, unknown> {
  if (body === undefined || body === null) return {};
  if (typeof body !== "object" || Array.isArray(body)) throw new McpHttpError("bad_request", "the body must be a JSON object (or empty)");
  return body as Record<string, unknown>;
}

function rolloutOf(body: unknown): string | null {
  const rollout = fields(body).rollout;
  if (rollout === undefined || rollout === null) return null;
  if (typeof rollout !== "string" || rollout.trim() === "") throw new McpHttpError("bad_request", "fork: rollout must be a non-empty string");
  return rollout.trim();
}

function snapshotRoute(ctx: ControlContext, method: string, parts: string[], body: unknown): unknown {
  let id: string;
  try {
    id = decodeURIComponent(parts[1] ?? "");
  } catch {
    throw new McpHttpError("bad_request", `not a valid snapshot id in the path: ${parts[1]}`);
  }
  if (!id || parts.length > 3) throw new McpHttpError("not_found", `no control route /control/${parts.join("/")}`);
  switch (`${method} ${parts[2] ?? ""}`) {
    case "GET ": {
      return { snapshot_id: id, ...requireSnapshot(ctx.snapshotInfo(id), id) };
    }
    case "POST fork":
      return ctx.fork({ snapshot_id: id }, rolloutOf(body));
    case "DELETE ":
      return ctx.dropSnapshot(id).then((dropped) => ({ snapshot_id: id, dropped }));
    default:
      throw new McpHttpError("not_found", `no control route ${method} /control/${parts.join("/")}`);
  }
}
