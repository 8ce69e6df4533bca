"""Every §5 error code a client can provoke, raised as its own exception class."""

from __future__ import annotations

import json
import time

import pytest

import envscaler
from envscaler import EnvScalerEnv
from envscaler.protocol import (
    BadRequest,
    BridgeError,
    EpisodeDone,
    SessionClosed,
    TooManySessions,
    UnknownEnv,
    UnknownOp,
    UnknownScenario,
    UnknownSession,
    UnsupportedVersion,
    packb,
    unpackb,
)

from helpers import FINAL_REPLY, REFERENCE_ACTIONS, play_reference, start_bridge


def test_bad_request(client):
    with pytest.raises(BadRequest) as e:
        client.request("hello", colour="red")
    assert e.value.code == "bad_request" and "colour" in e.value.message
    with pytest.raises(BadRequest):
        client.request("reset", scenario_id="notes-1", seed=2**32)  # seed out of range
    with pytest.raises(BadRequest):
        client.request("step_batch", steps=[{"session_id": "s-a", "action": "x"}, {"session_id": "s-a", "action": "y"}])


def test_unsupported_version(client):
    client.send_raw(packb({"v": 1, "id": 41, "op": "hello"}))  # the previous version
    reply = unpackb(client.recv_raw(timeout=10)[-1])
    assert reply["id"] == 41 and reply["error"]["code"] == "unsupported_version"
    exc = envscaler.error_for(reply["error"]["code"], reply["error"]["message"])
    assert isinstance(exc, UnsupportedVersion)


def test_unknown_op(client):
    with pytest.raises(UnknownOp) as e:
        client.request("rm_rf")
    assert "rm_rf" in e.value.message


def test_unknown_env(client):
    with pytest.raises(UnknownEnv):
        client.list_scenarios(env_id="no-such-env")


def test_unknown_scenario(client):
    with pytest.raises(UnknownScenario):
        client.reset("no-such-scenario")
    before = client.stats()["sessions"]
    with pytest.raises(UnknownScenario):
        client.reset("no-such-scenario")
    assert client.stats()["sessions"] == before  # no session leaked for the failed reset


def test_unknown_session(client):
    for op in ("step", "state", "finish", "close"):
        fields = {"action": "hi"} if op == "step" else {}
        with pytest.raises(UnknownSession):
            client.request(op, session_id="s-0-00000000-" + "0" * 32, **fields)
    with pytest.raises(UnknownSession):
        client.reset("notes-1", session_id="s-9-nope")


def test_session_closed_after_close(client):
    sid = client.reset("notes-1")["session_id"]
    assert client.close_session(sid) is True
    assert client.close_session(sid) is True  # closing twice is fine (§4 close)
    with pytest.raises(SessionClosed) as e:
        client.step(sid, REFERENCE_ACTIONS[0])
    assert "closed by the client" in e.value.message
    with pytest.raises(SessionClosed):
        client.reset("notes-1", session_id=sid)
    with pytest.raises(SessionClosed):
        client.state(sid)


def test_episode_done(client):
    sid = client.reset("notes-1")["session_id"]
    done = play_reference(client.step, sid)
    assert done["terminated"] is True and float(done["reward"]) == 1.0
    with pytest.raises(EpisodeDone):
        client.step(sid, FINAL_REPLY)
    batched = client.step_batch([(sid, FINAL_REPLY)])
    assert len(batched) == 1 and isinstance(batched[0], EpisodeDone)  # returned per entry, not raised
    with pytest.raises(EpisodeDone):
        client.finish(sid)
    # the session itself lives on: reset starts a new episode in it
    again = client.reset("notes-1", session_id=sid)
    assert again["session_id"] == sid
    assert client.step(sid, REFERENCE_ACTIONS[0])["terminated"] is False
    client.close_session(sid)


def test_session_closed_by_the_idle_reaper():
    with start_bridge(extra=("--idle-timeout", "1")) as b, b.client(timeout=10) as c:
        assert c.hello()["limits"]["idle_timeout_s"] == 1
        sid = c.reset("notes-1")["session_id"]
        busy = c.reset("notes-1")["session_id"]
        env = EnvScalerEnv(client=c, scenario_ids=["notes-1"])
        env.reset(seed=1)
        first_session = env.session_id
        # keep one session in use while the other sits idle past the timeout
        deadline = time.monotonic() + 2.2
        while time.monotonic() < deadline:
            c.state(busy)
            time.sleep(0.2)
        with pytest.raises(SessionClosed) as e:
            c.step(sid, REFERENCE_ACTIONS[0])
        assert "idle reaper" in e.value.message
        assert c.step(busy, REFERENCE_ACTIONS[0])["terminated"] is False
        # an env whose session was reaped opens a new one on its next reset
        obs, _ = env.reset()
        assert env.session_id != first_session and obs
        assert env.step(REFERENCE_ACTIONS[0])[2] is False
        env.close()


def test_too_many_sessions():
    with start_bridge(extra=("--max-sessions", "2")) as b, b.client(timeout=10) as c:
        assert c.hello()["limits"]["max_sessions"] == 2
        a = c.reset("notes-1")["session_id"]
        c.reset("notes-1")
        with pytest.raises(TooManySessions):
            c.reset("notes-1")
        # re-resetting an existing session does not need a new one
        assert c.reset("notes-2", session_id=a)["session_id"] == a
        c.close_session(a)
        third = c.reset("notes-1")["session_id"]
        assert third != a
        assert c.stats()["sessions"] == 2


def test_env_fault_ends_only_its_episode(bridge):
    """A spinning tool gives a terminal step with env_timeout; other sessions go on."""
    with bridge.client(0, timeout=30) as c:
        bystander = c.reset("notes-1")["session_id"]
        assert c.step(bystander, REFERENCE_ACTIONS[0])["terminated"] is False
        hostile = c.reset("hostile-1")["session_id"]
        assert json.loads(c.step(hostile, {"name": "ping", "arguments": {}})["observation"]["content"]) == "pong"
        r = c.step(hostile, {"name": "spin", "arguments": {}})
        assert r["terminated"] is True and r["truncated"] is False and float(r["reward"]) == 0.0
        assert r["info"]["end_reason"] == "env_fault"
        assert r["info"]["error"]["code"] == "env_timeout"
        assert json.loads(r["observation"]["content"])["error"]["type"] == "env_timeout"
        with pytest.raises(EpisodeDone):
            c.step(hostile, {"name": "ping", "arguments": {}})
        # the bystander's episode is untouched
        assert c.step(bystander, REFERENCE_ACTIONS[1])["terminated"] is False
        done = c.step(bystander, FINAL_REPLY)
        assert float(done["reward"]) == 1.0
        # the faulted session resets and plays normally
        c.reset("hostile-1", session_id=hostile)
        c.step(hostile, {"name": "touch", "arguments": {}})
        fin = c.step(hostile, "flag set")
        assert fin["terminated"] is True and float(fin["reward"]) == 1.0
        c.close_session(bystander)
        c.close_session(hostile)


# Which limit stops a call is decided by which is reached first: the memory and output bombs run
# in faults-v1, whose 60 s deadline they cannot reach, so a slow (loaded) machine cannot turn
# their env_oom / env_output_invalid into env_timeout, as hostile-v1's 300 ms deadline did.
@pytest.mark.parametrize(("tool", "code", "scenario"), [("bomb", "env_oom", "faults-1"), ("big_output", "env_output_invalid", "faults-1"), ("native_hang", "env_timeout", "hostile-1")])
def test_other_env_faults(bridge, tool, code, scenario):
    with bridge.client(1, timeout=30) as c:
        bystander = c.reset("notes-1")["session_id"]
        c.step(bystander, REFERENCE_ACTIONS[0])
        hostile = c.reset(scenario)["session_id"]
        r = c.step(hostile, {"name": tool, "arguments": {}})
        assert r["terminated"] is True and r["info"]["error"]["code"] == code, r["info"]
        assert r["info"]["end_reason"] == "env_fault" and float(r["reward"]) == 0.0
        # even when the engine worker had to be replaced (native_hang), the bystander's episode survives
        assert c.step(bystander, REFERENCE_ACTIONS[1])["terminated"] is False
        assert float(c.step(bystander, FINAL_REPLY)["reward"]) == 1.0
        assert c.reset(scenario, session_id=hostile)["session_id"] == hostile
        c.close_session(bystander)
        c.close_session(hostile)


def test_bridge_errors_are_one_hierarchy(client):
    with pytest.raises(BridgeError):
        client.reset("no-such-scenario")
