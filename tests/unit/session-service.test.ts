// The session service (bridge/core/sessions/session-service.ts) on its own, over a fake runtime
// that records what it is asked: the ordering within a session, the idle reaper on a fake clock,
// owners and limits, what a closed, lost or unknown session answers, the session → episode binding.
import { afterEach, describe, expect, test, vi } from "vitest";
import { ProtocolError } from "../../protocol/error-codes.js";
import { SessionService, type SessionServiceOptions } from "../../bridge/core/sessions/session-service.js";
import { WireSessions } from "../../bridge/fronts/zmq/wire-sessions.js";

/** A runtime that only records: which episodes were closed, which snapshots taken and dropped. */
function fakeRuntime() {
  const closed: string[] = [];
  const dropped: string[] = [];
  let snaps = 0;
  const runtime: SessionServiceOptions["runtime"] = {
    closeEpisode: (id: string) => {
      closed.push(id);
      return id === "ep-broken" ? Promise.reject(new Error("worker gone")) : Promise.resolve();
    },
    snapshot: (id: string) => Promise.resolve({ snapshot_id: `snap-${++snaps}-${id}`, step: 0, bytes: 1, state_hash: "h" }),
    dropSnapshot: (id: string) => {
      dropped.push(id);
      return Promise.resolve(true);
    },
  };
  return { runtime, closed, dropped };
}

function service(over: Partial<SessionServiceOptions> = {}) {
  const rt = fakeRuntime();
  const sessions = new SessionService<{ note: string }>({
    runtime: rt.runtime,
    maxSessions: 3,
    maxPerOwner: 2,
    closedMemory: 100,
    words: {
      where: " here",
      closed: (why) => `was ${why}`,
      refuse: (scope, open, max) => new ProtocolError("too_many_sessions", `${scope}: ${open} of ${max}`),
    },
    ...over,
  });
  return { sessions, ...rt };
}

function deferred() {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

async function codeOf(p: Promise<unknown> | (() => unknown)): Promise<{ code: string; message: string }> {
  try {
    await (typeof p === "function" ? p() : p);
  } catch (e) {
    return { code: (e as ProtocolError).code, message: (e as Error).message };
  }
  throw new Error("expected a failure");
}

afterEach(() => {
  vi.useRealTimers();
});

describe("ordering", () => {
  test("a session's requests run one at a time in arrival order; another session's do not wait", async () => {
    const { sessions } = service();
    sessions.open("a", "c1", { note: "" });
    sessions.open("b", "c1", { note: "" });
    const order: string[] = [];
    const gate = deferred();
    const first = sessions.run("a", async () => {
      order.push("a1 start");
      await gate.promise;
      order.push("a1 end");
    });
    const second = sessions.run("a", () => void order.push("a2"));
    const other = sessions.run("b", () => void order.push("b1"));
    await other;
    // b ran while a's first request was still waiting; a's second has not run
    expect(order).toEqual(["a1 start", "b1"]);
    gate.resolve();
    await Promise.all([first, second]);
    expect(order).toEqual(["a1 start", "b1", "a1 end", "a2"]);
  });

  test("a request that waited behind the close finds the session closed, and why", async () => {
    const { sessions, closed } = service();
    const s = sessions.open("a", "c1", { note: "" }, "ep-1");
    const gate = deferred();
    const started = deferred();
    const running = sessions.run("a", () => {
      started.resolve();
      return gate.promise;
    });
    await started.promise;
    // queued behind the running request, then the close comes from outside the queue (a reaper, a stop)
    const late = codeOf(sessions.run("a", () => "ran"));
    const closing = sessions.close("a", "closed by the client");
    // the episode is not closed under the request still running
    expect(closed).toEqual([]);
    gate.resolve();
    await running;
    expect(await late).toEqual({ code: "session_closed", message: "session a was closed by the client" });
    await closing;
    expect(closed).toEqual(["ep-1"]);
    expect(s.episodeId).toBeNull();
    // closing again closes nothing twice
    await sessions.close("a", "again");
    expect(closed).toEqual(["ep-1"]);
  });

  test("maxQueued bounds what waits on one session: one more is overloaded", async () => {
    const { sessions } = service({ maxQueued: 2 });
    sessions.open("a", "c1", { note: "" });
    const gate = deferred();
    const held = [sessions.run("a", () => gate.promise), sessions.run("a", () => undefined)];
    expect((await codeOf(sessions.run("a", () => undefined))).code).toBe("overloaded");
    gate.resolve();
    await Promise.all(held);
    await sessions.run("a", () => undefined);
  });
});

describe("session → episode", () => {
  test("a reset in the session ends the previous episode first: forgotten at once, closed without waiting, a failed close only reported", async () => {
    const { sessions, closed } = service();
    const s = sessions.open("a", "c1", { note: "" }, "ep-broken");
    const failures: string[] = [];
    expect(sessions.endEpisode(s, (_e, id) => failures.push(id))).toBe("ep-broken");
    expect(s.episodeId).toBeNull();
    expect(closed).toEqual(["ep-broken"]);
    await new Promise((r) => setImmediate(r));
    expect(failures).toEqual(["ep-broken"]);
    // a session with no episode has nothing to end
    expect(sessions.endEpisode(s, () => failures.push("again"))).toBeNull();
    expect(closed).toEqual(["ep-broken"]);
  });

  test("undo points where the front offers undo: taken through the runtime, dropped from a point on", async () => {
    const { sessions, dropped } = service({ undo: true });
    const s = sessions.open("a", "c1", { note: "" }, "ep-1");
    await s.undo!.take("ep-1", 0);
    await s.undo!.take("ep-1", 1);
    expect(s.undo!.steps).toEqual([0, 1]);
    await s.undo!.dropFrom(1);
    expect(s.undo!.steps).toEqual([0]);
    expect(dropped).toEqual(["snap-2-ep-1"]);
    expect(service().sessions.open("b", "c1", { note: "" }).undo).toBeNull();
  });
});

describe("idle reaper", () => {
  test("closes a session idle past the timeout, not a busy one, not a kept one, and not one in use", async () => {
    vi.useFakeTimers();
    const { sessions, closed } = service({ maxSessions: 10, maxPerOwner: 10 });
    sessions.open("idle", "c1", { note: "" }, "ep-idle");
    sessions.open("used", "c1", { note: "" }, "ep-used");
    sessions.open("kept", "c1", { note: "keep" }, "ep-kept");
    sessions.open("busy", "c1", { note: "" }, "ep-busy");
    const gate = deferred();
    const busy = sessions.run("busy", () => gate.promise);
    const reaped: string[] = [];
    let passes = 0;
    sessions.startReaper(
      1000,
      async (s) => {
        reaped.push(s.id);
        await sessions.close(s.id, "closed by the idle reaper");
      },
      { kept: (s) => s.extra.note === "keep", after: () => Promise.resolve(void passes++) },
    );
    await vi.advanceTimersByTimeAsync(600);
    sessions.use("used");
    await vi.advanceTimersByTimeAsync(700);
    // 1.3 s: "idle" is past 1 s unused; "used" was used 0.7 s ago
    expect(reaped).toEqual(["idle"]);
    expect(closed).toEqual(["ep-idle"]);
    expect(passes).toBeGreaterThan(0);
    expect(await codeOf(() => sessions.get("idle"))).toEqual({ code: "session_closed", message: "session idle was closed by the idle reaper" });
    await vi.advanceTimersByTimeAsync(5000);
    // "used" goes once idle too; the busy one stays while its request runs, the kept one stays
    expect(reaped).toEqual(["idle", "used"]);
    gate.resolve();
    await busy;
    await vi.advanceTimersByTimeAsync(2000);
    expect(reaped).toEqual(["idle", "used", "busy"]);
    sessions.stopReaper();
    await vi.advanceTimersByTimeAsync(5000);
    expect(reaped).toEqual(["idle", "used", "busy"]);
    expect(sessions.all().map((s) => s.id)).toEqual(["kept"]);
  });
});

describe("owners and limits", () => {
  test("an owner's share is bounded apart from the total; a close frees its owner's slot", async () => {
    const { sessions } = service();
    sessions.open("a1", "alice", { note: "" });
    sessions.open("a2", "alice", { note: "" });
    expect(await codeOf(() => sessions.open("a3", "alice", { note: "" }))).toEqual({ code: "too_many_sessions", message: "owner: 2 of 2" });
    // another client is not refused for alice's sessions
    sessions.open("b1", "bob", { note: "" });
    expect(await codeOf(() => sessions.open("b2", "bob", { note: "" }))).toEqual({ code: "too_many_sessions", message: "total: 3 of 3" });
    await sessions.close("a1", "closed");
    sessions.open("b2", "bob", { note: "" });
    expect(sessions.all().map((s) => [s.id, s.owner])).toEqual([["a2", "alice"], ["b1", "bob"], ["b2", "bob"]]);
  });

  test("opens under way hold their slot: concurrent opens cannot all pass the limit", async () => {
    const { sessions } = service({ maxSessions: 2, maxPerOwner: 2 });
    const gate = deferred();
    const slow = sessions.reserving("c1", async () => {
      await gate.promise;
      return sessions.add("s1", "c1", { note: "" });
    });
    sessions.open("s2", "c2", { note: "" });
    expect(sessions.opening).toBe(1);
    expect((await codeOf(() => sessions.open("s3", "c3", { note: "" }))).message).toBe("total: 2 of 2");
    gate.resolve();
    await slow;
    expect(sessions.opening).toBe(0);
    expect(sessions.size).toBe(2);
  });

  test("the wire: a client's sessions are bounded per connection (max_sessions_per_client), each refusal named", async () => {
    const { runtime } = fakeRuntime();
    const wire = new WireSessions(runtime as never, 0, "abcd", [], 3, 2);
    const a = wire.openFor("client-a");
    wire.openFor("client-a");
    expect(a.id).toMatch(/^s-0-abcd-[0-9a-f]{32}$/);
    expect(a.owner).toBe("client-a");
    expect(await codeOf(() => wire.openFor("client-a"))).toEqual({ code: "too_many_sessions", message: "this client holds its limit of 2 sessions on this replica (max_sessions_per_client); close some" });
    wire.openFor("client-b");
    expect((await codeOf(() => wire.openFor("client-c"))).message).toMatch(/limit of 3 sessions \(max_sessions\)/);
  });
});

describe("closed-session answers", () => {
  test("closed (and why, by id and by rollout tag), lost with an earlier process, never known", async () => {
    const { runtime } = fakeRuntime();
    const wire = new WireSessions(runtime as never, 1, "beef", ["0ad1"], 10);
    const s = wire.openFor("c");
    await wire.close(s.id, "closed by the client");
    expect(await codeOf(() => wire.get(s.id))).toEqual({ code: "session_closed", message: `session ${s.id} was closed by the client` });
    expect(await codeOf(() => wire.get("s-1-0ad1-00"))).toEqual({ code: "session_lost", message: "session s-1-0ad1-00 was lost: replica 1 restarted (its process died) and sessions do not survive that" });
    expect(await codeOf(() => wire.get("s-2-0ad1-00"))).toEqual({ code: "unknown_session", message: "no session s-2-0ad1-00 on replica 1" });

    const { sessions } = service();
    const t = sessions.make("t1", "c", { note: "" });
    sessions.tag(t, "rollout-7");
    expect(sessions.holds("rollout-7")).toBe(true);
    sessions.add(t);
    expect(sessions.get("rollout-7")).toBe(t);
    await sessions.close("t1", "closed by the trainer");
    expect(sessions.holds("rollout-7")).toBe(false);
    expect(await codeOf(() => sessions.get("rollout-7"))).toEqual({ code: "session_closed", message: "session rollout-7 was closed by the trainer" });
  });

  test("a front that remembers no closes answers unknown, in its own noun; kept results answer by id and tag", async () => {
    const { sessions } = service({ closedMemory: 0, keepResults: true, words: { noun: "episode", where: " (gone)", closed: (w) => w, refuse: () => new Error("x") } });
    sessions.open("e1", "page", { note: "" });
    await sessions.close("e1", "closed");
    expect(await codeOf(() => sessions.get("e1"))).toEqual({ code: "unknown_session", message: "no episode e1 (gone)" });
    sessions.keep({ session_id: "e1", rollout: "r1", scenario_id: "s", seed: 1, episode_id: "ep", steps: 2, score: { reward: 1 }, closed: "closed", closed_at: Date.now() });
    expect(sessions.closedResult("r1")?.score).toEqual({ reward: 1 });
    expect(sessions.closedResult("e1")?.steps).toBe(2);
    expect(sessions.closedResult("nope")).toBeNull();
    expect(service().sessions.closedResult("e1")).toBeNull();
  });
});
