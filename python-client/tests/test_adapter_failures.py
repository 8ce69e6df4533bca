"""How the trainer adapters report a bridge that fails (issue 29): a reset that gets no reply, finds
nothing listening or finds the launched bridge exited is an EpisodeInfrastructureError (as a step's
failure is), with the error code said once; TRL's on_infra_error="skip" covers resets; SkyRL's
metrics do not count such an episode as a failed task; a launched bridge that exited is named at
once instead of after the client's timeout.

The "bridge" of most tests is a scripted ZeroMQ ROUTER on 127.0.0.1 that answers ``reset`` and
nothing else: a bridge that has stopped answering, without waiting a minute for one."""

from __future__ import annotations

import os
import signal
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import zmq

from envscaler import Bridge, BridgeExited
from envscaler.adapters.bridge_episode import EndpointPool, EpisodeInfrastructureError
from envscaler.adapters.skyrl import EnvScalerTextEnv
from envscaler.adapters.trl import make_env_class
from envscaler.protocol import PROTOCOL_VERSION, packb, unpackb

from helpers import NOTES_ENVS, REFERENCE_ACTIONS, start_bridge

RESET_RESULT = {
    "session_id": "s-1",
    "observation": {"role": "user", "content": "Ping once."},
    "info": {"scenario_id": "x-1", "env_id": "x-v1", "seed": 0, "episode_id": "e-1", "tools": [], "max_steps": 4},
}


class Mute:
    """A ROUTER that answers the ops in ``answers`` and stays silent on every other."""

    def __init__(self, answers: dict[str, dict[str, Any]]) -> None:
        self.answers = answers
        self.seen: list[str] = []
        self._stop = threading.Event()
        self._ready = threading.Event()
        self.endpoint = ""
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()
        assert self._ready.wait(10)

    def _serve(self) -> None:
        ctx = zmq.Context.instance()
        sock = ctx.socket(zmq.ROUTER)
        sock.linger = 0
        sock.bind("tcp://127.0.0.1:*")
        self.endpoint = sock.getsockopt_string(zmq.LAST_ENDPOINT)
        self._ready.set()
        try:
            while not self._stop.is_set():
                if not sock.poll(50):
                    continue
                ident, *rest = sock.recv_multipart()
                req = unpackb(rest[-1])
                self.seen.append(req["op"])
                if req["op"] in self.answers:
                    sock.send_multipart([ident, packb({"v": PROTOCOL_VERSION, "id": req["id"], "ok": True, "result": self.answers[req["op"]]})])
        finally:
            sock.close(linger=0)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)


@pytest.fixture
def mute() -> Iterator[Mute]:
    m = Mute({"reset": RESET_RESULT})
    yield m
    m.stop()


@pytest.fixture
def silent() -> Iterator[Mute]:
    m = Mute({})
    yield m
    m.stop()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_reset_without_reply_is_an_infrastructure_error_with_its_code_once(silent: Mute) -> None:
    with EndpointPool(silent.endpoint, timeout=1) as pool:
        ep = pool.episode()
        with pytest.raises(EpisodeInfrastructureError) as got:
            ep.reset("x-1", 0)
    e = got.value
    assert e.code == "timeout" and ep.failure is e and not ep.live
    assert str(e).startswith(f"reset failed on replica 0 ({silent.endpoint}): timeout: no reply")
    assert str(e).count("timeout:") == 1
    # the endpoint still accepts connections: the message says the bridge may be gone or busy
    assert "may be gone" in str(e)


def test_a_reset_with_nothing_listening_is_an_infrastructure_error() -> None:
    endpoint = f"tcp://127.0.0.1:{_free_port()}"
    with EndpointPool(endpoint, timeout=10) as pool:
        ep = pool.episode()
        with pytest.raises(EpisodeInfrastructureError) as got:
            ep.reset("x-1", 0)
    assert got.value.code == "bridge_not_running" and "connection to" in str(got.value)
    assert str(got.value).count("bridge_not_running:") == 1


def test_a_step_without_reply_names_its_code_once(mute: Mute) -> None:
    with EndpointPool(mute.endpoint, timeout=1) as pool:
        ep = pool.episode()
        obs, info = ep.reset("x-1", 0)
        assert obs == "Ping once." and info["scenario_id"] == "x-1"
        with pytest.raises(EpisodeInfrastructureError) as got:
            ep.step({"name": "ping", "arguments": {}})
    msg = str(got.value)
    assert msg.startswith(f"step failed on replica 0 ({mute.endpoint}): timeout: no reply") and "timeout: timeout" not in msg


def _trl_env(pool: EndpointPool, on_infra_error: str) -> Any:
    env = {"env_id": "x-v1", "tools": [{"type": "function", "function": {"name": "ping", "description": "Ping.", "parameters": {"type": "object", "properties": {}}}}]}
    return make_env_class(env, pool, [{"scenario_id": "x-1", "env_id": "x-v1", "mode": "task"}], on_infra_error)()


def test_trl_skip_covers_a_failed_reset(silent: Mute) -> None:
    with EndpointPool(silent.endpoint, timeout=1) as pool:
        raising = _trl_env(pool, "raise")
        with pytest.raises(EpisodeInfrastructureError, match=r"^reset failed"):
            raising.reset(scenario_id="x-1", seed=0)
        skipping = _trl_env(pool, "skip")
        assert skipping.reset(scenario_id="x-1", seed=0) is None  # logged, not raised: train() goes on
        # the rollout is unscored: its tools answer with the failure (TRL shows a tool's exception
        # as its result) and get_reward() gives None, which TRL leaves out of the group's baseline
        with pytest.raises(EpisodeInfrastructureError, match=r"^reset failed"):
            skipping.ping()
        assert skipping.get_reward() is None


def test_skyrl_metrics_count_an_infrastructure_failure_not_a_failed_task(silent: Mute) -> None:
    env = EnvScalerTextEnv({"endpoints": [silent.endpoint], "timeout": 1}, {"extra_info": {"scenario_id": "x-1", "seed": 0}})
    with pytest.raises(EpisodeInfrastructureError):
        env.init()
    assert env.get_metrics() == {"steps": 0, "env_faults": 0, "infra_failures": 1.0}  # no "success": the task was not played
    env.close()


def _kill_bridge(bridge: Bridge) -> None:
    """SIGKILL the serve process, then its replicas (which it would otherwise have restarted)."""
    assert bridge.process is not None
    replicas = bridge.replica_pids()
    os.kill(bridge.process.pid, signal.SIGKILL)
    bridge.process.wait(30)
    for pid in replicas:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_a_launched_bridge_that_exited_is_named_at_once(built_bridge: None) -> None:
    with start_bridge(envs=[NOTES_ENVS], replicas=1) as bridge:
        # a long timeout: the old client waited it out and then said only "timeout"
        with EndpointPool(bridge, timeout=600) as pool:
            ep = pool.episode()
            ep.reset("notes-1", 0)
            assert ep.step(REFERENCE_ACTIONS[0]) is not None
            assert bridge.exited() is None
            _kill_bridge(bridge)
            assert bridge.exited() is not None and bridge.exited().startswith("bridge exited (exit code -9)")  # type: ignore[union-attr]
            with pytest.raises(EpisodeInfrastructureError) as got:
                ep.step(REFERENCE_ACTIONS[1])
            assert got.value.code == "bridge_exited" and "bridge exited (exit code -9)" in str(got.value)
            assert isinstance(got.value.cause, BridgeExited)
            # a new episode's reset says the same, not "start one with npx envscaler serve"
            with pytest.raises(EpisodeInfrastructureError, match=r"bridge exited \(exit code -9\)") as again:
                pool.episode().reset("notes-1", 0)
            assert "npx envscaler serve" not in str(again.value)
        # a client of the Bridge (not of an adapter) is told the same on its first request
        with bridge.client(0, timeout=600) as c, pytest.raises(BridgeExited, match=r"^bridge_exited: bridge exited \(exit code -9\)"):
            c.hello()
