"""The asyncio interface: many independent episodes in flight at once."""

from __future__ import annotations

import asyncio
import json

import gymnasium
import pytest

from envscaler import AsyncBridgeClient, AsyncEnvScalerEnv, BridgeTimeout
from envscaler.protocol import EpisodeDone, SessionClosed, UnknownScenario

from helpers import FINAL_REPLY, NOTES_1_TASK, REFERENCE_ACTIONS


async def _episode(env: AsyncEnvScalerEnv, seed: int) -> tuple[float, str, str]:
    obs, info = await env.reset(seed=seed, options={"scenario_id": "notes-1"})
    assert obs == NOTES_1_TASK and info["seed"] == seed
    for action in REFERENCE_ACTIONS:
        obs, reward, terminated, truncated, info = await env.step(action)
        assert not terminated and json.loads(obs)["success"] is True
        await asyncio.sleep(0)  # let the other agents interleave
    state = await env.state()
    assert "n1" not in state["notes"]
    obs, reward, terminated, truncated, info = await env.step(FINAL_REPLY)
    assert terminated and not truncated and info["end_reason"] == "text_reply"
    return reward, env.session_id, env.episode_id


def test_many_concurrent_episodes_over_two_replicas(bridge):
    async def main():
        clients = [AsyncBridgeClient(ep, timeout=30) for ep in bridge.endpoints]
        envs = [AsyncEnvScalerEnv(client=clients[i % 2]) for i in range(16)]
        try:
            results = await asyncio.gather(*(_episode(e, seed=i) for i, e in enumerate(envs)))
            # replies were matched to their requests although many were in flight on each socket
            assert all(c.max_in_flight > 1 for c in clients)
            return results
        finally:
            await asyncio.gather(*(e.close() for e in envs))
            for c in clients:
                assert not c.closed
                await c.close()

    results = asyncio.run(main())
    assert [r for r, _, _ in results] == [1.0] * 16
    assert len({s for _, s, _ in results}) == 16 and len({e for _, _, e in results}) == 16
    assert {s.split("-")[1] for _, s, _ in results} == {"0", "1"}


def test_async_client_operations_and_errors(bridge):
    async def main():
        async with AsyncBridgeClient(bridge.endpoints[1], timeout=30) as c:
            hello = await c.hello()
            assert hello["replica"] == 1
            assert {e["env_id"] for e in await c.list_envs()} == {"notes-v1", "hostile-v1", "faults-v1"}
            assert len(await c.list_scenarios(env_id="notes-v1")) == 2
            with pytest.raises(UnknownScenario):
                await c.reset("nope")
            a = (await c.reset("notes-1"))["session_id"]
            b = (await c.reset("notes-1"))["session_id"]
            out = await c.step_batch([(a, REFERENCE_ACTIONS[0]), (b, FINAL_REPLY)])
            assert out[0]["observation"]["role"] == "tool" and out[1]["terminated"] is True
            with pytest.raises(EpisodeDone):
                await c.step(b, FINAL_REPLY)
            fin = await c.finish(a)
            assert fin["info"]["end_reason"] == "client"
            assert (await c.stats())["replica"] == 1
            assert await c.close_session(a) and await c.close_session(b)
            with pytest.raises(SessionClosed):
                await c.state(a)
            # a timed-out request does not disturb the next ones; its late reply is dropped
            h = (await c.reset("hostile-1"))["session_id"]
            with pytest.raises(BridgeTimeout):
                await c.step(h, {"name": "spin", "arguments": {}}, timeout=0.05)
            assert (await c.hello())["replica"] == 1
            for _ in range(100):  # the spin's reply (after ~300 ms) arrives for nobody and is dropped
                if c.discarded >= 1:
                    break
                await asyncio.sleep(0.1)
            assert c.discarded >= 1
            await c.close_session(h)
        assert c.closed

    asyncio.run(main())


def test_async_env_owns_its_client(bridge):
    async def main():
        env = AsyncEnvScalerEnv(bridge.endpoints[0], scenario_ids=["notes-1"])
        reward, _, _ = await _episode(env, seed=9)
        assert reward == 1.0
        # a seeded async env is reproducible like the sync one
        o1, i1 = await env.reset(seed=42)
        o2, i2 = await env.reset(seed=42)
        assert (o1, i1["seed"]) == (o2, i2["seed"])
        await env.close()
        await env.close()
        assert env.client.closed
        with pytest.raises(gymnasium.error.ClosedEnvironmentError):
            await env.reset()

    asyncio.run(main())
