// The playground's undo and branch (runtime snapshots before every step, restore, fork) and its
// live scoring on a fork of the episode, through the HTTP API.
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, test, vi } from "vitest";
import { UiServer } from "../../bridge/fronts/ui/ui-server.js";
import { FIXTURES } from "../helpers.js";
import { OpenAIFixture } from "../openai-fixture.js";
import { HOSTILE, NOTES_REF } from "../ui-fixtures.js";

type Json = Record<string, any>;
let ui: UiServer;
let dir: string;

async function call(server: UiServer, path: string, body?: unknown): Promise<{ status: number; body: Json }> {
  const res = await fetch(new URL(path, server.url), body === undefined ? {} : { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
  return { status: res.status, body: (await res.json()) as Json };
}
const post = async (path: string, body: unknown, server = ui) => {
  const r = await call(server, path, body);
  if (r.status !== 200) throw new Error(`${path}: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body;
};
const passed = (score: Json) => score.reward_info.checks.map((c: Json) => c.passed);

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "envscaler-ui-undo-"));
  ui = await UiServer.start({ envs: [FIXTURES, HOSTILE], trajectories: join(dir, "none"), port: 0, hardStopGraceMs: 300 });
});

afterAll(async () => {
  await ui?.close();
});

describe("undo", () => {
  test("back one step, back to any held step, and on again: the same states and hashes as the first time", async () => {
    const s = await post("/api/play/start", { page: "u", scenario_id: "notes-1", seed: 5 });
    expect(s.undo).toEqual({ steps: [] });
    expect(await call(ui, "/api/play/undo", { episode_id: s.episode_id })).toMatchObject({ status: 409, body: { error: { code: "nothing_to_undo" } } });

    const a = await post("/api/play/step", { episode_id: s.episode_id, action: NOTES_REF[0] });
    expect(a.undo).toEqual({ steps: [0] });
    const b = await post("/api/play/step", { episode_id: s.episode_id, action: NOTES_REF[1] });
    expect(b.undo).toEqual({ steps: [0, 1] });
    expect(b.score).toMatchObject({ reward: 1, how: "copy" });

    // undo the delete: n1 is back, the added note stays, the checks say so
    const u = await post("/api/play/undo", { episode_id: s.episode_id });
    expect(u).toMatchObject({ step: 1, state_hash: a.result.info.state_hash, undo: { steps: [0] } });
    expect(u.state.notes.n1).toMatchObject({ title: "groceries" });
    expect(Object.values(u.state.notes).some((n: any) => n.title === "todo")).toBe(true);
    expect(passed(u.score)).toEqual([true, false, false]);
    expect((await call(ui, `/api/play/state?episode_id=${s.episode_id}`)).body.state).toEqual(u.state);

    // the same step again gives the same result: the restored episode is the one before the step, RNG and clock included
    const again = await post("/api/play/step", { episode_id: s.episode_id, action: NOTES_REF[1] });
    expect(again.result.info.step).toBe(2);
    expect(again.result.info.state_hash).toBe(b.result.info.state_hash);
    expect(again.result.observation).toEqual(b.result.observation);

    // back to the start in one go; later snapshots are dropped
    const snapsBefore = ui.runtime.stats().snapshots;
    const start = await post("/api/play/undo", { episode_id: s.episode_id, to_step: 0 });
    expect(start).toMatchObject({ step: 0, state_hash: s.info.state_hash, undo: { steps: [] } });
    expect(start.state).toEqual(s.state);
    expect(ui.runtime.stats().snapshots).toBe(snapsBefore - 2);
    await post("/api/play/close", { episode_id: s.episode_id });
  });

  test("a finished episode (or one ended by its last step) opens again", async () => {
    const s = await post("/api/play/start", { page: "u", scenario_id: "notes-1", seed: 6 });
    await post("/api/play/step", { episode_id: s.episode_id, action: NOTES_REF[0] });
    const f = await post("/api/play/finish", { episode_id: s.episode_id });
    expect(f.result.terminated).toBe(true);
    expect(f.undo.steps).toEqual([0, 1]);
    const u = await post("/api/play/undo", { episode_id: s.episode_id });
    expect(u).toMatchObject({ step: 1, score: { how: "copy" } });
    const done = await post("/api/play/step", { episode_id: s.episode_id, action: "Task Completed" });
    expect(done.result).toMatchObject({ terminated: true, info: { end_reason: "text_reply" } });
    await post("/api/play/undo", { episode_id: s.episode_id });
    const next = await post("/api/play/step", { episode_id: s.episode_id, action: NOTES_REF[1] });
    expect(next.score).toMatchObject({ reward: 1 });
    await post("/api/play/close", { episode_id: s.episode_id });
  });

  test("bad input: the typed error, and the episode goes on", async () => {
    const s = await post("/api/play/start", { page: "u", scenario_id: "notes-1", seed: 7 });
    await post("/api/play/step", { episode_id: s.episode_id, action: NOTES_REF[0] });
    expect(await call(ui, "/api/play/undo", { episode_id: s.episode_id, to_step: "one" })).toMatchObject({ status: 400, body: { error: { code: "bad_request" } } });
    expect(await call(ui, "/api/play/undo", { episode_id: s.episode_id, to_step: 9 })).toMatchObject({ status: 409, body: { error: { code: "nothing_to_undo", message: expect.stringMatching(/held: 0/) } } });
    expect(await call(ui, "/api/play/branch", { episode_id: s.episode_id, at_step: 9 })).toMatchObject({ status: 409, body: { error: { code: "nothing_to_undo" } } });
    expect(await call(ui, "/api/play/undo", { episode_id: "nope" })).toMatchObject({ status: 404, body: { error: { code: "unknown_episode" } } });
    expect(await call(ui, "/api/play/branch", { episode_id: "nope" })).toMatchObject({ status: 404, body: { error: { code: "unknown_episode" } } });
    expect((await post("/api/play/step", { episode_id: s.episode_id, action: NOTES_REF[1] })).score.reward).toBe(1);
    await post("/api/play/close", { episode_id: s.episode_id });
  });

  test("snapshots are bounded per episode: a step beyond the bound runs and says it cannot be undone", async () => {
    const small = await UiServer.start({ envs: [FIXTURES], trajectories: join(dir, "none"), port: 0, maxSnapshots: 2 });
    try {
      const s = await post("/api/play/start", { page: "u", scenario_id: "notes-1", seed: 1 }, small);
      await post("/api/play/step", { episode_id: s.episode_id, action: { name: "list_notes", arguments: { user_id: "u1" } } }, small);
      await post("/api/play/step", { episode_id: s.episode_id, action: NOTES_REF[0] }, small);
      const third = await post("/api/play/step", { episode_id: s.episode_id, action: NOTES_REF[1] }, small);
      expect(third.result.info.step).toBe(3);
      expect(third.score.reward).toBe(1);
      expect(third.undo).toEqual({ steps: [0, 1], snapshot_error: { code: "too_large", message: expect.stringMatching(/cannot be undone.*limit of 2 snapshots/) } });
      // going back frees room: the next step is undoable again
      expect((await post("/api/play/undo", { episode_id: s.episode_id }, small)).step).toBe(1);
      expect((await post("/api/play/step", { episode_id: s.episode_id, action: NOTES_REF[0] }, small)).undo).toEqual({ steps: [0, 1] });
      expect((await call(small, "/api/info")).body.snapshots).toEqual({ per_episode: 2, mb: 512 });
    } finally {
      await small.close();
    }
  });
});

describe("branch", () => {
  test("from now and from an earlier step: new episodes of the page that go their own way", async () => {
    const s = await post("/api/play/start", { page: "b", scenario_id: "notes-1", seed: 8 });
    const a = await post("/api/play/step", { episode_id: s.episode_id, action: NOTES_REF[0] });
    const now = await post("/api/play/branch", { episode_id: s.episode_id });
    expect(now).toMatchObject({ parent: s.episode_id, step: 1, state_hash: a.result.info.state_hash, forked_from: { episode_id: s.episode_id, step: 1 }, undo: { steps: [] } });
    expect(now.episode_id).not.toBe(s.episode_id);
    expect(passed(now.score)).toEqual([true, false, false]);

    const early = await post("/api/play/branch", { episode_id: s.episode_id, at_step: 0 });
    expect(early).toMatchObject({ step: 0, state_hash: s.info.state_hash });
    expect(early.state).toEqual(s.state);

    // the branch's steps do not reach its source, and the other way round
    const inBranch = await post("/api/play/step", { episode_id: now.episode_id, action: NOTES_REF[1] });
    expect(inBranch.score.reward).toBe(1);
    expect(inBranch.undo.steps).toEqual([1]);
    expect((await call(ui, `/api/play/state?episode_id=${s.episode_id}`)).body.state.notes.n1).toBeDefined();
    const inSource = await post("/api/play/step", { episode_id: s.episode_id, action: { name: "delete_note", arguments: { note_id: "zz" } } });
    expect(inSource.result.info.step).toBe(2);
    expect((await call(ui, `/api/play/state?episode_id=${now.episode_id}`)).body.state.notes.n1).toBeUndefined();

    // an ended episode branches from a held step only
    await post("/api/play/finish", { episode_id: s.episode_id });
    expect(await call(ui, "/api/play/branch", { episode_id: s.episode_id })).toMatchObject({ status: 409, body: { error: { code: "episode_done" } } });
    expect((await post("/api/play/branch", { episode_id: s.episode_id, at_step: 1 })).step).toBe(1);
    // branches belong to the page: they close with it
    expect((await post("/api/play/close-page", { page: "b" })).closed).toBe(4);
    expect(ui.runtime.stats()).toMatchObject({ episodes: 0, snapshots: 0 });
  });

  test("branches count against the open-episode limit", async () => {
    const two = await UiServer.start({ envs: [FIXTURES], trajectories: join(dir, "none"), port: 0, maxEpisodes: 2 });
    try {
      const s = await post("/api/play/start", { page: "p", scenario_id: "notes-1", seed: 1 }, two);
      await post("/api/play/branch", { episode_id: s.episode_id }, two);
      expect(await call(two, "/api/play/branch", { episode_id: s.episode_id })).toMatchObject({ status: 429, body: { error: { code: "too_many_episodes" } } });
    } finally {
      await two.close();
    }
  });
});

describe("hostile envs", () => {
  test("undo the step that timed out (spin): the episode is back and playable", async () => {
    const h = await post("/api/play/start", { page: "h", scenario_id: "hostile-1", seed: 1 });
    await post("/api/play/step", { episode_id: h.episode_id, action: { name: "ping", arguments: {} } });
    const r = await post("/api/play/step", { episode_id: h.episode_id, action: { name: "spin", arguments: {} } });
    expect(r.result).toMatchObject({ terminated: true, info: { error: { code: "env_timeout" } } });
    const u = await post("/api/play/undo", { episode_id: h.episode_id });
    expect(u.step).toBe(1);
    expect((await post("/api/play/step", { episode_id: h.episode_id, action: { name: "ping", arguments: {} } })).result.observation.content).toBe('"pong"');
    await post("/api/play/close", { episode_id: h.episode_id });
  });

  test("a native hang (native_hang) is stopped in its own sandbox at its deadline: no snapshot is lost, both episodes keep their undo", async () => {
    const by = await post("/api/play/start", { page: "h", scenario_id: "notes-1", seed: 2 });
    await post("/api/play/step", { episode_id: by.episode_id, action: NOTES_REF[0] });
    const h = await post("/api/play/start", { page: "h", scenario_id: "hostile-1", seed: 1 });
    await post("/api/play/step", { episode_id: h.episode_id, action: { name: "ping", arguments: {} } });
    const r = await post("/api/play/step", { episode_id: h.episode_id, action: { name: "native_hang", arguments: {} } });
    expect(r.result.info.error).toMatchObject({ code: "env_timeout", message: expect.stringMatching(/exceeded the \d+ ms deadline/) });
    // the fuel checks stopped the builtin where it was: no engine worker was replaced
    expect(ui.runtime.stats()).toMatchObject({ hard_stops: 0, lost: 0 });
    // undo takes the hostile episode back to before the hang, and it plays on from there
    expect((await post("/api/play/undo", { episode_id: h.episode_id })).step).toBe(1);
    expect((await post("/api/play/step", { episode_id: h.episode_id, action: { name: "ping", arguments: {} } })).result.observation.content).toBe('"pong"');
    // the bystander's undo point is still there too
    expect((await post("/api/play/undo", { episode_id: by.episode_id })).step).toBe(0);
    const on = await post("/api/play/step", { episode_id: by.episode_id, action: NOTES_REF[0] });
    expect(on.undo.steps).toEqual([0]);
    await post("/api/play/close-page", { page: "h" });
  });
});

describe("live scoring", () => {
  test("each step is scored on a fork of the episode as it stands: nothing is replayed", async () => {
    const step = vi.spyOn(ui.runtime, "step");
    const fork = vi.spyOn(ui.runtime, "fork");
    const reset = vi.spyOn(ui.runtime, "reset");
    try {
      const s = await post("/api/play/start", { page: "s", scenario_id: "notes-1", seed: 9 });
      const actions = [{ name: "list_notes", arguments: { user_id: "u1" } }, NOTES_REF[0], { name: "list_notes", arguments: { user_id: "u2" } }, NOTES_REF[1]];
      const scores = [];
      for (const action of actions) scores.push((await post("/api/play/step", { episode_id: s.episode_id, action })).score);
      expect(scores.map((x) => x.reward)).toEqual([0, 0.3333, 0.3333, 1]);
      // one runtime step per step played (a replay would run 1 + 2 + 3 + 4 more), one fork per score, one reset in all
      expect(step).toHaveBeenCalledTimes(actions.length);
      expect(fork).toHaveBeenCalledTimes(actions.length + 1);
      expect(reset).toHaveBeenCalledTimes(1);
      expect(ui.runtime.stats().episodes).toBe(1);
      await post("/api/play/close", { episode_id: s.episode_id });
    } finally {
      vi.restoreAllMocks();
    }
  });

  test("a conversation with a simulated user is scored live too, without asking the user anything", async () => {
    const user = await OpenAIFixture.start(["# Reply:\nHi, how many notes do I have? I'm u3.", "# Reply:\nThanks! ###STOP###"]);
    const conv = await UiServer.start({ envs: [FIXTURES], trajectories: join(dir, "none"), port: 0, user: { baseURL: user.baseURL, apiKey: "x", model: "m", maxRetries: 0 } });
    try {
      const s = await post("/api/play/start", { page: "c", scenario_id: "notes-2", seed: 1 }, conv);
      expect(s).toMatchObject({ live_scoring: true, score: { how: "copy", reward: 0 } });
      const a = await post("/api/play/step", { episode_id: s.episode_id, action: { name: "add_note", arguments: { user_id: "u3", title: "x", body: "y" } } }, conv);
      expect(passed(a.score)).toEqual([true, false]);
      expect(user.requests).toHaveLength(1);
      const end = await post("/api/play/step", { episode_id: s.episode_id, action: "You have 1 note; I added 'x'." }, conv);
      expect(end.result.info.end_reason).toBe("user_stop");
      expect(end.score).toMatchObject({ reward: 1, how: "final" });
      expect(user.requests).toHaveLength(2);
    } finally {
      await conv.close();
      await user.close();
    }
  });
});
