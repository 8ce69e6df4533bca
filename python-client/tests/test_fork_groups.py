"""Fork groups across replicas: snapshots exported as bytes and imported on another replica
(export_snapshot / import_snapshot), the vector env spreading a group over the replicas with
per-slot outcomes, and AsyncEnvScalerEnv's snapshot / restore / fork."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from envscaler import AsyncBridgeClient, AsyncEnvScalerEnv, Bridge, BridgeClient, EnvScalerVectorEnv
from envscaler.protocol import BadRequest, BridgeError, SnapshotIncompatible, TooManySessions, UnknownSnapshot
from envscaler.transcript import VectorTranscripts

from helpers import BUNDLED_ENVS, NOTES_ENVS, REFERENCE_ACTIONS, start_bridge, wait_for


def _reference_cases() -> list[tuple[str, list[Any]]]:
    cases = []
    for path in sorted(BUNDLED_ENVS.glob("*/scenarios.json")):
        for s in json.loads(path.read_text(encoding="utf-8")):
            if s.get("reference_actions"):
                cases.append((s["id"], s["reference_actions"]))
    return cases


CASES = _reference_cases()


@pytest.fixture(scope="module")
def bundled2(built_bridge: None) -> Iterator[Bridge]:
    """2 replicas of the bundled envs (and notes-v1)."""
    with start_bridge(envs=[NOTES_ENVS, BUNDLED_ENVS], replicas=2) as b:
        yield b


def _continue(c: BridgeClient, sid: str, actions: list[Any]) -> list[Any]:
    """Plays ``actions`` (stopping where the episode ends) then finishes: everything the trainer sees."""
    out: list[Any] = []
    for a in actions:
        r = c.step(sid, a)
        i = r["info"]
        out.append((r["observation"], r["reward"], r["terminated"], r["truncated"], i["state_hash"], i["step"], i["diff"], i["tool_calls"], i.get("end_reason")))
        if r["terminated"] or r["truncated"]:
            return out
    f = c.finish(sid)
    out.append(("finish", f["reward"], f["info"]["state_hash"], f["info"].get("reward_info")))
    return out


def test_the_bundled_reference_solutions_cover_every_env():
    envs = {sid.rsplit("-", 1)[0] for sid, _ in CASES}
    assert len(CASES) >= 50 and len(envs) >= 8, (len(CASES), envs)


def test_every_reference_solution_forked_at_every_step_continues_identically_on_the_other_replica(bundled2):
    """For every bundled reference solution and every step k: the episode after k actions on replica 0,
    exported, imported on replica 1 and forked there, plays the rest exactly as the original does."""
    with bundled2.client(0, timeout=60) as c0, bundled2.client(1, timeout=60) as c1:
        assert c0.hello()["replica"] == 0 and c1.hello()["replica"] == 1
        checked = 0
        for scenario_id, actions in CASES:
            src = c0.reset(scenario_id, seed=17)["session_id"]
            forks: list[tuple[int, str]] = []
            ended = False
            for k in range(len(actions) + 1):
                state = c0.request("state", session_id=src)  # {"state_json", "state_hash"}
                blob = c0.export_snapshot(src)
                assert blob["step"] == k and blob["state_hash"] == state["state_hash"] and blob["bytes"] == len(blob["blob"])
                imported = c1.import_snapshot(blob["blob"])
                assert imported["step"] == k and imported["state_hash"] == state["state_hash"]
                fork = c1.fork(snapshot_id=imported["snapshot_id"])
                assert fork["info"]["step"] == k and fork["info"]["state_hash"] == state["state_hash"] and fork["info"]["scenario_id"] == scenario_id
                assert c1.request("state", session_id=fork["session_id"]) == state  # the env's whole state, not only its hash
                assert c1.drop_snapshot(imported["snapshot_id"]) is True
                forks.append((k, fork["session_id"]))
                if k == len(actions):
                    break
                r = c0.step(src, actions[k])
                if r["terminated"] or r["truncated"]:
                    ended = True
                    break
            c0.close_session(src)
            # the original's continuation from each point, replayed in a fresh episode on replica 0
            for k, fsid in forks:
                ref = c0.reset(scenario_id, seed=17)["session_id"]
                for a in actions[:k]:
                    c0.step(ref, a)
                want = _continue(c0, ref, actions[k:])
                assert _continue(c1, fsid, actions[k:]) == want, (scenario_id, k)
                c0.close_session(ref)
                c1.close_session(fsid)
                checked += 1
            assert ended or len(forks) == len(actions) + 1
        assert checked >= sum(1 for _ in CASES)
        assert c1.stats()["snapshots"] == 0  # every import was dropped


def test_blobs_from_elsewhere_are_refused_with_typed_errors(bundled2):
    with bundled2.client(0) as c0, bundled2.client(1) as c1:
        sid = c0.reset("library-1", seed=1)["session_id"]
        blob = c0.export_snapshot(sid)["blob"]
        other_format = bytearray(blob)
        other_format[6] = 99
        with pytest.raises(SnapshotIncompatible, match="format 99"):
            c1.import_snapshot(bytes(other_format))
        with pytest.raises(BadRequest, match="not an EnvScaler snapshot"):
            c1.import_snapshot(b"hello")
        corrupt = bytearray(blob)
        corrupt[-5] ^= 0xFF
        with pytest.raises(BadRequest, match="digest"):
            c1.import_snapshot(bytes(corrupt))
        with pytest.raises(UnknownSnapshot):
            c0.export_snapshot(snapshot_id="snap-nope")
        with pytest.raises(ValueError):
            c0.export_snapshot()  # neither a session nor a snapshot: refused before sending
        assert "max_snapshot_blob_bytes" in c1.hello()["limits"]
        c0.close_session(sid)


def test_vector_fork_spreads_the_group_over_both_replicas(bundled2):
    vec = EnvScalerVectorEnv(bundled2.endpoints, num_envs=8, scenario_ids=["notes-1"])
    try:
        vt = VectorTranscripts(8)
        vt.reset(*vec.reset(seed=5, options={"scenario_id": "notes-1"}))
        first = [REFERENCE_ACTIONS[0]] + [{"name": "list_notes", "arguments": {"user_id": "u1"}}] * 7
        obs, _, terminated, truncated, infos = vec.step(first)
        vt.step(first, obs, terminated, truncated, infos)
        source_hash = vec.state(0)
        before = dict(vec.requests_sent)
        outcomes = vec.fork(0)
        sent = {op: n - before.get(op, 0) for op, n in vec.requests_sent.items() if n != before.get(op, 0)}
        assert all(isinstance(o, str) for o in outcomes) and len(outcomes) == 7
        assert Counter(vec.replica_of) == {0: 4, 1: 4}  # each sub-env on its own replica: 4 and 4
        assert vt[1].messages() != vt[0].messages()
        vt.fork(0, outcomes)  # the transcripts follow: every target continues sub-env 0's conversation
        assert all(vt[i].messages() == vt[0].messages() for i in range(8))
        # exported once, imported once on the other replica, one fork per target
        assert sent["export_snapshot"] == 1 and sent["import_snapshot"] == 1 and sent["snapshot"] == 1 and sent["fork"] == 7
        for i in range(8):
            assert vec.state(i) == source_hash
        _, _, _, _, infos = vec.step([REFERENCE_ACTIONS[1]] * 8)
        assert len(set(infos["state_hash"])) == 1 and {int(s) for s in infos["step"]} == {2}
        # nothing is left held: the snapshot and the import are dropped (without waiting for the answers)
        with bundled2.client(0) as c0, bundled2.client(1) as c1:
            wait_for(lambda: c0.stats()["snapshots"] == 0 and c1.stats()["snapshots"] == 0, 10, what="snapshots dropped")
            # the targets' old sessions were closed: 4 sessions per replica
            wait_for(lambda: c0.stats()["sessions"] == 4 and c1.stats()["sessions"] == 4, 10, what="old sessions closed")
    finally:
        vec.close()


def test_vector_fork_misuse_raises_before_anything_is_sent(bundled2):
    vec = EnvScalerVectorEnv(bundled2.endpoints, num_envs=3, scenario_ids=["notes-1"])
    try:
        vec.reset(seed=1)
        before = dict(vec.requests_sent)
        with pytest.raises(IndexError):
            vec.fork(0, [1, 3])
        with pytest.raises(IndexError):
            vec.fork(-1)
        with pytest.raises(ValueError, match="twice"):
            vec.fork(0, [1, 1])
        assert vec.requests_sent == before
        assert vec.fork(0, [0]) == []  # the source alone: nothing to do
    finally:
        vec.close()


def test_vector_fork_over_many_slots_gives_per_slot_outcomes():
    """A replica that can open only one more session: one target forks, the other gets its own
    TooManySessions and keeps its previous episode; every slot's bridge state says so."""
    with start_bridge(envs=[NOTES_ENVS], replicas=2, extra=("--max-sessions", "3")) as b:
        vec = EnvScalerVectorEnv(b.endpoints, num_envs=4, scenario_ids=["notes-1"])
        try:
            vec.reset(seed=[1, 2, 3, 4], options={"scenario_id": "notes-1"})
            look = {"name": "list_notes", "arguments": {"user_id": "u1"}}  # changes nothing, ends nothing
            vec.step([REFERENCE_ACTIONS[0], look, look, look])
            source = vec.state(0)
            own = {i: vec.state(i) for i in range(4)}
            old_sessions = vec.session_ids
            outcomes = vec.fork(0, [1, 2, 3])
            failed = [t for t, o in zip([1, 2, 3], outcomes) if isinstance(o, BridgeError)]
            assert len(failed) == 1 and failed[0] in (1, 3), outcomes  # replica 1 had room for one more
            assert isinstance(outcomes[[1, 2, 3].index(failed[0])], TooManySessions)
            lost = failed[0]
            assert vec.session_ids[lost] == old_sessions[lost] and vec.state(lost) == own[lost]
            for i in {0, 1, 2, 3} - {lost}:
                assert vec.state(i) == source
            # every slot steps on from its own state: the failed one continues its own episode
            _, _, _, _, infos = vec.step([REFERENCE_ACTIONS[1]] * 4)
            assert [int(s) for s in infos["step"]] == [2, 2, 2, 2]
            hashes = list(infos["state_hash"])
            assert len({hashes[i] for i in range(4) if i != lost}) == 1 and hashes[lost] != hashes[0]
        finally:
            vec.close()


def test_async_env_snapshot_restore_and_fork_match_the_sync_api(bundled2):
    async def main() -> None:
        async with AsyncBridgeClient(bundled2.endpoints[0]) as a0, AsyncBridgeClient(bundled2.endpoints[1]) as a1:
            env = AsyncEnvScalerEnv(client=a0)
            await env.reset(options={"scenario_id": "notes-1", "seed": 3})
            await env.step(REFERENCE_ACTIONS[0])
            snap = await env.snapshot()
            here = await env.fork()
            there = await env.fork(client=a1)  # the same episode, moved to replica 1
            from_snap = await env.fork(snap, client=a1)
            assert here.client is a0 and there.client is a1 and from_snap.client is a1
            at_fork = env.messages  # the conversation travels with each fork, on either replica
            assert len(at_fork) >= 3 and here.messages == at_fork and there.messages == at_fork and from_snap.messages == at_fork

            async def play(e: AsyncEnvScalerEnv) -> list[Any]:
                out = []
                for a in REFERENCE_ACTIONS[1:]:
                    obs, reward, terminated, truncated, info = await e.step(a)
                    out.append((obs, reward, terminated, truncated, info["state_hash"], info["step"]))
                out.append((await e.finish())[1])
                return out

            want = await play(env)
            assert await asyncio.gather(play(here), play(there), play(from_snap)) == [want, want, want]
            assert want[-1] == 1.0
            info = await env.restore(snap)
            assert info["step"] == 1 and info["forked_from"] == {"snapshot_id": snap, "step": 1}
            assert env.messages == at_fork
            assert await play(env) == want
            assert await env.drop_snapshot(snap) is True
            with pytest.raises(UnknownSnapshot):
                await env.fork(snap)
            for e in (here, there, from_snap, env):
                await e.close()
            assert (await a1.stats())["snapshots"] == 0  # the imports were dropped

    asyncio.run(main())


def test_fleet_vector_env_deals_a_fork_group_out_over_its_live_replicas():
    """Two separate bridges as a fleet's replicas: the group is dealt out in turn, the placement counts follow."""
    from envscaler.fleet_view import FleetView

    with start_bridge(envs=[NOTES_ENVS]) as a, start_bridge(envs=[NOTES_ENVS]) as b:
        view = FleetView.static([{"uid": "a", "endpoint": a.endpoints[0]}, {"uid": "b", "endpoint": b.endpoints[0]}], refresh_interval=0, timeout=20)
        vec = EnvScalerVectorEnv(view, 6, scenario_ids=["notes-1"])
        try:
            assert type(vec).__name__ == "FleetVectorEnv"
            vec.reset(seed=2, options={"scenario_id": "notes-1"})
            vec.step([REFERENCE_ACTIONS[0]] * 6)
            source = vec.state(0)
            outcomes = vec.fork(0)
            assert all(isinstance(o, str) for o in outcomes), outcomes
            uids = [vec.replica_uid(i) for i in range(6)]
            assert Counter(uids) == {"a": 3, "b": 3} and view.placed == Counter(uids)
            assert all(vec.state(i) == source for i in range(6))
            _, _, _, _, infos = vec.step([REFERENCE_ACTIONS[1]] * 6)
            assert len(set(infos["state_hash"])) == 1
        finally:
            vec.close()
