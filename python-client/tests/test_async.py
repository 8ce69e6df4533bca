"""The asyncio interface: many independent episodes in flight at once."""

from __future__ import annotations

import asyncio
import json
import os
import signal

import gymnasium
import pytest

from envscaler import AsyncBridgeClient, AsyncEnvScalerEnv, BridgeExited, BridgeTimeout
from envscaler.protocol import EpisodeDone, SessionClosed, UnknownScenario

from helpers import FINAL_REPLY, NOTES_1_TASK, NOTES_ENVS, REFERENCE_ACTIONS, start_bridge


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


def test_a_launched_bridge_that_exits_mid_request_is_bridge_exited_within_a_second(built_bridge):
    """``bridge.async_client()`` watches the launched bridge's process, as ``bridge.client()`` does:
    a request waiting for a reply when the bridge dies raises BridgeExited within about a second
    (WATCH_EVERY_S is 0.5 s), not after its 600 s timeout; AsyncEnvScalerEnv.step on such a client
    comes back truncated (session_lost), as for any replica that died."""
    with start_bridge(envs=[NOTES_ENVS], replicas=1) as bridge:
        assert bridge.process is not None

        async def go() -> None:
            loop = asyncio.get_running_loop()
            async with bridge.async_client(0, timeout=600) as c:
                assert c.gone is not None
                env = AsyncEnvScalerEnv(client=c, scenario_ids=["notes-1"])
                await env.reset(seed=0)
                await env.step(REFERENCE_ACTIONS[0])
                r = await c.reset("notes-1", seed=1)
                replicas = bridge.replica_pids()
                assert replicas
                for pid in replicas:
                    os.kill(pid, signal.SIGSTOP)  # the requests below wait for replies that cannot come
                raw = asyncio.ensure_future(c.step(r["session_id"], REFERENCE_ACTIONS[0]))
                stepped = asyncio.ensure_future(env.step(REFERENCE_ACTIONS[1]))
                await asyncio.sleep(0.6)
                assert not raw.done() and not stepped.done()  # mid-request, watched once already
                killed_at = loop.time()
                os.kill(bridge.process.pid, signal.SIGKILL)
                bridge.process.wait(30)
                for pid in replicas:
                    os.kill(pid, signal.SIGKILL)
                with pytest.raises(BridgeExited, match=r"^bridge_exited: bridge exited \(exit code -9\)"):
                    await raw
                _, reward, terminated, truncated, info = await stepped
                assert loop.time() - killed_at < 1.5
                assert truncated and not terminated and reward == 0.0
                assert info["error"]["code"] == "session_lost" and "bridge exited (exit code -9)" in info["error"]["message"]
                # a request after the exit fails before it is sent
                sent_at = loop.time()
                with pytest.raises(BridgeExited):
                    await c.hello()
                assert loop.time() - sent_at < 0.2
                await env.close()

        asyncio.run(go())
