import { join } from "node:path";
import { afterAll, beforeAll, expect, test } from "vitest";
import { EnvRuntime, RuntimeError } from "../../bridge/core/engine/env-runtime.js";
import { FIXTURES } from "../helpers.js";
import { OpenAIFixture } from "../openai-fixture.js";

let rt: EnvRuntime;
beforeAll(async () => {
  // the engine worker is built without the sandbox's fuel checks, which would otherwise stop the
  // native hang below at its deadline before the watchdog is needed (that path: wasm-fuel.test.ts);
  // this file tests the watchdog and the restore of co-tenants it leads to (set for the whole file:
  // the replacement worker reads it too)
  process.env.ENVSCALER_NO_FUEL = "1";
  rt = await EnvRuntime.start({ envs: [FIXTURES, join(FIXTURES, "..", "hostile")], workers: 1, hardStopGraceMs: 300 });
});
afterAll(async () => {
  await rt.close();
  delete process.env.ENVSCALER_NO_FUEL;
});

test("an episode over the engine: reset, steps with diffs and hashes, reward", async () => {
  const { episode_id, observation, info } = await rt.reset("notes-1", 3);
  expect(observation.content).toMatch(/Add a note/);
  expect(info).toMatchObject({ env_id: "notes-v1", scenario_id: "notes-1", seed: 3, mode: "task", max_steps: 8 });
  expect(info.tools.map((t) => t.function.name)).toContain("add_note");
  const s1 = await rt.step(episode_id, { name: "add_note", arguments: { user_id: "u2", title: "todo", body: "call mom" } });
  expect(s1.info.diff).toEqual([
    { op: "add", path: "/notes/n2", value: { user_id: "u2", title: "todo", body: "call mom", tags: ["new"] } },
    { op: "replace", path: "/next_note", value: 3, old: 2 },
  ]);
  expect(s1.info.state_hash).not.toBe(info.state_hash);
  const state = JSON.parse(await rt.state(episode_id));
  expect(state.notes.n2.tags).toEqual(["new"]);
  await rt.step(episode_id, { name: "delete_note", arguments: { note_id: "n1" } });
  const end = await rt.step(episode_id, "Done.");
  expect(end).toMatchObject({ reward: 1, terminated: true, truncated: false, info: { end_reason: "text_reply" } });
  await expect(rt.step(episode_id, "again")).rejects.toMatchObject({ code: "episode_done" });
  await rt.closeEpisode(episode_id);
  await expect(rt.step(episode_id, "x")).rejects.toBeInstanceOf(RuntimeError);
});

test("unknown scenario and unknown episode are typed errors", async () => {
  await expect(rt.reset("nope", 1)).rejects.toMatchObject({ code: "unknown_scenario" });
  await expect(rt.step("nope", {})).rejects.toMatchObject({ code: "unknown_episode" });
});

test("a native builtin that ignores the deadline: its episode ends, co-tenants are restored exactly", async () => {
  const a = await rt.reset("notes-1", 5);
  const s1 = await rt.step(a.episode_id, { name: "add_note", arguments: { user_id: "u2", title: "todo", body: "call mom" } });
  const b = await rt.reset("hostile-1", 1);
  // the watchdog stopped it (hard_stops below), not the builtin finishing: no wall-clock bound here,
  // timings belong in bench/ (this one flaked under CI load)
  const hung = await rt.step(b.episode_id, { name: "native_hang", arguments: {} });
  expect(hung).toMatchObject({ terminated: true, reward: 0, info: { error: { code: "env_timeout" }, end_reason: "env_fault" } });
  await expect(rt.step(b.episode_id, { name: "ping", arguments: {} })).rejects.toMatchObject({ code: "episode_done" });

  // the co-tenant carries on from exactly where it was (its first request waits for its restore)
  expect(JSON.parse(await rt.state(a.episode_id)).notes.n2.title).toBe("todo");
  expect(rt.stats()).toMatchObject({ hard_stops: 1, restored: 1, lost: 1 });
  const s2 = await rt.step(a.episode_id, { name: "delete_note", arguments: { note_id: "n1" } });
  expect(s2.info.state_hash).not.toBe(s1.info.state_hash);
  const end = await rt.finish(a.episode_id);
  expect(end.reward).toBe(1);

  const c = await rt.reset("hostile-1", 2);
  expect((await rt.step(c.episode_id, { name: "ping", arguments: {} })).observation.content).toBe('"pong"');
});

test("episodes run concurrently and stay isolated", async () => {
  const eps = await Promise.all([1, 2, 3, 4].map((seed) => rt.reset("notes-1", seed)));
  await Promise.all(eps.map((e, i) => rt.step(e.episode_id, { name: "add_note", arguments: { user_id: "u1", title: `t${i}`, body: "b" } })));
  for (const [i, e] of eps.entries()) {
    const notes = Object.values(JSON.parse(await rt.state(e.episode_id)).notes as Record<string, { title: string }>).map((n) => n.title);
    expect(notes).toEqual(["groceries", `t${i}`]);
  }
});

test("a restore starts from the episode's checkpoint and re-runs only the steps since: RNG, clock, state and the simulated user's history as they were", async () => {
  // the conversation's user: the same scripted replies for the original and for the twin below
  const replies = ["# Thought:\nI start.\n# Reply:\nHi, how many notes do I have? I'm u3.", "# Thought:\nOne note.\n# Reply:\nThanks, now add 'x' with body 'y'.", "# Thought:\nDone.\n# Reply:\nGreat, one more question."];
  const user = await OpenAIFixture.start([...replies, "# Reply:\nBye. ###STOP###"]);
  const twinUser = await OpenAIFixture.start([...replies, "# Reply:\nBye. ###STOP###"]);
  const userConfig = (f: OpenAIFixture) => ({ baseURL: f.baseURL, apiKey: "x", model: "m", maxRetries: 0 });
  const envs = [FIXTURES, join(FIXTURES, "..", "hostile")];
  const stops: unknown[] = [];
  const workers = await EnvRuntime.start({ envs, workers: 1, hardStopGraceMs: 300, checkpointEvery: 3, user: userConfig(user), onHardStop: (e) => stops.push(e) });
  const twin = await EnvRuntime.start({ envs, workers: 0, user: userConfig(twinUser) });
  try {
    const actions = [
      { name: "add_note", arguments: { user_id: "u2", title: "t1", body: "b" } },
      { name: "roll", arguments: {} },
      { name: "add_note", arguments: { user_id: "u2", title: "t2", body: "b" } },
      { name: "roll", arguments: {} },
      { name: "roll", arguments: {} },
    ];
    const talk = [{ name: "list_notes", arguments: { user_id: "u3" } }, "You have 1 note.", { name: "add_note", arguments: { user_id: "u3", title: "x", body: "y" } }, "Added it."];
    const run = async (rt: EnvRuntime) => {
      const a = await rt.reset("notes-1", 7);
      const c = await rt.reset("notes-2", 13);
      for (const act of actions) await rt.step(a.episode_id, act);
      for (const act of talk) await rt.step(c.episode_id, act);
      return { a: a.episode_id, c: c.episode_id };
    };
    const mine = await run(workers);
    const theirs = await run(twin);
    // a checkpoint is taken after 3 steps (not awaited by the steps): both episodes have one by now
    const before = { a: workers.stateHash(mine.a), c: workers.stateHash(mine.c), state: await workers.state(mine.a) };
    const held = await workers.snapshot(mine.a); // kept in the worker: lost with it
    expect(workers.stats()).toMatchObject({ snapshots: 1, snapshot_bytes: held.bytes });

    const h = await workers.reset("hostile-1", 1);
    const hung = await workers.step(h.episode_id, { name: "native_hang", arguments: {} });
    expect(hung.info.error?.code).toBe("env_timeout");
    expect(await workers.state(mine.a)).toBe(before.state);
    expect([workers.stateHash(mine.a), workers.stateHash(mine.c)]).toEqual([before.a, before.c]);
    // notes-1 re-ran steps 4-5 (checkpoint at 3); notes-2 re-ran step 4 (checkpoint at 3): never all 9
    expect(workers.stats()).toMatchObject({ hard_stops: 1, restored: 2, lost: 1, replayed_steps: 3 });
    expect(stops).toEqual([{ scenario_id: "hostile-1", episode_id: h.episode_id, restoring: 2, snapshots_lost: 1 }]);
    // the snapshot went with the worker: it no longer counts against the limits, and says so if used
    expect(workers.stats()).toMatchObject({ snapshots: 0, snapshot_bytes: 0 });
    await expect(workers.fork({ snapshot_id: held.snapshot_id })).rejects.toMatchObject({ code: "unknown_snapshot", message: expect.stringMatching(/lost with its engine worker/) });
    expect(await workers.dropSnapshot(held.snapshot_id)).toBe(true);
    expect(workers.stats()).toMatchObject({ snapshots: 0, snapshot_bytes: 0 });

    // the restored episodes go on exactly as the twins that were never interrupted
    const next = { name: "roll", arguments: {} };
    const [ra, ta] = [await workers.step(mine.a, next), await twin.step(theirs.a, next)];
    expect(ra.observation).toEqual(ta.observation);
    expect(ra.info.state_hash).toBe(ta.info.state_hash);
    const [rc, tc] = [await workers.step(mine.c, "Anything else?"), await twin.step(theirs.c, "Anything else?")];
    expect(rc.observation).toEqual(tc.observation);
    expect(rc.info.state_hash).toBe(tc.info.state_hash);
    // the user's history up to the checkpoint is the twin's, thoughts included (a re-run from the
    // start keeps only the replies: "(recorded)" in place of each thought, as in the re-run step here)
    const last = (f: OpenAIFixture) => f.requests.at(-1)!.messages;
    expect(last(user).slice(0, 5)).toEqual(last(twinUser).slice(0, 5));
    expect(last(user)[4]!.content).toContain("One note.");
    expect(last(user).length).toBe(last(twinUser).length);
  } finally {
    await workers.close();
    await twin.close();
    await user.close();
    await twinUser.close();
  }
});
