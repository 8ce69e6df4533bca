"""The one episode state machine (envscaler.episode_logic.Episode) as every env class shows it:
misuse raises Gymnasium's exception types, a session the bridge lost is reopened at the next
reset, and close is final."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import gymnasium
import pytest

from envscaler import AsyncEnvScalerEnv, EnvScalerEnv, EnvScalerVectorEnv
from envscaler.adapters.gem import EnvScalerGemEnv
from envscaler.adapters.roll import EnvScalerRollEnv

#: each sync env class: (make it on a client, reset it, step it with a text reply)
SYNC: dict[str, tuple[Callable[[Any], Any], Callable[[Any], Any], Callable[[Any], Any]]] = {
    "EnvScalerEnv": (lambda c: EnvScalerEnv(client=c, scenario_ids=["notes-1"]), lambda e: e.reset(seed=1), lambda e: e.step("hello")),
    "EnvScalerGemEnv": (lambda c: EnvScalerGemEnv(client=c, scenario_ids=["notes-1"]), lambda e: e.reset(seed=1), lambda e: e.step("hello")),
    "EnvScalerRollEnv": (lambda c: EnvScalerRollEnv(client=c, scenario_ids=["notes-1"]), lambda e: e.reset(seed=1, task_index=0), lambda e: e.step("hello")),
}


@pytest.mark.parametrize("kind", sorted(SYNC))
def test_sync_envs_share_the_episode_state_machine(bridge, kind):
    make, reset, step = SYNC[kind]
    with bridge.client(0, timeout=30) as c:
        env = make(c)
        with pytest.raises(gymnasium.error.ResetNeeded):
            step(env)
        with pytest.raises(RuntimeError):  # the type these envs raised before stays catchable
            step(env)
        reset(env)
        first = env.session_id
        assert first is not None and env.episode.live
        step(env)  # a text reply ends a task episode
        assert not env.episode.live
        # the bridge loses the session (closed behind the env's back): the next reset opens a new one
        c.close_session(first)
        reset(env)
        assert env.session_id not in (None, first) and env.episode.live
        env.close()
        env.close()  # idempotent
        assert env.session_id is None and not c.closed  # a shared client stays open
        with pytest.raises(gymnasium.error.ClosedEnvironmentError):
            reset(env)
        with pytest.raises(gymnasium.error.ClosedEnvironmentError):
            step(env)


def test_async_env_shares_the_episode_state_machine(bridge):
    async def main() -> None:
        env = AsyncEnvScalerEnv(bridge.endpoints[0], scenario_ids=["notes-1"])
        with pytest.raises(gymnasium.error.ResetNeeded):
            await env.step("hello")
        await env.reset(seed=1)
        first = env.session_id
        await env.client.close_session(first)
        await env.reset(seed=1)
        assert env.session_id not in (None, first)
        await env.close()
        with pytest.raises(gymnasium.error.ClosedEnvironmentError):
            await env.step("hello")

    asyncio.run(main())


def test_vector_env_shares_the_episode_state_machine(bridge):
    vec = EnvScalerVectorEnv(bridge.endpoints, num_envs=2, scenario_ids=["notes-1"])
    with pytest.raises(gymnasium.error.ResetNeeded):
        vec.step(["hello", "hello"])
    with pytest.raises(gymnasium.error.ResetNeeded):
        vec.state(0)
    vec.reset(seed=3)
    assert all(e.live for e in vec.episodes)
    _, _, terminated, _, _ = vec.step(["hello", "hello"])
    assert terminated.all() and not any(e.live for e in vec.episodes)
    vec.close()
    with pytest.raises(gymnasium.error.ClosedEnvironmentError):
        vec.step(["hello", "hello"])
