"""A reset of a live episode that does not wait for its scoring (``finish_previous: "later"``), in
the async env (issue 28): no ``episode_result`` request until the score is
asked for, one per episode then, and the same scores a reset that scores in line
(``finish_previous=True``) gives for the same episodes, on 2 replicas."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from envscaler import AsyncBridgeClient, AsyncEnvScalerEnv, AsyncPreviousEpisode, Bridge, BridgeError, ScoreNotFetched

from helpers import NOTES_ENVS, REFERENCE_ACTIONS, start_bridge

ADD, DELETE = REFERENCE_ACTIONS


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
            # two coroutines awaiting it share one request; later awaits cost none
            a, b = await asyncio.gather(prev.fetch(), prev.fetch())
            assert a is prev and b is prev and not prev.pending
            assert await prev.fetch() is prev
            assert _ops(sent, "episode_result") == [{"episode_id": first["episode_id"]}]
            assert prev["end_reason"] == "client" and 0 < prev["reward"] < 1 and prev["reward_info"]["total"] == 3

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
            assert type(now) is dict and now["finished"] is True and "pending" not in now
            assert _no_id(prev) == _no_id(now)
            assert len(_ops(sent, "episode_result")) == 1  # still the one
            await env.close()
            await inline.close()

    async def main() -> None:
        await asyncio.gather(on_replica(0), on_replica(1))

    asyncio.run(main())


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
