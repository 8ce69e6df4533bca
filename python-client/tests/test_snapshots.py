"""snapshot / fork / restore over the wire: Gymnasium env, vector env groups, errors and limits."""

from __future__ import annotations

import pytest

from envscaler import EnvScalerEnv, EnvScalerVectorEnv
from envscaler.protocol import TooLarge, UnknownSnapshot

from helpers import REFERENCE_ACTIONS, start_bridge


def _play(env, actions):
    out = []
    for action in actions:
        obs, reward, terminated, truncated, info = env.step(action)
        out.append((obs, reward, terminated, truncated, info["state_hash"], info["step"]))
    out.append(env.finish()[1])
    return out


def test_a_fork_and_a_restored_snapshot_replay_the_source_exactly(bridge):
    env = EnvScalerEnv(bridge.endpoints[0], timeout=30)
    try:
        env.reset(options={"scenario_id": "notes-1", "seed": 3})
        first, rest = REFERENCE_ACTIONS[:1], REFERENCE_ACTIONS[1:]
        _play_prefix = [env.step(a) for a in first]
        snap = env.snapshot()
        child = env.fork()
        from_snap = env.fork(snapshot_id=snap)
        expected = _play(env, rest)
        assert _play(child, rest) == expected
        assert _play(from_snap, rest) == expected
        assert expected[-1] == 1.0
        # the finished source goes back to the snapshot and plays the same again
        info = env.restore(snap)
        assert info["step"] == len(first) and info["forked_from"] == {"snapshot_id": snap, "step": len(first)}
        assert _play(env, rest) == expected
        assert env.drop_snapshot(snap) is True
        with pytest.raises(UnknownSnapshot):
            env.fork(snapshot_id=snap)
        child.close()
        from_snap.close()
    finally:
        env.close()


def test_vector_env_forks_one_session_into_a_group(bridge):
    vec = EnvScalerVectorEnv(bridge.endpoints, num_envs=4, scenario_ids=["notes-1"])
    try:
        vec.reset(seed=5, options={"scenario_id": "notes-1"})
        vec.step([REFERENCE_ACTIONS[0]] * 4)
        before = vec.session_ids[1:]
        new = vec.fork(0)
        assert len(new) == 3 and not set(new) & set(before)
        assert vec.replica_of == [0, 1, 0, 1]  # each sub-env on its own replica (the snapshot moved there)
        _, _rewards, _terminated, _, infos = vec.step([REFERENCE_ACTIONS[1]] * 4)
        hashes = set(infos["state_hash"])
        assert len(hashes) == 1  # the group continues from one state
        steps = {int(s) for s in infos["step"]}
        assert steps == {2}
    finally:
        vec.close()


def test_snapshot_limit_is_a_typed_error_naming_it():
    with start_bridge(replicas=1, extra=("--max-snapshots", "2")) as b:
        env = EnvScalerEnv(b.endpoints[0], timeout=30)
        try:
            env.reset(options={"scenario_id": "notes-1"})
            env.snapshot()
            env.snapshot()
            with pytest.raises(TooLarge, match=r"max-snapshots|maxSnapshotsPerEpisode"):
                env.snapshot()
        finally:
            env.close()


def test_no_reply_is_lost_with_thousands_in_flight(bridge):
    """5,000 requests in flight on one connection: every one is answered (ok, or a typed overloaded)."""
    with bridge.client(0, timeout=120) as c:
        rids = [c.submit("hello") for _ in range(5000)]
        answered = 0
        for rid in rids:
            try:
                c.collect(rid)
            except Exception as e:  # only a typed refusal is acceptable, never a missing reply
                assert getattr(e, "code", None) == "overloaded", e
            answered += 1
        assert answered == 5000


def test_a_vector_env_beyond_the_session_limit_fails_at_construction_naming_it():
    with start_bridge(replicas=1, extra=("--max-sessions", "4")) as b:
        with pytest.raises(ValueError, match="max_sessions=4"):
            EnvScalerVectorEnv(b.endpoints, num_envs=5)
        vec = EnvScalerVectorEnv(b.endpoints, num_envs=4, scenario_ids=["notes-1"])
        vec.reset(seed=1)
        vec.close()


def test_a_retried_request_gets_the_first_reply_and_does_not_run_twice(bridge):
    """The same request id sent again on one connection (a retry after a timeout) is answered from the bridge's memory."""
    import zmq

    from envscaler.protocol import PROTOCOL_VERSION, packb, unpackb

    sock = zmq.Context.instance().socket(zmq.DEALER)
    sock.setsockopt(zmq.IDENTITY, b"py-retry-test")
    sock.connect(bridge.endpoints[0])
    try:

        def ask(req):
            sock.send(packb(req))
            assert sock.poll(30_000)
            return unpackb(sock.recv())

        sid = ask({"v": PROTOCOL_VERSION, "id": 1, "op": "reset", "scenario_id": "notes-1", "seed": 1})["result"]["session_id"]
        again = ask({"v": PROTOCOL_VERSION, "id": 1, "op": "reset", "scenario_id": "notes-1", "seed": 1})
        assert again["result"]["session_id"] == sid  # no second session was opened
        step = {"v": PROTOCOL_VERSION, "id": 2, "op": "step", "session_id": sid, "action": REFERENCE_ACTIONS[0]}
        first, second = ask(step), ask(step)
        assert first == second and first["result"]["info"]["step"] == 1
        third = ask({**step, "id": 3})
        assert third["result"]["info"]["step"] == 2  # the repeat did not run: this is the second step
        reused = ask({"v": PROTOCOL_VERSION, "id": 3, "op": "finish", "session_id": sid})
        assert reused["ok"] is False and reused["error"]["code"] == "bad_request"
        ask({"v": PROTOCOL_VERSION, "id": 4, "op": "close", "session_id": sid})
    finally:
        sock.close(linger=0)


def test_sessions_per_client_are_bounded_and_other_clients_are_not_starved():
    from envscaler.protocol import TooManySessions

    with start_bridge(replicas=1, extra=("--max-sessions-per-client", "2")) as b, b.client(0, timeout=30) as greedy, b.client(0, timeout=30) as other:
        greedy.reset("notes-1")
        greedy.reset("notes-1")
        with pytest.raises(TooManySessions, match="max_sessions_per_client"):
            greedy.reset("notes-1")
            greedy.reset("notes-1")
            with pytest.raises(TooManySessions, match="max_sessions_per_client"):
                greedy.reset("notes-1")
            assert other.reset("notes-1")["session_id"]


def test_four_thousand_sessions_on_one_replica_reset_and_step_in_one_vector_env():
    """4,000 live episodes on one replica: one vector env resets them all and steps them in one batch."""
    n = 4000
    with start_bridge(replicas=1, extra=("--max-sessions", str(n), "--max-sessions-per-client", str(n))) as b:
        vec = EnvScalerVectorEnv(b.endpoints, num_envs=n, scenario_ids=["notes-1"], timeout=600)
        try:
            obs, _ = vec.reset(seed=1)
            assert len(obs) == n and len(set(obs)) == 1 and obs[0]  # the same scenario's opening, n times
            with b.client(0) as c:
                assert c.stats()["sessions"] == n
            obs, rewards, terminated, truncated, _ = vec.step([REFERENCE_ACTIONS[0]] * n)
            # every episode ran the tool on its own state: each answers success, none ended
            assert all('"success": true' in str(o) or '"success":true' in str(o) for o in obs), obs[:3]
            assert not terminated.any() and not truncated.any() and (rewards == 0).all()
        finally:
            vec.close()
        with b.client(0) as c:
            assert c.stats()["sessions"] == 0
