// The typed engine seam (EngineOps: the result type follows the op), the core's closed error
// codes and their one wire table, the one Watchdog, and the snapshot store's reservations.
import { join } from "node:path";
import { expect, expectTypeOf, test } from "vitest";
import { EnvRegistry } from "../../envs/format/registry.js";
import { ERROR_CODES, INTERNAL_ERROR_CODES, wireCode, type CoreErrorCode } from "../../protocol/error-codes.js";
import type { StepResult } from "../../bridge/core/episode/episode.js";
import type { PortableSnapshot } from "../../bridge/core/episode/portable-snapshot.js";
import type { Engine } from "../../bridge/core/engine/engine.js";
import { EnvRuntime, RuntimeError } from "../../bridge/core/engine/env-runtime.js";
import { EpisodeTable } from "../../bridge/core/engine/episode-table.js";
import { InThreadEngine } from "../../bridge/core/engine/in-thread-engine.js";
import type { EngineError, ForkValue, ResetValue, ResultOf, SnapshotValue } from "../../bridge/core/engine/messages.js";
import type { EpisodeRecord } from "../../bridge/core/engine/records.js";
import { DeadlineBoard, Watchdog, type Overrun } from "../../bridge/core/engine/watchdog.js";

const LIBRARY = join(import.meta.dirname, "..", "..", "envs", "library");

test("each op's result type follows from the op (compile-time: tsc over the tests checks the expect-errors)", () => {
  expectTypeOf<ResultOf<"reset">>().toEqualTypeOf<ResetValue>();
  expectTypeOf<ResultOf<"step">>().toEqualTypeOf<StepResult>();
  expectTypeOf<ResultOf<"finish">>().toEqualTypeOf<StepResult>();
  expectTypeOf<ResultOf<"state">>().toEqualTypeOf<string>();
  expectTypeOf<ResultOf<"fork">>().toEqualTypeOf<ForkValue>();
  expectTypeOf<ResultOf<"snapshot">>().toEqualTypeOf<SnapshotValue>();
  expectTypeOf<ResultOf<"checkpoint">>().toEqualTypeOf<PortableSnapshot>();
  expectTypeOf<ResultOf<"drop_snapshot">>().toEqualTypeOf<boolean>();
  expectTypeOf<EngineError["code"]>().toEqualTypeOf<CoreErrorCode>();
  // never run: only compiled
  const misuse = async (engine: Engine, rec: EpisodeRecord) => {
    const r = await engine.post(rec, "state", {});
    if (r.ok) {
      const text: string = r.value;
      // @ts-expect-error a state is JSON text, not a step result
      const wrong: StepResult = r.value;
      void [text, wrong];
    } else {
      // @ts-expect-error an engine's error code is one of the closed set, not any string
      const code: "whatever" = r.error.code;
      void code;
    }
    // @ts-expect-error a step carries its action
    void engine.post(rec, "step", {});
    // @ts-expect-error there is no such op
    void engine.post(rec, "teleport", {});
    // @ts-expect-error a runtime error's code is a core error code
    void new RuntimeError("oops", "not a code");
  };
  void misuse;
});

test("an in-thread engine answers each op with its own result, and refusals with a core error code", async () => {
  const registry = EnvRegistry.load([LIBRARY]);
  const engine = new InThreadEngine(registry, 0);
  await engine.ready;
  const table = new EpisodeTable({ recorder: null, maxActionBytes: 1 << 20, maxEpisodeInputBytes: 1 << 26, checkpointEvery: 0 });
  const rec = table.add("e1", engine, { env_id: "library-v1", scenario_id: "library-1", seed: 1, actions: [], user_replies: [] });
  const reset = await engine.post(rec, "reset", { scenario_id: "library-1", seed: 1, user: null });
  expect(reset.ok && reset.value.info.scenario_id).toBe("library-1");
  const state = await engine.post(rec, "state", {});
  expect(state.ok && typeof state.value).toBe("string");
  const step = await engine.post(rec, "step", { action: { name: "get_book", arguments: { book_id: "B001" } } });
  expect(step.ok && step.value.info.step).toBe(1);
  const ghost = table.add("ghost", engine, rec.inputs, undefined, false);
  const refused = await engine.post(ghost, "state", {});
  expect(refused).toMatchObject({ ok: false, error: { code: "unknown_episode" } });
  expect(await engine.post(rec, "close", {})).toMatchObject({ ok: true, value: null });
  expect(rec.inFlight, "every request was answered").toBe(0);
  await engine.stop(); // its host's sandboxes with it (the leak check holds every file to that)
});

test("every internal error code has one wire code, and wire codes pass through unchanged", () => {
  for (const code of INTERNAL_ERROR_CODES) expect(ERROR_CODES).toContain(wireCode(code));
  for (const code of ERROR_CODES) expect(wireCode(code)).toBe(code);
  expect(wireCode("closed")).toBe("shutting_down");
  expect(wireCode("reset_needed")).toBe("episode_done");
});

test("the watchdog reports a call past its deadline by the grace, once, and not before", () => {
  const dog = new Watchdog(1000, 60_000);
  const board = new DeadlineBoard();
  const seen: Overrun[] = [];
  dog.watch(board, (o) => seen.push(o));
  dog.check(5000);
  expect(seen, "no call running").toEqual([]);
  board.start(10_000, 7);
  dog.check(10_900);
  expect(seen, "within the grace").toEqual([]);
  dog.check(11_500);
  expect(seen).toEqual([{ owner: 7, overrunMs: 1500 }]);
  dog.check(12_000);
  expect(seen, "reported once: the caller ends the thread behind it").toHaveLength(1);
  const other = new DeadlineBoard();
  const unwatch = dog.watch(other, (o) => seen.push(o));
  other.start(0, 1);
  other.end();
  dog.check(50_000);
  expect(seen, "a call that ended in time").toHaveLength(1);
  other.start(0, 2);
  unwatch();
  dog.check(50_000);
  expect(seen, "an unwatched board").toHaveLength(1);
  dog.close();
});

test("concurrent snapshots of one episode reserve their count and bytes before any copy is taken", async () => {
  const probe = await EnvRuntime.start({ envs: [LIBRARY], workers: 0 });
  let bytes: number;
  try {
    const { episode_id } = await probe.reset("library-1", 1);
    bytes = (await probe.snapshot(episode_id)).bytes;
  } finally {
    await probe.close();
  }
  // per episode: 5 at once against a limit of 2 (none has been counted as held when the others check)
  const rt = await EnvRuntime.start({ envs: [LIBRARY], workers: 0, maxSnapshotsPerEpisode: 2 });
  try {
    const { episode_id } = await rt.reset("library-1", 1);
    const burst = await Promise.allSettled(Array.from({ length: 5 }, () => rt.snapshot(episode_id)));
    expect(burst.filter((r) => r.status === "fulfilled")).toHaveLength(2);
    for (const r of burst.filter((x) => x.status === "rejected")) expect((r).reason).toMatchObject({ code: "too_large", message: expect.stringMatching(/limit of 2 snapshots/) });
  } finally {
    await rt.close();
  }
  // in bytes: room for two; once the episode's first snapshot has shown its size, a burst of three
  // reserves that size each before copying, so one is copied and two are refused before their copy
  const tight = await EnvRuntime.start({ envs: [LIBRARY], workers: 0, maxSnapshotBytes: Math.floor(bytes * 2.5) });
  try {
    const { episode_id } = await tight.reset("library-1", 1);
    await tight.snapshot(episode_id);
    const burst = await Promise.allSettled([tight.snapshot(episode_id), tight.snapshot(episode_id), tight.snapshot(episode_id)]);
    expect(burst.filter((r) => r.status === "fulfilled")).toHaveLength(1);
    const refused = burst.filter((x) => x.status === "rejected");
    expect(refused).toHaveLength(2);
    for (const r of refused) expect((r).reason).toMatchObject({ code: "too_large", message: expect.stringMatching(/needs about \d+: over the limit/) });
    expect(tight.stats()).toMatchObject({ snapshots: 2 });
  } finally {
    await tight.close();
  }
});
