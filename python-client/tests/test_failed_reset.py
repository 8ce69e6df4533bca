"""Issue 28 item 2: after a failed reset every env class needs a reset, and nothing of the previous
episode is visible (not through the env, not on the bridge). Item 3: a reset of a live episode is
one request that ends and scores it (recorded as a finish) and reports it as ``previous_episode``.

One table drives every class: each row says how that class is made, reset (well, or on a
scenario the bridge does not serve), stepped and asked for its state."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium
import pytest

from envscaler import AsyncBridgeClient, AsyncEnvScalerEnv, BridgeClient, EnvScalerEnv, EnvScalerVectorEnv
from envscaler.adapters.gem import EnvScalerGemEnv
from envscaler.adapters.roll import EnvScalerRollEnv
from envscaler.previous_episode import PreviousEpisode
from envscaler.protocol import BridgeError, EpisodeDone, UnknownScenario

from helpers import NOTES_ENVS, REFERENCE_ACTIONS, start_bridge

ADD = REFERENCE_ACTIONS[0]
BAD = "no-such-scenario"


@dataclass
class Row:
    make: Callable[[Any], Any]  # (bridge) -> env
    reset: Callable[[Any, str], Any]  # (env, scenario) -> None; raises (or reports, vector) on failure
    step: Callable[[Any], Any]
    state: Callable[[Any], Any]
    session: Callable[[Any], str | None]
    reset_raises: bool = True  # the vector env reports a failed reset per sub-env instead
    close: Callable[[Any], Any] = lambda e: e.close()


LOOP = asyncio.new_event_loop()  # one loop for the async env's client for its whole life


def _run(coro: Any) -> Any:
    return LOOP.run_until_complete(coro)


def _gem_reset(env: EnvScalerGemEnv, scenario: str) -> None:
    env.scenario_ids = [scenario]  # GEM draws from its list: the bridge not serving it is the failure
    env.reset(seed=1)


def _roll_reset(env: EnvScalerRollEnv, scenario: str) -> None:
    env.task_items[0] = {**env.task_items[0], "scenario_id": scenario}
    env.reset(seed=1, task_index=0)


def _vec_reset(env: EnvScalerVectorEnv, scenario: str) -> None:
    _, infos = env.reset(options={"scenario_ids": ["notes-1", scenario]})
    if scenario == BAD:  # sub-env 1's outcome; sub-env 0 started its episode
        assert infos["error"]["code"][1] == "unknown_scenario" and not infos["error"]["_code"][0]


ROWS: dict[str, Row] = {
    "EnvScalerEnv": Row(
        make=lambda b: EnvScalerEnv(b.endpoints[0], scenario_ids=["notes-1"], timeout=30),
        reset=lambda e, s: e.reset(seed=1, scenario_id=s),
        step=lambda e: e.step(ADD),
        state=lambda e: e.state(),
        session=lambda e: e.session_id,
    ),
    "AsyncEnvScalerEnv": Row(
        make=lambda b: AsyncEnvScalerEnv(b.endpoints[0], scenario_ids=["notes-1"], timeout=30),
        reset=lambda e, s: _run(e.reset(seed=1, scenario_id=s)),
        step=lambda e: _run(e.step(ADD)),
        state=lambda e: _run(e.state()),
        session=lambda e: e.session_id,
        close=lambda e: _run(e.close()),
    ),
    "EnvScalerVectorEnv sub-env": Row(
        make=lambda b: EnvScalerVectorEnv(b.endpoints[:1], num_envs=2, scenario_ids=["notes-1"], timeout=30),
        reset=_vec_reset,
        step=lambda e: e.step([ADD, ADD]),
        state=lambda e: e.state(1),
        session=lambda e: e.session_ids[1],
        reset_raises=False,
    ),
    "EnvScalerRollEnv": Row(
        make=lambda b: EnvScalerRollEnv(b.endpoints[0], scenario_ids=["notes-1"], timeout=30),
        reset=_roll_reset,
        step=lambda e: e.step(ADD),
        state=lambda e: e.state(),
        session=lambda e: e.session_id,
    ),
    "EnvScalerGemEnv": Row(
        make=lambda b: EnvScalerGemEnv(b.endpoints[0], scenario_ids=["notes-1"], timeout=30),
        reset=_gem_reset,
        step=lambda e: e.step(ADD),
        state=lambda e: e.state(),
        session=lambda e: e.session_id,
    ),
}


@pytest.mark.parametrize("kind", list(ROWS))
def test_a_failed_reset_leaves_every_env_class_needing_a_reset_with_no_old_state(bridge, kind):
    row = ROWS[kind]
    env = row.make(bridge)
    try:
        row.reset(env, "notes-1")
        row.step(env)
        old_state = row.state(env)
        assert "todo" in json.dumps(old_state)  # the episode that must not be visible afterwards
        sid = row.session(env)
        assert sid is not None

        if row.reset_raises:
            with pytest.raises(UnknownScenario):
                row.reset(env, BAD)
            with pytest.raises(gymnasium.error.ResetNeeded):
                row.step(env)
        else:
            row.reset(env, BAD)
        with pytest.raises(gymnasium.error.ResetNeeded):
            row.state(env)
        # nor on the bridge: the failed reset ended the session's episode first
        with BridgeClient(bridge.endpoints[0], timeout=30) as c, pytest.raises(EpisodeDone):
            c.state(sid)

        # a good reset plays again, in the same session, from the scenario's start
        row.reset(env, "notes-1")
        assert row.session(env) == sid
        assert "todo" not in json.dumps(row.state(env))
        row.step(env)
    finally:
        row.close(env)


def _records(folder: Path) -> list[dict[str, Any]]:
    # each line is "<checksum> <json>"
    return [json.loads(line.split(" ", 1)[1]) for f in sorted(folder.rglob("*.jsonl")) for line in f.read_text().splitlines() if line.strip()]


def test_a_reset_of_a_live_episode_is_one_request_that_scores_it(tmp_path):
    """``finish`` then ``reset`` became one ``reset`` (finish_previous): the running episode is
    ended, scored and recorded as a finish, and its result comes back as previous_episode."""
    with start_bridge(envs=[NOTES_ENVS], replicas=1, extra=("--record", "--record-dir", str(tmp_path))) as b, b.client(0, timeout=30) as c:
        assert "reset_finish_previous" in c.hello()["features"]
        env = EnvScalerEnv(client=c, scenario_ids=["notes-1"])
        _, first = env.reset(seed=1)
        assert "previous_episode" not in first
        env.step(ADD)
        before = c.stats()["requests"]
        _, info = env.reset(seed=2)
        assert c.stats()["requests"] - before == 2  # the reset, and this stats request
        prev = info["previous_episode"]
        assert prev["episode_id"] == first["episode_id"] and prev["finished"] is True
        assert prev["end_reason"] == "client" and prev["step"] == 1 and 0 < prev["reward"] < 1
        assert prev["reward_info"]["total"] == 3
        # an episode that had ended already is not scored again (the client does not ask)
        env.step("Done.")
        _, info = env.reset(seed=3)
        assert "previous_episode" not in info
        # asked anyway: the bridge says it had ended
        r = c.reset("notes-1", session_id=env.session_id, finish_previous=True)
        assert r["info"]["previous_episode"]["episode_id"] == info["episode_id"] and r["info"]["previous_episode"]["finished"] is True
        r2 = c.step(r["session_id"], "Done.")
        assert r2["terminated"]
        r3 = c.reset("notes-1", session_id=r["session_id"], finish_previous=True)
        assert r3["info"]["previous_episode"] == {"episode_id": r["info"]["episode_id"], "finished": False}
        env.close()
    ends = {r["episode_id"]: r for r in _records(tmp_path) if r.get("t") == "episode_end"}
    assert ends[first["episode_id"]]["how"] == "finish" and ends[first["episode_id"]]["result"]["reward"] == prev["reward"]


def test_a_reset_of_a_live_episode_replies_before_its_scoring_and_the_score_is_fetched_when_read(tmp_path):
    """With ``reset_finish_previous_later`` the reset ends the running episode and replies; the
    bridge scores it afterwards. ``info["previous_episode"]`` answers what the reply carried at
    once, and fetches the score (one ``episode_result``) the first time anything else is read: the
    same score, and the same record, as a reset that scores in line."""
    with start_bridge(envs=[NOTES_ENVS], replicas=1, extra=("--record", "--record-dir", str(tmp_path))) as b, b.client(0, timeout=30) as c:
        assert "reset_finish_previous_later" in c.hello()["features"]
        env = EnvScalerEnv(client=c, scenario_ids=["notes-1"])
        _, first = env.reset(seed=1)
        step_info = env.step(ADD)[4]
        before = c.stats()["requests"]
        _, info = env.reset(seed=2)
        prev = info["previous_episode"]
        assert isinstance(prev, PreviousEpisode) and prev.pending
        assert prev["episode_id"] == first["episode_id"] and prev["finished"] is True and prev["step"] == 1
        assert prev["state_hash"] == step_info["state_hash"]
        assert c.stats()["requests"] - before == 2  # the reset and this stats request: nothing fetched yet
        assert prev["end_reason"] == "client" and 0 < prev["reward"] < 1 and prev["reward_info"]["total"] == 3
        assert not prev.pending
        assert c.stats()["requests"] - before == 4  # one episode_result for all those reads, and the stats
        # the score a reset that scores in line gives for the same episode
        env2 = EnvScalerEnv(client=c, scenario_ids=["notes-1"])
        env2.reset(seed=1)
        env2.step(ADD)
        now = c.reset("notes-1", seed=2, session_id=env2.session_id, finish_previous=True)["info"]["previous_episode"]
        assert {k: v for k, v in prev.items() if k != "episode_id"} == {k: v for k, v in now.items() if k != "episode_id"}
        # an episode id the bridge holds no score for: a clear error
        with pytest.raises(BridgeError, match="no score of episode"):
            c.episode_result("no-such-episode")

        async def through_the_async_client() -> tuple[dict[str, Any], dict[str, Any]]:
            async with AsyncBridgeClient(b.endpoints[0], timeout=30) as ac:
                r = await ac.reset("notes-1", seed=1)
                await ac.step(r["session_id"], ADD)
                again = await ac.reset("notes-1", seed=2, session_id=r["session_id"], finish_previous="later")
                return again["info"]["previous_episode"], await ac.episode_result(r["info"]["episode_id"])

        pending, scored = asyncio.run(through_the_async_client())
        assert pending["pending"] is True and "reward" not in pending
        assert {k: v for k, v in scored.items() if k != "episode_id"} == {k: v for k, v in now.items() if k != "episode_id"}
        env.close()
        env2.close()
    ends = {r["episode_id"]: r for r in _records(tmp_path) if r.get("t") == "episode_end"}
    assert ends[first["episode_id"]]["how"] == "finish" and ends[first["episode_id"]]["result"]["reward"] == prev["reward"]
