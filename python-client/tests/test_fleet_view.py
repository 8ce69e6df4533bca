"""Fleet clients without Ray: a FleetView over real bridges whose membership the test changes.

This is what envscaler.ray's registry gives the clients, minus Ray: two CurveZMQ bridges that
allow one shared client key (as a fleet's replicas do), and a source the test edits to withdraw
a replica the way the registry does when a node dies.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time

import pytest
import zmq

import envscaler
from envscaler import EnvScalerVectorEnv
from envscaler.fleet_view import FleetView

from helpers import FINAL_REPLY, NOTES_ENVS, REFERENCE_ACTIONS, start_bridge


def test_importing_envscaler_does_not_import_ray():
    code = "import sys, envscaler, envscaler.fleet_view, envscaler.fleet_vector_env; assert 'ray' not in sys.modules, 'ray imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


class Source:
    """A registry stand-in: a version and the replicas it lists."""

    def __init__(self, replicas, keys):
        self.version, self.replicas, self.keys = 1, list(replicas), keys

    def __call__(self, since):
        return None if since == self.version else (self.version, list(self.replicas), self.keys)

    def withdraw(self, uid):
        self.replicas = [r for r in self.replicas if r["uid"] != uid]
        self.version += 1


@pytest.fixture
def two_bridges(tmp_path):
    public, secret = zmq.curve_keypair()
    allow = tmp_path / "allow"
    allow.write_text(public.decode() + "\n")
    keys = {"client_public_key": public.decode(), "client_secret_key": secret.decode()}
    with start_bridge(envs=[NOTES_ENVS], curve=True, extra=("--curve-allow", str(allow))) as a, start_bridge(envs=[NOTES_ENVS], curve=True, extra=("--curve-allow", str(allow))) as b:
        replicas = [{"uid": name, "endpoint": br.endpoints[0], "server_public_key": br.curve["server_public_key"], "node_id": name} for name, br in (("a", a), ("b", b))]
        yield Source(replicas, keys), {"a": a, "b": b}


def test_vector_env_over_a_fleet_spreads_sticks_and_survives_a_withdrawn_replica(two_bridges):
    source, bridges = two_bridges
    view = FleetView(source, refresh_interval=0, timeout=20)
    vec = EnvScalerVectorEnv(view, 4, scenario_ids=["notes-1"])
    try:
        assert type(vec).__name__ == "FleetVectorEnv"
        vec.reset(seed=1)
        placed = [vec.replica_uid(i) for i in range(4)]
        assert sorted(placed) == ["a", "a", "b", "b"]  # by load
        sessions = list(vec.session_ids)
        vec.step([REFERENCE_ACTIONS[0]] * 4)
        assert [vec.replica_uid(i) for i in range(4)] == placed and vec.session_ids == sessions  # sticky
        # b dies without a word (SIGKILL: no reply ever comes) and the registry withdraws it
        bridges["b"].process.kill()
        bridges["b"].process.wait()
        source.withdraw("b")
        _, r, _, tr, info = vec.step([REFERENCE_ACTIONS[1]] * 4)
        for i in range(4):
            if placed[i] == "b":
                assert tr[i] and info["error"]["code"][i] == "session_lost" and "left the fleet" in info["error"]["message"][i]
            else:
                assert not tr[i] and info["observation"]["role"][i] == "tool"
        assert vec.lost_episodes == 2
        _obs, r, te, tr, info = vec.step([FINAL_REPLY] * 4)  # a's episodes finish; b's autoreset onto a
        assert [vec.replica_uid(i) for i in range(4)] == ["a"] * 4
        for i in range(4):
            assert (r[i] == 1.0 and te[i]) if placed[i] == "a" else (not te[i] and info["observation"]["role"][i] == "user")
    finally:
        vec.close()


def test_a_request_in_flight_when_its_replica_is_withdrawn_ends_without_the_timeout(two_bridges):
    source, bridges = two_bridges
    view = FleetView(source, refresh_interval=0, timeout=60)
    vec = EnvScalerVectorEnv(view, 2, scenario_ids=["notes-1"])
    try:
        vec.reset(seed=2)
        on_b = [i for i in range(2) if vec.replica_uid(i) == "b"]
        frozen = bridges["b"].replica_pids()
        for pid in frozen:
            os.kill(pid, signal.SIGSTOP)  # b's replica takes the request and never answers
        try:
            threading.Timer(1.0, source.withdraw, args=("b",)).start()
            t0 = time.monotonic()
            _obs, _r, _te, tr, info = vec.step([REFERENCE_ACTIONS[0]] * 2)  # 60 s timeout, but b is withdrawn after 1 s
            assert time.monotonic() - t0 < 30  # ended by the withdrawal, not by the request timeout
            assert [bool(tr[i]) for i in on_b] == [True] and info["error"]["code"][on_b[0]] == "session_lost"
        finally:
            for pid in frozen:
                os.kill(pid, signal.SIGCONT)  # so the bridge can stop normally
    finally:
        vec.close()


def test_async_env_on_a_fleet(two_bridges):
    source, bridges = two_bridges
    view = FleetView(source, refresh_interval=0, timeout=20)

    async def main():
        envs = [envscaler.AsyncEnvScalerEnv(fleet=view, scenario_ids=["notes-1"]) for _ in range(4)]
        await asyncio.gather(*(e.reset(seed=i) for i, e in enumerate(envs)))
        assert sorted(e.replica for e in envs) == ["a", "a", "b", "b"]
        await asyncio.gather(*(e.step(REFERENCE_ACTIONS[0]) for e in envs))
        bridges["b"].process.kill()
        bridges["b"].process.wait()
        source.withdraw("b")
        results = await asyncio.gather(*(e.step(REFERENCE_ACTIONS[1]) for e in envs))
        for e, (_obs, _reward, _terminated, truncated, info) in zip(envs, results):
            if e.replica == "b":
                assert truncated and info["error"]["code"] == "session_lost"
            else:
                assert not truncated and info["observation"]["role"] == "tool"
        # a new episode of a lost env starts on the live replica and plays to the end
        lost = next(e for e in envs if e.replica == "b")
        await lost.reset(seed=9)
        assert lost.replica == "a"
        for a in REFERENCE_ACTIONS:
            await lost.step(a)
        assert (await lost.step(FINAL_REPLY))[1] == 1.0
        for e in envs:
            await e.close()
        await view.aclose()

    asyncio.run(main())
