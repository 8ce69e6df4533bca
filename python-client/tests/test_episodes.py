"""Whole episodes over the wire, on 1 replica and on 2, with BridgeClient."""

from __future__ import annotations

import json
import os

import pytest

import envscaler
from envscaler import BridgeClient, BridgeTimeout
from envscaler.protocol import PROTOCOL_VERSION, EpisodeDone

from helpers import BUNDLED_ENVS, FINAL_REPLY, NOTES_1_TASK, REFERENCE_ACTIONS, play_reference, wait_for


def _check_solved(result: dict) -> None:
    assert result["terminated"] is True and result["truncated"] is False
    assert float(result["reward"]) == 1.0
    info = result["info"]
    assert info["end_reason"] == "text_reply"
    assert info["reward_info"]["passed"] == info["reward_info"]["total"] == 3
    assert all(c["passed"] for c in info["reward_info"]["checks"])


def test_launch_yields_a_served_bridge(bridge1):
    assert bridge1.process is not None and bridge1.process.poll() is None
    assert bridge1.connection["protocol_version"] == PROTOCOL_VERSION == 2
    assert bridge1.connection["replicas"] == 1 and len(bridge1.endpoints) == 1
    assert bridge1.connection["pid"] == bridge1.process.pid
    assert bridge1.curve is None and bridge1.connection["curve"] is None
    assert bridge1.endpoints[0].startswith("tcp://127.0.0.1:") and not bridge1.endpoints[0].endswith("*")
    # connect() reads the same file
    joined = envscaler.connect(bridge1.connection_file)
    assert joined.endpoints == bridge1.endpoints and joined.connection == bridge1.connection
    assert oct(os.stat(bridge1.connection_file).st_mode & 0o777) == oct(0o600)


def test_hello_list_envs_list_scenarios(bridge1):
    with bridge1.client() as c:
        hello = c.hello()
        assert hello["protocol_version"] == envscaler.PROTOCOL_VERSION
        assert hello["server"] == "envscaler" and hello["replica"] == 0 and hello["instance"]
        assert set(hello["limits"]) == {
            "max_frame_bytes",
            "max_sessions",
            "max_in_flight",
            "idle_timeout_s",
            "max_depth",
            "max_batch",
            "max_sessions_per_client",
            "max_action_bytes",
            "max_action_depth",
            "max_calls_per_action",
            "max_episode_input_bytes",
            "max_snapshots_per_episode",
            "max_snapshot_bytes",
            "max_snapshot_blob_bytes",
            "quarantine_after",
        }
        assert hello["limits"]["max_action_depth"] == 64  # the nesting an action's arguments may have, however they arrive
        assert {"snapshot", "fork", "restore", "drop_snapshot", "export_snapshot", "import_snapshot"} <= set(hello["ops"])
        envs = {e["env_id"]: e for e in c.list_envs()}
        assert {"notes-v1", "library-v1"} <= set(envs)
        notes = envs["notes-v1"]
        assert notes["name"] == "Notes (test fixture)" and notes["rules"] == ["Titles are unique per user."]
        assert {t["function"]["name"] for t in notes["tools"]} >= {"add_note", "delete_note", "list_notes"}
        assert notes["scenario_count"] == 2
        scen = {s["scenario_id"]: s for s in c.list_scenarios(env_id="notes-v1")}
        assert set(scen) == {"notes-1", "notes-2"}
        assert scen["notes-1"]["mode"] == "task" and scen["notes-1"]["task"] == NOTES_1_TASK
        assert scen["notes-2"]["mode"] == "conversation" and scen["notes-1"]["check_count"] == 3
        everything = c.list_scenarios()
        assert len(everything) == sum(e["scenario_count"] for e in envs.values())
        assert any(s["env_id"] == "library-v1" for s in everything)


def test_reference_episode_on_one_replica(bridge1):
    with bridge1.client() as c:
        r = c.reset("notes-1", seed=11)
        sid = r["session_id"]
        assert sid.startswith("s-0-")
        assert r["observation"] == {"role": "user", "content": NOTES_1_TASK}
        info = r["info"]
        assert info["scenario_id"] == "notes-1" and info["env_id"] == "notes-v1" and info["seed"] == 11
        assert info["mode"] == "task" and info["max_steps"] == 8
        before = c.state(sid)
        assert "n1" in before["notes"] and before["next_note"] == 2
        _check_solved(play_reference(c.step, sid))
        after = c.state(sid)
        assert "n1" not in after["notes"]
        assert any(n["title"] == "todo" and n["user_id"] == "u2" for n in after["notes"].values())
        with pytest.raises(EpisodeDone):
            c.step(sid, FINAL_REPLY)
        assert c.close_session(sid) is True


def test_reference_episode_in_a_bundled_env(bridge1):
    # one bundled env, played from its own scenario file to the full reward
    scenarios = json.loads((BUNDLED_ENVS / "library" / "scenarios.json").read_text(encoding="utf-8"))
    task = next(s for s in scenarios if s.get("reference_actions") and s.get("mode", "task") == "task")
    with bridge1.client() as c:
        r = c.reset(task["id"], seed=3)
        sid = r["session_id"]
        for a in task["reference_actions"]:
            res = c.step(sid, a)
            assert res["terminated"] is False, res
        res = c.finish(sid)
        assert res["terminated"] is True and res["info"]["end_reason"] == "client"
        assert float(res["reward"]) == 1.0, res["info"]["reward_info"]
        c.close_session(sid)


def test_reference_episodes_on_two_replicas(bridge):
    with bridge.client(0) as c0, bridge.client(1) as c1:
        assert c0.hello()["replica"] == 0 and c1.hello()["replica"] == 1
        s0 = c0.reset("notes-1")["session_id"]
        s1 = c1.reset("notes-1")["session_id"]
        assert s0.startswith("s-0-") and s1.startswith("s-1-")
        # interleaved, to show the sessions are independent
        for action in REFERENCE_ACTIONS:
            for c, s in ((c0, s0), (c1, s1)):
                assert c.step(s, action)["terminated"] is False
        _check_solved(c0.step(s0, FINAL_REPLY))
        _check_solved(c1.step(s1, FINAL_REPLY))
        # a session lives on one replica: the other does not know it
        with pytest.raises(envscaler.protocol.UnknownSession):
            c1.step(s0, FINAL_REPLY)
        c0.close_session(s0)
        c1.close_session(s1)


def test_action_shapes(client):
    """Every action shape of §4 reaches the env; agent mistakes come back as observations."""
    sid = client.reset("notes-1")["session_id"]
    openai_call = {"id": "c-9", "type": "function", "function": {"name": "list_notes", "arguments": json.dumps({"user_id": "u1"})}}
    r = client.step(sid, openai_call)
    assert r["observation"]["tool_results"][0]["tool_call_id"] == "c-9"
    assert json.loads(r["observation"]["content"])["data"] == [{"id": "n1", "title": "groceries"}]
    raw = '<think>list first</think><tool_call>{"name": "list_notes", "arguments": {"user_id": "u2"}}</tool_call>'
    assert json.loads(client.step(sid, raw)["observation"]["content"]) == {"success": True, "data": []}
    message = {"role": "assistant", "content": "", "tool_calls": [openai_call]}
    assert client.step(sid, message)["observation"]["role"] == "tool"
    r = client.step(sid, [{"name": "list_notes", "arguments": {"user_id": "u1"}}, {"name": "nope", "arguments": {}}])
    results = r["observation"]["tool_results"]
    assert [x["ok"] for x in results] == [True, False]
    assert json.loads(results[1]["content"])["error"]["type"] == "unknown_tool"
    r = client.step(sid, {"name": "add_note", "arguments": {"user_id": "u1"}})
    assert json.loads(r["observation"]["content"])["error"]["type"] == "invalid_arguments"
    r = client.step(sid, {"name": "explode", "arguments": {}})
    assert json.loads(r["observation"]["content"])["error"]["type"] == "tool_exception" and r["terminated"] is False
    client.close_session(sid)


def test_step_batch_mixes_results_and_errors(bridge):
    with bridge.client(0) as c:
        a = c.reset("notes-1")["session_id"]
        b = c.reset("notes-1")["session_id"]
        c.close_session(b)
        out = c.step_batch([(a, REFERENCE_ACTIONS[0]), (b, "hi"), ("s-0-00000000-deadbeef", "hi")])
        assert len(out) == 3
        assert isinstance(out[0], dict) and out[0]["observation"]["role"] == "tool"
        assert isinstance(out[1], envscaler.protocol.SessionClosed)
        assert isinstance(out[2], envscaler.protocol.UnknownSession)
        c.close_session(a)


def test_timeout_leaves_the_client_usable(bridge):
    """After a BridgeTimeout the late reply is dropped by id and the socket keeps working."""
    with bridge.client(0, timeout=10) as c:
        sid = c.reset("hostile-1")["session_id"]
        with pytest.raises(BridgeTimeout):
            c.step(sid, {"name": "spin", "arguments": {}}, timeout=0.05)  # the env spins ~300 ms
        assert c.hello()["server"] == "envscaler"
        assert c.list_scenarios(env_id="hostile-v1")[0]["scenario_id"] == "hostile-1"
        # the spin's reply (after ~300 ms) arrives for nobody and is dropped by id
        wait_for(lambda: c.hello() and c.discarded >= 1, timeout=10, what="the late reply")
        with pytest.raises(EpisodeDone):  # the spin did end that episode
            c.step(sid, {"name": "ping", "arguments": {}})
        c.close_session(sid)


def test_pipelined_requests_are_matched_by_id(client):
    sids = [client.reset("notes-1")["session_id"] for _ in range(4)]
    ids = [client.submit("state", session_id=s) for s in sids]
    hello_id = client.submit("hello")
    # collected in reverse order: replies that arrive first wait for their own collect
    assert client.collect(hello_id)["server"] == "envscaler"
    for rid in reversed(ids):
        assert "state_json" in client.collect(rid)
    for s in sids:
        client.close_session(s)


def test_client_closed_is_final(bridge):
    c = BridgeClient(bridge.endpoints[0], timeout=5)
    c.close()
    c.close()
    with pytest.raises(RuntimeError):
        c.hello()
