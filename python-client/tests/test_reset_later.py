"""A reset of a live episode that does not wait for its scoring (``finish_previous: "later"``), in
the async env and the vector env (issue 28): no ``episode_result`` request until the score is
asked for, one per episode then, and the same scores a reset that scores in line
(``finish_previous=True``) gives for the same episodes, on 2 replicas."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Iterator
from typing import Any

import pytest

from envscaler import AsyncBridgeClient, AsyncEnvScalerEnv, AsyncPreviousEpisode, Bridge, BridgeError, EnvScalerEnv, EnvScalerVectorEnv, PreviousEpisode, ScoreNotFetched

from helpers import NOTES_ENVS, REFERENCE_ACTIONS, start_bridge

ADD, DELETE = REFERENCE_ACTIONS
NOOP = 42  # an unreadable action: an invalid_action observation, the state unchanged
N = 8


@pytest.fixture(scope="module")
def two(built_bridge: None) -> Iterator[Bridge]:
    """2 replicas serving notes-v1, for this module alone (its request counts are its own)."""
    with start_bridge(envs=[NOTES_ENVS], replicas=2) as b:
        yield b


def _no_id(result: Any) -> dict[str, Any]:
    return {k: v for k, v in dict(result).items() if k != "episode_id"}


# ---------------------------------------------------------------------- the async env


def _spy(client: AsyncBridgeClient) -> list[tuple[str, dict[str, Any]]]:
    """Records every request the client sends (op, fields)."""
    sent: list[tuple[str, dict[str, Any]]] = []
    real = client.request

    async def request(op: str, **fields: Any) -> dict[str, Any]:
        sent.append((op, fields))
        return await real(op, **fields)

    client.request = request  # type: ignore[method-assign]
    return sent


def _ops(sent: list[tuple[str, dict[str, Any]]], op: str) -> list[dict[str, Any]]:
    return [fields for o, fields in sent if o == op]


def test_the_async_env_resets_a_live_episode_without_waiting_and_fetch_is_awaited(two: Bridge) -> None:
    async def on_replica(k: int) -> None:
        async with two.async_client(k, timeout=30) as c:
            sent = _spy(c)
            env = AsyncEnvScalerEnv(client=c, scenario_ids=["notes-1"])
            _, first = await env.reset(seed=1)
            assert "previous_episode" not in first
            step_info = (await env.step(ADD))[4]
            _, info = await env.reset(seed=2)
            assert _ops(sent, "reset")[-1]["finish_previous"] == "later"
            prev = info["previous_episode"]
            assert isinstance(prev, AsyncPreviousEpisode) and prev.pending
            # what the reply carried reads at once
            assert prev["episode_id"] == first["episode_id"] and prev["finished"] is True and prev["step"] == 1
            assert prev["state_hash"] == step_info["state_hash"]
            # the score does not: a read cannot wait on the loop it runs on
            with pytest.raises(ScoreNotFetched, match=r"await info\['previous_episode'\]\.fetch\(\) first"):
                prev["reward"]
            with pytest.raises(ScoreNotFetched):
                dict(prev)
            assert _ops(sent, "episode_result") == []
            # a fork (or snapshot) copies the transcript, info included: the mapping is shared
            child = await env.fork()
            assert child.transcript.info["previous_episode"] is prev
            await child.close()
            # two coroutines awaiting it share one request; later awaits cost none
            a, b = await asyncio.gather(prev.fetch(), prev.fetch())
            assert a is prev and b is prev and not prev.pending
            assert await prev.fetch() is prev
            assert _ops(sent, "episode_result") == [{"episode_id": first["episode_id"]}]
            assert prev["end_reason"] == "client" and 0 < prev["reward"] < 1 and prev["reward_info"]["total"] == 3
            assert type(prev["reward"]) is float

            # the same episode scored in line gives the same result
            inline = AsyncEnvScalerEnv(client=c, scenario_ids=["notes-1"])

            async def no_later(feature: str) -> bool:
                return feature != "reset_finish_previous_later"

            c.supports = no_later  # type: ignore[method-assign]  # a bridge without the feature
            await inline.reset(seed=1)
            await inline.step(ADD)
            _, info2 = await inline.reset(seed=2)
            assert _ops(sent, "reset")[-1]["finish_previous"] is True
            now = info2["previous_episode"]
            assert type(now) is dict and now["finished"] is True and "pending" not in now and type(now["reward"]) is float
            assert _no_id(prev) == _no_id(now)
            assert len(_ops(sent, "episode_result")) == 1  # still the one
            await env.close()
            await inline.close()

    async def main() -> None:
        await asyncio.gather(on_replica(0), on_replica(1))

    asyncio.run(main())


def _spy_sync(client: Any) -> list[tuple[str, dict[str, Any]]]:
    """Records every request a sync client sends (op, fields)."""
    sent: list[tuple[str, dict[str, Any]]] = []
    real = client.request

    def request(op: str, **fields: Any) -> dict[str, Any]:
        sent.append((op, fields))
        return real(op, **fields)

    client.request = request
    return sent


@pytest.mark.parametrize("kind", ["roll", "gem"])
def test_the_roll_and_gem_adapters_reset_a_live_episode_without_waiting_for_its_score(two: Bridge, kind: str) -> None:
    """They scored the old episode inside the reset (finish_previous=True); now as EnvScalerEnv
    does: "later", with a PreviousEpisode that fetches the score once, when read, and the same
    score a reset scoring in line gives."""
    from envscaler.adapters.gem import EnvScalerGemEnv
    from envscaler.adapters.roll import EnvScalerRollEnv

    def previous(info: dict[str, Any]) -> Any:
        return (info["bridge_info"] if kind == "roll" else info)["previous_episode"]

    with two.client(0, timeout=30) as c:
        sent = _spy_sync(c)
        env: Any = EnvScalerRollEnv(client=c, scenario_ids=["notes-1"]) if kind == "roll" else EnvScalerGemEnv(client=c, scenario_ids=["notes-1"])
        env.reset(seed=1)
        env.step(ADD)
        _, info = env.reset(seed=2)
        assert _ops(sent, "reset")[-1]["finish_previous"] == "later"
        prev = previous(info)
        assert isinstance(prev, PreviousEpisode) and prev.pending and not _ops(sent, "episode_result")
        assert prev["end_reason"] == "client" and 0 < prev["reward"] < 1
        assert type(prev["reward"]) is float  # as a step's reward, whatever number type crossed the wire
        assert len(_ops(sent, "episode_result")) == 1

        # the same episode scored in line: the same result
        c.supports = lambda feature: feature != "reset_finish_previous_later"  # type: ignore[method-assign]
        env.reset(seed=1)
        env.step(ADD)
        _, info2 = env.reset(seed=2)
        assert _ops(sent, "reset")[-1]["finish_previous"] is True
        now = previous(info2)
        assert type(now) is dict and _no_id(prev) == _no_id(now) and type(now["reward"]) is float
        env.close()


def test_the_sync_env_forks_and_snapshots_after_a_reset_that_ended_a_live_episode(two: Bridge) -> None:
    """The transcript copy a fork or snapshot makes used to deep-copy the PreviousEpisode with the
    client its fetch holds (TypeError: cannot pickle '_thread.lock')."""
    with two.client(1, timeout=30) as c:
        env = EnvScalerEnv(client=c, scenario_ids=["notes-1"])
        env.reset(seed=1)
        env.step(ADD)
        _, info = env.reset(seed=2)
        prev = info["previous_episode"]
        assert isinstance(prev, PreviousEpisode) and prev.pending
        snap = env.snapshot()
        child = env.fork()
        assert child.transcript.info["previous_episode"] is prev and prev.pending
        assert 0 < child.transcript.info["previous_episode"]["reward"] < 1 and not prev.pending
        env.drop_snapshot(snap)
        child.close()
        env.close()


def test_an_async_previous_episode_fetch_that_fails_is_tried_again() -> None:
    calls: list[str] = []

    async def fetch(episode_id: str) -> dict[str, Any]:
        calls.append(episode_id)
        await asyncio.sleep(0)
        if len(calls) == 1:
            raise BridgeError("timeout: no reply")
        return {"episode_id": episode_id, "finished": True, "reward": 0.5, "step": 3, "state_hash": "h"}

    async def main() -> None:
        prev = AsyncPreviousEpisode({"episode_id": "e1", "finished": True, "pending": True, "step": 3, "state_hash": "h"}, fetch)
        assert prev["step"] == 3 and prev.pending
        with pytest.raises(BridgeError, match="no reply"):
            await prev.fetch()
        assert prev.pending
        with pytest.raises(ScoreNotFetched):
            prev.get("reward")
        await prev.fetch()
        assert prev["reward"] == 0.5 and dict(prev)["state_hash"] == "h" and calls == ["e1", "e1"]
        # a reply that was scored already (a bridge without the feature) is a plain read
        done = AsyncPreviousEpisode({"episode_id": "e2", "finished": True, "reward": 1.0}, fetch)
        assert not done.pending and done["reward"] == 1.0 and await done.fetch() is done and len(calls) == 2

    asyncio.run(main())


# ---------------------------------------------------------------------- the vector env


def _play(vec: EnvScalerVectorEnv) -> tuple[list[str], dict[str, Any]]:
    """Starts every sub-env, plays sub-env i's first i % 3 reference actions (so the sub-envs end
    with different scores), and resets them all while they run. Returns the ended episode ids and
    the reset's infos."""
    _, infos = vec.reset(seed=11)
    ids = [str(x) for x in infos["episode_id"]]
    for k, action in enumerate((ADD, DELETE)):
        vec.step([action if i % 3 > k else NOOP for i in range(N)])
    assert all(e.live for e in vec.episodes)
    _, infos = vec.reset(seed=12)
    return ids, infos


def test_a_vector_reset_of_live_sub_envs_scores_later_and_previous_results_fetches_them_in_one_round(two: Bridge) -> None:
    later = EnvScalerVectorEnv(two.endpoints, num_envs=N, scenario_ids=["notes-1"], timeout=30)
    inline = EnvScalerVectorEnv(two.endpoints, num_envs=N, scenario_ids=["notes-1"], timeout=30, finish_previous=True)
    try:
        assert later.finish_previous == "later" and sorted(set(later.replica_of)) == [0, 1]
        ids, infos = _play(later)
        prev = infos["previous_episode"]
        assert list(prev["episode_id"]) == ids and prev["_episode_id"].all()
        assert prev["pending"].all() and prev["finished"].all() and "reward" not in prev
        assert later.requests_sent.get("episode_result", 0) == 0 and "finish" not in later.requests_sent

        scores = later.previous_results()
        assert sorted(scores) == list(range(N))
        assert later.requests_sent["episode_result"] == N  # one per ended episode, none before
        for i, got in scores.items():
            assert isinstance(got, dict) and got["episode_id"] == ids[i] and got["finished"] is True and got["end_reason"] == "client"
        assert len({got["reward"] for got in scores.values() if isinstance(got, dict)}) >= 2
        # asked again, or for some: kept, no request
        assert later.previous_results() == scores and later.previous_results([3, 0]) == {3: scores[3], 0: scores[0]}
        assert later.requests_sent["episode_result"] == N

        # the same episodes scored in line give the same results, in the reset's infos
        _, infos2 = _play(inline)
        prev2 = infos2["previous_episode"]
        assert "pending" not in prev2 and "episode_result" not in inline.requests_sent
        same = inline.previous_results()
        assert "episode_result" not in inline.requests_sent
        for i in range(N):
            assert prev2["reward"][i] == same[i]["reward"]  # type: ignore[index]
            assert _no_id(scores[i]) == _no_id(same[i])

        # an autoreset (the episode had ended) ends no live episode: the entry stays
        later.step(["Done."] * N)
        later.step([NOOP] * N)
        assert later.previous_results() == scores and later.requests_sent["episode_result"] == N
        # a reset of sub-envs that are not live asks for no scoring and keeps the entries
        later.finish([True] * N)
        _, infos3 = later.reset(seed=13)
        assert "previous_episode" not in infos3 and later.previous_results([1])[1] == scores[1]
    finally:
        later.close()
        inline.close()


def test_previous_results_misuse_raises_before_anything_is_sent(two: Bridge) -> None:
    vec = EnvScalerVectorEnv(two.endpoints, num_envs=2, scenario_ids=["notes-1"], timeout=30)
    try:
        assert vec.previous_results() == {}  # nothing ended yet
        vec.reset(seed=1)
        vec.reset(seed=2)
        with pytest.raises(IndexError):
            vec.previous_results([2])
        with pytest.raises(ValueError, match="twice"):
            vec.previous_results([0, 0])
        assert "episode_result" not in vec.requests_sent
        assert sorted(vec.previous_results([1, 0])) == [0, 1]
    finally:
        vec.close()
    with pytest.raises(ValueError, match='"later"'):
        EnvScalerVectorEnv(two.endpoints, num_envs=2, finish_previous=False)


def test_one_replicas_lost_scores_never_lose_the_other_replicas() -> None:
    """A replica killed after the reset (its kept scores die with it): its sub-envs' fetches fail,
    each as its own outcome; the other replica's sub-envs get their scores."""
    with start_bridge(envs=[NOTES_ENVS], replicas=2) as b:
        vec = EnvScalerVectorEnv(b.endpoints, num_envs=N, scenario_ids=["notes-1"], timeout=3)
        try:
            ids, _ = _play(vec)
            os.kill(b.replica_pids()[0], signal.SIGKILL)  # serve restarts it, without its scores
            got = vec.previous_results()
            failed = sorted(i for i, r in got.items() if isinstance(r, BridgeError))
            assert failed in ([0, 2, 4, 6], [1, 3, 5, 7]), got
            for i in set(range(N)) - set(failed):
                r = got[i]
                assert isinstance(r, dict) and r["episode_id"] == ids[i] and r["end_reason"] == "client"
            assert vec.requests_sent["episode_result"] == N
            # the scores that came are kept; only the failed ones are asked again
            again = vec.previous_results()
            assert vec.requests_sent["episode_result"] == N + len(failed)
            assert all(again[i] == got[i] for i in set(range(N)) - set(failed))
            assert all(isinstance(again[i], BridgeError) for i in failed)
        finally:
            vec.close()


def test_a_previous_episode_reward_of_zero_reads_as_a_float(two: Bridge) -> None:
    """An episode ended with nothing done scores 0, which crosses msgpack as the int 0 (§2); read
    back it is 0.0, as a step's reward is, whether scored later or in the reset."""
    with two.client(0, timeout=30) as c:
        env = EnvScalerEnv(client=c, scenario_ids=["notes-1"])
        env.reset(seed=1)
        _, info = env.reset(seed=2)
        assert isinstance(info["previous_episode"], PreviousEpisode)
        assert info["previous_episode"]["reward"] == 0 and type(info["previous_episode"]["reward"]) is float
        c.supports = lambda feature: feature != "reset_finish_previous_later"  # type: ignore[method-assign]
        _, info = env.reset(seed=3)
        assert type(info["previous_episode"]) is dict and type(info["previous_episode"]["reward"]) is float
        env.close()
