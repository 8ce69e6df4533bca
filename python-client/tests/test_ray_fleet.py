"""envscaler.ray on a real multi-node Ray cluster on this machine, every node on 127.0.0.1.

A head raylet plus two worker raylets carrying the custom resource ``envnode`` (so the fleet
selects them and not the head); every raylet is a separate node to Ray, with its own node id,
workers and processes. The cluster is an ``envscaler.ray.LocalCluster``: every node, and so every
replica the fleet binds to its node's IP, is on loopback (tests send no traffic anywhere else;
``_loopback_only`` checks what Ray and the fleet report after every test). The replicas still
use CurveZMQ, as on a real cluster, so the key handling is exercised over loopback.

The tests run in file order against one cluster and one fleet: later tests build on the kills,
node removal and node addition of earlier ones. Marked ``ray``; skipped when Ray (the
``[ray]`` extra) is not installed.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

ray = pytest.importorskip("ray", reason="the Ray tests need the [ray] extra: pip install -e 'python-client[ray]'")

import envscaler  # noqa: E402
from envscaler import BridgeClient, BridgeTimeout, EnvScalerVectorEnv  # noqa: E402
from envscaler.ray import REGISTRY_NAME, LocalCluster, start_fleet  # noqa: E402
from envscaler.ray.local_cluster import LOOPBACK  # noqa: E402

from helpers import FINAL_REPLY, NOTES_ENVS, REFERENCE_ACTIONS, wait_for  # noqa: E402
from loopback_guard import check_endpoint, check_host  # noqa: E402

pytestmark = [pytest.mark.ray, pytest.mark.timeout(240)]

NAMESPACE = "envscaler-test"
HEARTBEAT_S, TTL_S, RECONCILE_S = 0.5, 2.0, 1.0
#: how long after a node dies until no client can get its endpoints: the registry's TTL plus one
#: heartbeat and one reconcile round (either withdraws it), plus scheduling slack on 2 shared cores
WITHDRAW_BOUND_S = TTL_S + HEARTBEAT_S + RECONCILE_S + 3.0


def _pid_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


@pytest.fixture(scope="module")
def cluster():
    with LocalCluster(2, worker_resources={"envnode": 1}, namespace=NAMESPACE) as c:
        yield c, c.workers


@pytest.fixture(scope="module")
def fleet(cluster):
    f = start_fleet(
        nodes="envnode",
        replicas_per_node=1,
        cpus_per_replica=0.5,
        envs=[str(NOTES_ENVS)],
        extra_args=["--no-record"],
        heartbeat_s=HEARTBEAT_S,
        ttl_s=TTL_S,
        reconcile_s=RECONCILE_S,
        host=LOOPBACK,
    )
    yield f
    f.shutdown()


@pytest.fixture(autouse=True)
def _loopback_only(request):
    """After every test: Ray's nodes and every endpoint the fleet hands out are on loopback."""
    yield
    for n in ray.nodes():
        if n.get("Alive"):
            check_host(str(n["NodeManagerAddress"]), "a Ray node's address")
    if "fleet" in request.fixturenames:
        view = request.getfixturevalue("fleet").view()
        view.refresh(force=True)
        for r in view.replicas.values():
            check_endpoint(str(r["endpoint"]), "an endpoint the fleet handed out")


def _by_node(fleet):
    return {d["node_id"]: d for d in fleet.describe()}


def _play_notes(vec, n):
    vec.reset(seed=3, options={"scenario_id": "notes-1"})
    for a in REFERENCE_ACTIONS:
        _, _, te, tr, _ = vec.step([a] * n)
        assert not te.any() and not tr.any()
    _obs, r, te, tr, _info = vec.step([FINAL_REPLY] * n)
    return r, te


# ---------------------------------------------------------------------- placement and security


def test_one_agent_per_selected_node_and_every_endpoint_answers(cluster, fleet):
    _c, workers = cluster
    agents = _by_node(fleet)
    assert set(agents) == {w.node_id for w in workers}  # one each, on the envnode nodes, none on the head
    assert len({d["pid"] for d in agents.values()}) == 2
    view = fleet.view()
    assert len(view.replicas) == 2 and {r["node_id"] for r in view.replicas.values()} == set(agents)
    for uid, r in view.replicas.items():
        assert r["endpoint"].startswith("tcp://127.0.0.1:")
        with BridgeClient(r["endpoint"], timeout=10, curve=view.curve_for(uid)) as client:
            hello = client.hello()
            assert hello["server"] == "envscaler"
    # the agents reserve their CPUs in Ray's accounting: 0.5 of each envnode's 1 CPU (the driver's
    # view of the cluster's resources is refreshed periodically, so it may lag the placement)
    wait_for(lambda: ray.available_resources().get("CPU", 0) <= 3 - 2 * 0.5 + 1e-6, 30, what="the agents' CPUs in Ray's resource view")


def test_every_connection_needs_the_fleet_keys(fleet):
    import zmq

    view = fleet.view()
    _uid, r = next(iter(view.replicas.items()))
    with BridgeClient(r["endpoint"], timeout=1.5) as plain, pytest.raises(BridgeTimeout):
        plain.hello()
    public, secret = zmq.curve_keypair()
    stranger = {"server_public_key": r["server_public_key"], "client_public_key": public.decode(), "client_secret_key": secret.decode()}
    with BridgeClient(r["endpoint"], timeout=1.5, curve=stranger) as c, pytest.raises(BridgeTimeout):
        c.hello()


def test_no_secret_key_on_disk_or_in_a_command_line(fleet):
    secret = fleet.view().client_keys["client_secret_key"]
    for d in fleet.describe():
        for rep in d["replicas"]:
            for pid in rep["pids"]:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    assert secret.encode() not in f.read()
        # serve's connection file (0600, holds serve's own client pair) is read and unlinked at
        # once: what is left on tmpfs is the allow-list, our public key only
        assert sorted(os.listdir(d["secrets"])) == ["allow"]
        with open(os.path.join(d["secrets"], "allow"), encoding="ascii") as f:
            assert f.read().split() == [fleet.view().client_keys["client_public_key"]]
        assert os.stat(d["secrets"]).st_mode & 0o777 == 0o700
        for root in (d["workdir"], d["secrets"]):
            for dirpath, _, files in os.walk(root):
                for name in files:
                    with open(os.path.join(dirpath, name), "rb") as f:
                        data = f.read()
                    assert secret.encode() not in data
                    assert b"client_secret_key" not in data, os.path.join(dirpath, name)


def test_registry_hands_keys_only_to_its_namespace(cluster, fleet):
    c, _ = cluster
    code = textwrap.dedent(
        f"""
        import ray, envscaler.ray as er
        ray.init(address={c.address!r}, namespace="someone-else", log_to_driver=False)
        try:
            er.discover()
        except ValueError:
            print("NOT-FOUND")
        try:
            er.discover(namespace={NAMESPACE!r})
        except PermissionError:
            print("REFUSED")
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False, env={**os.environ, "RAY_USAGE_STATS_ENABLED": "0"})
    assert "NOT-FOUND" in out.stdout and "REFUSED" in out.stdout, out.stderr[-2000:]


# ---------------------------------------------------------------------- clients


def test_vector_env_spreads_episodes_and_scores_them(fleet):
    vec = EnvScalerVectorEnv(fleet, 4, scenario_ids=["notes-1"])
    try:
        r, te = _play_notes(vec, 4)
        assert r.tolist() == [1.0] * 4 and te.all()
        uids = [vec.replica_uid(i) for i in range(4)]
        assert sorted(uids.count(u) for u in set(uids)) == [2, 2]  # by load: two per replica
    finally:
        vec.close()


@ray.remote(num_cpus=0)
def _rollout_task(scenario: str, n: int) -> list[float]:
    """What a ROLL/verl env worker does: no endpoints, no keys; the fleet is found in the namespace."""
    vec = EnvScalerVectorEnv(None, n, scenario_ids=[scenario])
    try:
        vec.reset(seed=0)
        for a in REFERENCE_ACTIONS:
            vec.step([a] * n)
        return vec.step([FINAL_REPLY] * n)[1].tolist()
    finally:
        vec.close()


@ray.remote(num_cpus=0)
def _async_task(handle) -> list[float]:
    async def one() -> float:
        env = envscaler.AsyncEnvScalerEnv(fleet=handle, scenario_ids=["notes-1"])
        try:
            await env.reset(seed=1)
            for a in REFERENCE_ACTIONS:
                await env.step(a)
            return (await env.step(FINAL_REPLY))[1]
        finally:
            await env.close()

    async def main() -> list[float]:
        return list(await asyncio.gather(*(one() for _ in range(3))))

    return asyncio.run(main())


def test_ray_tasks_open_envs_on_the_fleet(fleet):
    assert ray.get(_rollout_task.remote("notes-1", 3), timeout=120) == [1.0] * 3
    assert ray.get(_async_task.remote(fleet.handle()), timeout=120) == [1.0] * 3


# ---------------------------------------------------------------------- failures


def test_killed_replica_is_restarted_and_republished(fleet):
    view = fleet.view(refresh_interval=0)
    vec = EnvScalerVectorEnv(view, 2, scenario_ids=["notes-1"])
    try:
        vec.reset(seed=5)
        victim_uid = vec.replica_uid(0)
        other_uid = vec.replica_uid(1)
        assert victim_uid != other_uid
        victim = view.replicas[victim_uid]
        serve_pid = victim["pid"]
        node = victim["node_id"]
        replica_pids = next(r["pids"] for r in _by_node(fleet)[node]["replicas"])
        os.kill(serve_pid, signal.SIGKILL)
        # the serve's own replica process goes with it (its IPC channel closed): no orphan
        wait_for(lambda: not any(_pid_alive(p) for p in replica_pids), 10, what="the killed serve's replica to exit")

        # the agent restarts it under a new uid and the registry lists that instead
        def republished():
            view.refresh(force=True)
            on_node = [u for u, r in view.replicas.items() if r["node_id"] == node]
            return on_node if on_node and victim_uid not in on_node else None

        fresh = wait_for(republished, 60, what="the restarted replica in the registry")
        assert view.replicas[fresh[0]]["generation"] == victim["generation"] + 1
        # the episode there ended as session_lost; the other one stepped on
        _, _, _, tr, info = vec.step([REFERENCE_ACTIONS[0]] * 2)
        assert tr[0] and info["error"]["code"][0] == "session_lost"
        assert not tr[1] and info["observation"]["role"][1] == "tool"
        # next step: sub-env 0 autoresets onto a live replica and plays on
        _obs, _r, _te, tr, info = vec.step([REFERENCE_ACTIONS[1]] * 2)
        assert vec.replica_uid(0) in view.replicas and not tr.any()
        with BridgeClient(view.replicas[fresh[0]]["endpoint"], timeout=10, curve=view.curve_for(fresh[0])) as c:
            assert c.hello()["server"] == "envscaler"
        # stats come from the agents' polls: the restart shows there within a poll or two
        wait_for(lambda: {n["node_id"]: n for n in fleet.stats()["nodes"]}[node]["restarts"] >= 1, 30, what="the restart in stats")
    finally:
        vec.close()


def test_killed_replica_process_inside_serve_is_restarted_in_place(fleet):
    """kill -9 of the replica process itself: its serve restarts it on the same endpoint and key,
    so the registry entry stays; the episodes it held end as session_lost (the bridge says so)."""
    view = fleet.view(refresh_interval=0)
    vec = EnvScalerVectorEnv(view, 2, scenario_ids=["notes-1"])
    try:
        vec.reset(seed=6)
        uid = vec.replica_uid(0)
        node = view.replicas[uid]["node_id"]
        before = {n["node_id"]: n["restarts"] for n in fleet.stats()["nodes"]}
        serve_pid, replica_pid = next(r["pids"] for r in _by_node(fleet)[node]["replicas"] if r["uid"] == uid)
        os.kill(replica_pid, signal.SIGKILL)

        def back():
            d = next(r for r in _by_node(fleet)[node]["replicas"])
            return d if d["uid"] == uid and len(d["pids"]) == 2 and d["pids"][1] != replica_pid else None

        again = wait_for(back, 60, interval=0.3, what="serve to restart its replica process")
        assert again["pids"][0] == serve_pid  # the same serve process, the same registry entry
        view.refresh(force=True)
        assert uid in view.replicas
        _obs, _r, _te, tr, info = vec.step([REFERENCE_ACTIONS[0]] * 2)
        assert tr[0] and info["error"]["code"][0] == "session_lost"
        assert not tr[1]
        try:
            wait_for(lambda: {n["node_id"]: n["restarts"] for n in fleet.stats()["nodes"]}[node] > before[node], 30, what="the restart in stats")
        except AssertionError:
            print(before, fleet.stats(), fleet.logs())
            raise
    finally:
        vec.close()


def test_killed_agent_worker_leaves_no_orphans_and_is_replaced(fleet):
    before = _by_node(fleet)
    node, agent = next(iter(before.items()))
    pids = [p for r in agent["replicas"] for p in r["pids"]]
    assert pids and all(_pid_alive(p) for p in pids)
    os.kill(agent["pid"], signal.SIGKILL)  # no Python code of the agent runs after this
    wait_for(lambda: not any(_pid_alive(p) for p in pids), 15, what="the dead agent's replicas to exit")

    # the reconciler notices and starts a new agent on the same (still alive) node
    def replaced():
        d = _by_node(fleet).get(node)
        return d if d and d["agent"] != agent["agent"] and all(r["alive"] for r in d["replicas"]) else None

    wait_for(replaced, 90, interval=0.5, what="a new agent on the node")
    view = fleet.view()
    wait_for(lambda: view.refresh(force=True) is not None and len(view.replicas) == 2, 30, what="2 replicas listed again")


def test_removed_node_withdraws_and_its_episodes_end_as_session_lost(cluster, fleet):
    c, workers = cluster
    view = fleet.view(refresh_interval=0.2)
    vec = EnvScalerVectorEnv(view, 4, scenario_ids=["notes-1"])
    try:
        vec.reset(seed=9)
        vec.step([REFERENCE_ACTIONS[0]] * 4)
        # not the raylet this driver is attached to (all share one IP, so it may be any of them)
        driver_node = ray.get_runtime_context().get_node_id()
        target = next(w for w in reversed(workers) if w.node_id != driver_node)
        agents = _by_node(fleet)
        dying = [p for r in agents[target.node_id]["replicas"] for p in r["pids"]]
        dying_uids = {u for u, r in view.replicas.items() if r["node_id"] == target.node_id}
        on_dying = [i for i in range(4) if vec.replica_uid(i) in dying_uids]
        survivors = [i for i in range(4) if i not in on_dying]
        assert on_dying and survivors
        print("driver", driver_node[:8], "registry", ray.get(fleet.registry.node_id.remote())[:8], "target", target.node_id[:8], "head", c.head_node.node_id[:8])
        t0 = time.monotonic()
        c.remove_node(target, allow_graceful=False)
        # its raylet is gone at once; its worker processes (the agent) and so the replicas follow
        wait_for(lambda: not any(_pid_alive(p) for p in dying), 15, interval=0.05, what="the removed node's replicas to exit")
        print("dead after", time.monotonic() - t0)
        # episodes there were in the middle: they end as session_lost, the others step on
        _, _, _, tr, info = vec.step([REFERENCE_ACTIONS[1]] * 4)
        print("stepped after", time.monotonic() - t0, view.refresh_errors)
        for i in on_dying:
            assert tr[i] and info["error"]["code"][i] == "session_lost"
        for i in survivors:
            assert not tr[i] and info["observation"]["role"][i] == "tool"
        assert vec.lost_episodes >= len(on_dying)

        def withdrawn():
            view.refresh(force=True)
            return None if dying_uids & set(view.replicas) else time.monotonic() - t0

        gone = wait_for(withdrawn, WITHDRAW_BOUND_S + 5, what="the registry to withdraw the node")
        assert gone <= WITHDRAW_BOUND_S, f"withdrawn after {gone:.1f} s, bound {WITHDRAW_BOUND_S} s"
        # the vector env keeps stepping: lost sub-envs autoreset onto the surviving node
        _obs, _r, _te, tr, info = vec.step([REFERENCE_ACTIONS[0]] * 4)
        assert not tr.any()
        for i in on_dying:  # autoreset: a fresh episode, on a live replica
            assert info["observation"]["role"][i] != "tool" and info["episode_id"][i]
        assert all(vec.replica_uid(i) in view.replicas for i in range(4))
        surviving = next(iter(view.replicas))
        with BridgeClient(view.replicas[surviving]["endpoint"], timeout=10, curve=view.curve_for(surviving)) as cl:
            assert cl.hello()["server"] == "envscaler"
        history = fleet.stats()["withdrawn"]
        assert any(h["node_id"] == target.node_id for h in history)
    finally:
        vec.close()


def test_a_node_added_later_gets_an_agent(cluster, fleet):
    c, _workers = cluster
    new = c.add_node(num_cpus=1, resources={"envnode": 1})
    c.wait_for_nodes()
    wait_for(lambda: new.node_id in _by_node(fleet), 60, interval=0.5, what="an agent on the new node")
    view = fleet.view()

    def listed():
        view.refresh(force=True)
        return [u for u, r in view.replicas.items() if r["node_id"] == new.node_id]

    uid = wait_for(listed, 60, what="the new node's replica in the registry")[0]
    vec = EnvScalerVectorEnv(view, 2, scenario_ids=["notes-1"])
    try:
        r, _te = _play_notes(vec, 2)
        assert r.tolist() == [1.0, 1.0]
        assert uid in {vec.replica_uid(0), vec.replica_uid(1)}  # new episodes spread onto it
    finally:
        vec.close()


# ---------------------------------------------------------------------- operations


def test_stats_and_logs_from_the_driver(fleet):
    # requests/s needs two of the agent's stats polls (one per heartbeat) since the replica started.
    # The removed node's agent is forgotten only once Ray marks that node dead (its health checks,
    # ~15-30 s after the raylet went) or its actor's ping fails for good: under CI load that can
    # land after the earlier tests are done, so wait for it rather than race it.
    def settled():
        s = fleet.stats()
        rates = all(r["requests_per_s"] is not None for n in s["nodes"] for r in n.get("replicas", []))
        forgotten = sum(e["event"] == "agent forgotten" for e in s["events"])
        return s if rates and forgotten >= 2 else None

    stats = wait_for(settled, 90, interval=0.5, what="requests/s of every replica and both lost agents forgotten")
    # an agent killed by an earlier test may still be listed, marked not alive, until the reconciler forgets it
    live = [n for n in stats["nodes"] if n.get("alive")]
    assert stats["replicas"] == 2 and len(live) == 2
    assert all(not n.get("alive") and "replicas" not in n for n in stats["nodes"] if n not in live)
    for n in live:
        assert n["alive"] and not n["failures"]
        for r in n["replicas"]:
            assert r["alive"] and r["requests"] > 0 and r["requests_per_s"] > 0
    events = [(e["event"], e.get("reason")) for e in stats["events"]]
    assert events.count(("agent started", None)) >= 4, events  # 2 at start, 1 replacing the killed agent, 1 on the added node
    # the killed agent and the removed node's (whichever the reconciler noticed first: the dead
    # actor or the dead node)
    assert sum(e == "agent forgotten" for e, _ in events) >= 2, events
    logs = fleet.logs(lines=200)
    assert len(logs) == 2
    for per_replica in logs.values():
        assert "replica serving" in per_replica[0]


def test_shutdown_stops_every_replica_and_the_registry(cluster):
    f = start_fleet(nodes=1, replicas_per_node=1, cpus_per_replica=0.1, envs=[str(NOTES_ENVS)], extra_args=["--no-record"], name="envscaler-registry-2", heartbeat_s=HEARTBEAT_S)
    pids = [p for d in f.describe() for r in d["replicas"] for p in r["pids"]]
    assert pids
    f.shutdown()
    assert not any(_pid_alive(p) for p in pids)
    with pytest.raises(ValueError):
        ray.get_actor("envscaler-registry-2", namespace=NAMESPACE)
    ray.get_actor(REGISTRY_NAME, namespace=NAMESPACE)  # the other fleet is untouched


# ---------------------------------------------------------------------- a replica killed mid-step (issue 35)
# at the end of the file: it only needs a fleet with two live replicas, and leaves one restarted


def test_a_replica_killed_mid_step_is_a_session_lost_outcome_per_sub_env(fleet):
    """The replica process of one fleet replica is stopped (so the step is in flight and waits)
    and killed 0.5 s into the step; its serve restarts it on the same endpoint, which never
    answers the lost request. Each of its sub-envs ends the step truncated with session_lost, the
    others step normally, and the step returns within the client timeout plus slack, not raised."""
    timeout_s, slack_s = 4.0, 8.0
    view = fleet.view(refresh_interval=0)
    view.refresh(force=True)
    assert len(view.replicas) >= 2
    vec = EnvScalerVectorEnv(view, 4, scenario_ids=["notes-1"], timeout=timeout_s)
    try:
        vec.reset(seed=9)
        uids = [vec.replica_uid(i) for i in range(4)]
        victim_uid = uids[0]
        assert len(set(uids)) == 2
        node = view.replicas[victim_uid]["node_id"]
        _serve_pid, replica_pid = next(r["pids"] for r in _by_node(fleet)[node]["replicas"] if r["uid"] == victim_uid)
        os.kill(replica_pid, signal.SIGSTOP)
        killer = threading.Thread(target=lambda: (time.sleep(0.5), os.kill(replica_pid, signal.SIGKILL)), daemon=True)
        killer.start()
        t0 = time.monotonic()
        _obs, rewards, te, tr, info = vec.step([REFERENCE_ACTIONS[0]] * 4)
        took = time.monotonic() - t0
        killer.join()
        assert took < timeout_s + slack_s, took
        for i in range(4):
            if uids[i] == victim_uid:
                assert tr[i] and not te[i] and rewards[i] == 0 and info["_error"][i]
                assert info["error"]["code"][i] == "session_lost"
            else:
                assert not tr[i] and not te[i] and info["observation"]["role"][i] == "tool"
                assert not info.get("_error", np.zeros(4, dtype=bool))[i]

        # the lost sub-envs are autoreset onto a live replica and play on
        def recovered():
            _o, _r, _te, tr2, info2 = vec.step([REFERENCE_ACTIONS[1]] * 4)
            return not tr2.any() and "_error" not in info2 and all(vec.episodes[i].live for i in range(4))

        wait_for(recovered, 90, interval=0.5, what="the lost sub-envs to play again")
    finally:
        vec.close()
