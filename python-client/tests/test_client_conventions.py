"""What other libraries expect of an env, with the real packages (GEM ``gem-llm``, Gymnasium):
GEM's ``make_vec`` seeds every constructor, Gymnasium's async vector env uses shared memory by
default, a ``TimeLimit`` truncation must not leave the bridge episode unscored, and a bridge that is
not running must be reported at once, by endpoint."""

from __future__ import annotations

import copy
import json
import socket
import time

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector.utils import create_shared_memory, read_from_shared_memory, write_to_shared_memory
from gymnasium.wrappers import TimeLimit

import envscaler
from envscaler import AnyText, EnvScalerEnv, EnvScalerVectorEnv
from envscaler.adapters.gem import EnvScalerGemEnv
from envscaler.reachability import BridgeNotRunning, check_reachable

from helpers import NOTES_1_TASK, REFERENCE_ACTIONS, notes_scenarios


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ------------------------------------------------------------------ a bridge that is not running


def test_a_bridge_that_is_not_running_fails_at_once_naming_the_endpoint(tmp_path):
    endpoint = f"tcp://127.0.0.1:{_free_port()}"
    started = time.monotonic()
    for make in (
        lambda: EnvScalerEnv(endpoint),
        lambda: EnvScalerVectorEnv([endpoint], num_envs=2),
        lambda: EnvScalerGemEnv(endpoint),
        lambda: gym.make(envscaler.ENV_ID, endpoint=endpoint),
        lambda: envscaler.AsyncEnvScalerEnv(endpoint),
    ):
        with pytest.raises(BridgeNotRunning, match=rf"connection to {endpoint} refused; is a bridge running at {endpoint}\?"):
            make()
    assert time.monotonic() - started < 30  # not the 60 s request timeout it used to wait (generous: a loaded CI box)
    with pytest.raises(BridgeNotRunning, match="does not exist"):
        check_reachable(f"ipc://{tmp_path}/no-bridge.sock")
    check_reachable("tcp://127.0.0.1:*")  # a bind pattern is left to ZeroMQ, not refused here


def test_the_low_level_clients_probe_a_silent_first_contact(bridge):
    """BridgeClient and AsyncBridgeClient (what ``connect(file).client()`` gives) used to wait their
    whole timeout (60 s) on a dead endpoint; after PROBE_AFTER_S of silence they check it."""
    import asyncio

    from envscaler.async_bridge_client import AsyncBridgeClient
    from envscaler.bridge_client import PROBE_AFTER_S, BridgeClient

    endpoint = f"tcp://127.0.0.1:{_free_port()}"
    started = time.monotonic()
    with BridgeClient(endpoint, timeout=60) as c:
        with pytest.raises(BridgeNotRunning, match=rf"connection to {endpoint} refused"):
            c.hello()
        assert not c._pending  # the request was given up, not left waiting

    async def async_hello() -> None:
        async with AsyncBridgeClient(endpoint, timeout=60) as ac:
            await ac.hello()

    with pytest.raises(BridgeNotRunning, match=rf"connection to {endpoint} refused"):
        asyncio.run(async_hello())
    assert time.monotonic() - started < 30  # two probes after PROBE_AFTER_S each, not two 60 s timeouts
    assert PROBE_AFTER_S <= 2
    # a running bridge answers before the probe, and a later silence is a plain timeout
    with BridgeClient(bridge.endpoints[0], timeout=60) as c:
        assert c.hello()["protocol_version"] >= 1


def test_a_running_bridge_is_reachable(bridge):
    for endpoint in bridge.endpoints:
        check_reachable(endpoint)


# ------------------------------------------------------------------ GEM


def test_gem_make_vec_passes_seed_to_each_constructor(bridge):
    gem = pytest.importorskip("gem", reason="gem-llm is in the python-client[test] extra")
    env_id = "envscaler-test:notes-1"
    if env_id not in gem.envs.registration.ENV_REGISTRY:
        gem.register(env_id, entry_point=EnvScalerGemEnv, endpoint=bridge.endpoints[0], scenario_ids=["notes-1"])
    vec = gem.make_vec([env_id, env_id], seed=7)
    try:
        obs, _ = vec.reset()
        assert list(obs) == [NOTES_1_TASK, NOTES_1_TASK]
        # seeded constructors: the same seed gives the same episode seeds, different seeds differ
        a, b = (EnvScalerGemEnv(bridge.endpoints[0], scenario_ids=["notes-1"], seed=s) for s in (7, 7))
        c = EnvScalerGemEnv(bridge.endpoints[0], scenario_ids=["notes-1"], seed=8)
        try:
            seeds = [e.reset()[1]["seed"] for e in (a, b, c)]
            assert seeds[0] == seeds[1] != seeds[2]
        finally:
            for e in (a, b, c):
                e.close()
    finally:
        for e in vec.envs:  # GEM 0.1.0's SyncVectorEnv has no close()
            e.close()


# ------------------------------------------------------------------ Gymnasium async vector env


def test_make_vec_async_with_default_shared_memory(bridge):
    vec = gym.make_vec(
        envscaler.ENV_ID,
        num_envs=2,
        vectorization_mode="async",
        endpoint=bridge.endpoints[0],
        scenario_ids=["notes-1"],
    )
    try:
        assert vec.shared_memory is True
        obs, _ = vec.reset(seed=3)
        assert list(obs) == [NOTES_1_TASK, NOTES_1_TASK]
        obs, _reward, terminated, _truncated, _ = vec.step(np.array([REFERENCE_ACTIONS[0], "All done."], dtype=object))
        # each step's observations are the new ones (not the reset's, read once from the buffer)
        assert json.loads(obs[0])["success"] is True
        assert obs[1] == "Task finished" and terminated.tolist() == [False, True]
    finally:
        vec.close()


def test_shared_text_memory_round_trip_and_its_limit(monkeypatch):
    monkeypatch.setenv("ENVSCALER_SHARED_TEXT_BYTES", "64")
    space = AnyText()
    buffer = create_shared_memory(space, n=2)
    view = read_from_shared_memory(space, buffer, n=2)
    write_to_shared_memory(space, 0, "héllo ✓", buffer)
    write_to_shared_memory(space, 1, '{"a": 1}', buffer)
    snapshot = copy.deepcopy(view)
    assert isinstance(snapshot, np.ndarray) and snapshot.tolist() == ["héllo ✓", '{"a": 1}']
    write_to_shared_memory(space, 0, "next", buffer)
    assert view[0] == "next" and snapshot[0] == "héllo ✓"  # the view is live, the copy is not
    with pytest.raises(ValueError, match="does not fit the shared-memory slot of 60 bytes; raise ENVSCALER_SHARED_TEXT_BYTES"):
        write_to_shared_memory(space, 1, "x" * 61, buffer)


# ------------------------------------------------------------------ step limits (TimeLimit)


def test_max_steps_scores_the_truncated_step(bridge):
    env = gym.make(envscaler.ENV_ID, endpoint=bridge.endpoints[0], scenario_ids=["notes-1"], max_steps=len(REFERENCE_ACTIONS))
    try:
        env.reset(seed=1)
        for i, action in enumerate(REFERENCE_ACTIONS):
            obs, reward, terminated, truncated, info = env.step(action)
            if i < len(REFERENCE_ACTIONS) - 1:
                assert not (terminated or truncated)
        assert truncated and not terminated
        assert info["truncated_by"] == "max_steps" and info["end_reason"] == "client"
        checks = notes_scenarios()["notes-1"]["checks"]
        assert info["reward_info"]["total"] == len(checks)
        assert reward == info["reward_info"]["passed"] / len(checks) and reward > 0  # the reference work was scored
        assert '"success"' in obs  # the observation is the last tool result, not the finish notice
    finally:
        env.close()


def test_a_hand_wrapped_time_limit_reset_or_close_mid_episode_scores_the_episode(bridge):
    inner = EnvScalerEnv(bridge.endpoints[0], scenario_ids=["notes-1"])
    finished: list[dict] = []
    real_finish = inner.client.finish

    def spy(session_id, **kw):
        finished.append(real_finish(session_id, **kw))
        return finished[-1]

    inner.client.finish = spy  # type: ignore[method-assign]
    env = TimeLimit(inner, max_episode_steps=1)
    try:
        env.reset(seed=1)
        _, reward, _terminated, truncated, info = env.step(REFERENCE_ACTIONS[0])
        assert truncated and "end_reason" not in info and reward == 0.0  # TimeLimit alone: the bridge episode is open
        _, info = env.reset(seed=2)  # ... so reset scores it before starting the next one, in the same request
        prev = info["previous_episode"]
        assert not finished and prev["finished"] and prev["end_reason"] == "client" and "reward_info" in prev
        env.step(REFERENCE_ACTIONS[0])
        env.close()  # closing mid-episode scores it too (a finish)
        assert len(finished) == 1 and finished[0]["info"]["end_reason"] == "client"
    finally:
        env.close()


def test_an_episode_the_bridge_ended_is_not_finished_again(bridge):
    env = EnvScalerEnv(bridge.endpoints[0], scenario_ids=["notes-1"])
    calls: list[str] = []
    real_finish = env.client.finish
    env.client.finish = lambda sid, **kw: (calls.append(sid), real_finish(sid, **kw))[1]  # type: ignore[method-assign]
    try:
        env.reset(seed=1)
        _, _, terminated, _, _ = env.step("All done.")
        assert terminated
        env.reset(seed=1)
        env.close()
        assert len(calls) == 1  # only the second (unfinished) episode, at close
    finally:
        env.close()


def test_a_send_that_cannot_leave_is_bounded_by_the_timeout():
    """A DEALER blocks in send once its queue is full or it has no connection (as after a refused
    CurveZMQ handshake): the request fails with BridgeTimeout after the client's timeout instead of
    hanging for ever. Here nothing listens, so the queue (1,000 messages) fills."""
    from envscaler import BridgeClient, BridgeTimeout

    with BridgeClient(f"tcp://127.0.0.1:{_free_port()}", timeout=0.5) as c:
        t0 = time.monotonic()
        with pytest.raises(BridgeTimeout, match="could not send"):
            for _ in range(5000):
                c.submit("hello")
        assert time.monotonic() - t0 < 30
