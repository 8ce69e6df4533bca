// The Restarter on stand-in engines: its restart budget, quarantine, and how it answers the
// requests a stopped worker held. No threads: what a worker would answer is scripted here.
import { expect, test } from "vitest";
import type { Engine, Pending } from "../../bridge/core/engine/engine.js";
import type { EngineOp, ReplyOf, RequestFields } from "../../bridge/core/engine/messages.js";
import type { EpisodeRecord } from "../../bridge/core/engine/records.js";
import { Restarter, type RestarterOptions } from "../../bridge/core/engine/restarter.js";
import { DeadlineBoard } from "../../bridge/core/engine/watchdog.js";

class ScriptedEngine implements Engine {
  readonly ready = Promise.resolve();
  readonly episodes = new Set<EpisodeRecord>();
  readonly board = new DeadlineBoard();
  stopping = false;
  posted: Pending[] = [];
  constructor(readonly index: number) {}
  post<O extends EngineOp>(episode: EpisodeRecord, op: O, fields: RequestFields<O>): Promise<ReplyOf<O>> {
    return new Promise((resolve) => this.posted.push({ op, fields, episode, resolve }));
  }
  stop(): Promise<void> {
    this.stopping = true;
    return Promise.resolve();
  }
  takeUnanswered(): Pending[] {
    const left = this.posted;
    this.posted = [];
    return left;
  }
}

function setup(options: Partial<RestarterOptions> = {}) {
  const engines = [new ScriptedEngine(0)];
  const pool = {
    closed: false,
    replace: (old: Engine) => {
      const e = new ScriptedEngine(old.index);
      engines.push(e);
      return e;
    },
  };
  const table = { restoreFields: (rec: EpisodeRecord) => ({ inputs: rec.inputs, user: null, state_hash: rec.stateHash }) };
  const hardStops: object[] = [];
  const restarter = new Restarter({ hardStopGraceMs: 50, maxRestartsPerMinute: 10, quarantineAfter: 2, user: null, onHardStop: (e) => hardStops.push(e), ...options }, pool, table, { lostWith: () => 0 });
  let slot = 1;
  const episode = (scenario: string, engine: Engine = engines.at(-1)!): EpisodeRecord => {
    const rec: EpisodeRecord = { id: `ep-${slot}`, slot: slot++, engine, inputs: { env_id: "e", scenario_id: scenario, seed: 0, actions: [], user_replies: [] }, stateHash: "h", snapshots: new Set() };
    engine.episodes.add(rec);
    return rec;
  };
  return { engines, restarter, episode, hardStops, last: () => engines.at(-1)! };
}

/** Answers the replacement's restore of `rec` as a worker that rebuilt it would. */
function restoreDone(engine: ScriptedEngine, rec: EpisodeRecord, steps = 0): void {
  const p = engine.posted.find((x) => x.op === "restore" && x.episode === rec);
  expect(p, `a restore of ${rec.id} was posted to the replacement`).toBeDefined();
  engine.posted.splice(engine.posted.indexOf(p!), 1);
  p!.resolve({ id: 0, ok: true, value: { restored: true, steps } });
}

test("within the restart budget a lost worker's episodes are restored on its replacement; past it they are failed", async () => {
  const { restarter, episode, last } = setup({ maxRestartsPerMinute: 2 });
  const a = episode("s");
  for (let i = 1; i <= 2; i++) {
    const old = last();
    await restarter.recover(old, null);
    expect(a.engine, `restart ${i}: the episode moved`).not.toBe(old);
    expect(last().episodes.has(a)).toBe(true);
    restoreDone(last(), a, 3);
    await a.restoring;
    expect(a.dead).toBeUndefined();
  }
  expect(restarter.counters).toMatchObject({ restored: 2, replayed_steps: 6, lost: 0 });
  // the third restart in a minute spends the budget: the episode is failed, nothing is restored
  const third = last();
  await restarter.recover(third, null);
  expect(a.dead?.code).toBe("engine_unavailable");
  expect(last().posted.filter((p) => p.op === "restore")).toEqual([]);
  expect(restarter.counters.lost).toBe(1);
  restarter.close();
});

test("a scenario whose calls keep overrunning is quarantined after quarantineAfter hard stops; its neighbours are restored", async () => {
  const { restarter, episode, last, hardStops } = setup({ quarantineAfter: 2 });
  const bad1 = episode("bad");
  const good = episode("good");
  await restarter.recover(last(), bad1.slot);
  expect(bad1.dead?.code).toBe("env_timeout");
  expect(good.engine).toBe(last());
  restoreDone(last(), good);
  await good.restoring;
  expect(restarter.quarantine("bad"), "one hard stop is not yet a pattern").toBeUndefined();
  expect(hardStops).toEqual([{ scenario_id: "bad", episode_id: bad1.id, restoring: 1, snapshots_lost: 0 }]);
  const bad2 = episode("bad");
  await restarter.recover(last(), bad2.slot);
  expect(restarter.quarantine("bad")).toMatch(/quarantined.*2 guest calls/);
  expect(restarter.quarantine("good")).toBeUndefined();
  expect(restarter.quarantinedScenarios).toEqual(["bad"]);
  restarter.close();
});

test("the requests a stopped worker held: re-posted behind the restore in their order, or answered when their episode closed meanwhile", async () => {
  const { restarter, episode, last } = setup();
  const old = last();
  const a = episode("s");
  const gone = episode("s");
  const step1 = old.post(a, "step", { action: 1 });
  const step2 = old.post(a, "step", { action: 2 });
  const close = old.post(gone, "close", {});
  const drop = old.post(gone, "drop_snapshot", { snapshot: "x" });
  const state = old.post(gone, "state", {});
  old.episodes.delete(gone); // closed while its requests waited
  await restarter.recover(old, null);
  expect(await close).toEqual({ id: 0, ok: true, value: null });
  expect(await drop).toEqual({ id: 0, ok: true, value: true });
  expect(await state).toMatchObject({ ok: false, error: { code: "unknown_episode" } });
  const fresh = last();
  expect(fresh.posted.map((p) => [p.op, p.fields])).toEqual([["restore", expect.anything()], ["step", { action: 1 }], ["step", { action: 2 }]]);
  restoreDone(fresh, a);
  for (const p of fresh.takeUnanswered()) p.resolve({ id: 0, ok: false, error: { code: "env_crashed", message: "scripted" } });
  expect(await step1).toMatchObject({ ok: false, error: { code: "env_crashed" } });
  expect(await step2).toMatchObject({ ok: false });
  restarter.close();
});

test("the watchdog: a call past its deadline by the grace stops its worker and names the culprit's episode", async () => {
  const { restarter, episode, last } = setup({ hardStopGraceMs: 50 });
  const engine = last();
  restarter.watch(engine);
  const a = episode("s");
  const b = episode("s");
  engine.board.start(Date.now() - 1000, a.slot);
  for (let i = 0; i < 100 && !engine.stopping; i++) await new Promise((r) => setTimeout(r, 20));
  expect(engine.stopping, "the watchdog stopped the worker").toBe(true);
  await new Promise((r) => setTimeout(r, 20));
  expect(restarter.counters.hard_stops).toBe(1);
  expect(a.dead?.code).toBe("env_timeout");
  expect(b.engine).toBe(last());
  restarter.close();
});
