"""Measures an envscaler fleet on 2 simulated nodes (worker raylets of an envscaler.ray.LocalCluster, all on 127.0.0.1).

1. Fleet start: from start_fleet() to every replica answering ``hello`` over CurveZMQ and listed
   by the registry (start_fleet waits for both), then checked once more from the driver.
2. Steps/s of one vector env (``--envs-per-run`` sub-envs, the notes fixture's ``roll`` tool)
   on the replicas of 1 node and then of 2 nodes, in the same run, with the CPU seconds each
   process group used meanwhile. On a 2-core machine both nodes share the same 2 cores with the
   driver, so the ratio is bounded by the cores: it is reported, not claimed as a speed-up.

    python python-client/examples/ray_fleet_bench.py [--seconds 10] [--envs-per-run 16]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from envscaler import BridgeClient, EnvScalerVectorEnv
from envscaler.fleet_view import FleetView
from envscaler.ray import LocalCluster, start_fleet

NOTES_ENVS = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "envs"
TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime + stime
        except (OSError, IndexError, ValueError):
            pass
    return total / TICK


def steps_per_s(view: FleetView, n: int, seconds: float, groups: dict[str, list[int]]) -> dict:
    vec = EnvScalerVectorEnv(view, n, scenario_ids=["notes-1"])
    try:
        vec.reset(seed=0)
        action = {"name": "roll", "arguments": {}}
        for _ in range(3):  # warm up
            vec.step([action] * n)
        cpu0 = {k: cpu_seconds(v) for k, v in groups.items()}
        steps, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            vec.step([action] * n)  # an episode that hits max_steps is autoreset: that step counts too
            steps += n
        dt = time.perf_counter() - t0
        cpu = {k: round(cpu_seconds(v) - cpu0[k], 2) for k, v in groups.items()}
        return {"env_steps_per_s": round(steps / dt, 1), "seconds": round(dt, 2), "cpu_s": cpu, "replicas": sorted({vec.replica_uid(i) for i in range(n)})}
    finally:
        vec.close()


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--envs-per-run", type=int, default=16)
    args = p.parse_args()
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    out: dict = {"cpus": os.cpu_count()}
    t = time.perf_counter()
    # every simulated node on 127.0.0.1: the bench's traffic stays on loopback
    cluster = LocalCluster(2, worker_resources={"envnode": 1}, namespace="envscaler-bench")
    out["cluster_start_s"] = round(time.perf_counter() - t, 2)
    fleet = None
    try:
        t = time.perf_counter()
        fleet = start_fleet(nodes="envnode", replicas_per_node=1, cpus_per_replica=0.5, envs=[str(NOTES_ENVS)], extra_args=["--no-record"], host="127.0.0.1")
        out["fleet_start_s"] = round(time.perf_counter() - t, 2)
        view = fleet.view()
        for uid, r in view.replicas.items():
            with BridgeClient(r["endpoint"], timeout=10, curve=view.curve_for(uid)) as c:
                c.hello()
        out["fleet_start_to_driver_hello_s"] = round(time.perf_counter() - t, 2)
        out["replicas"] = len(view.replicas)
        agents = fleet.describe()
        groups = {f"node {d['node_id'][:8]} replicas": [p for r in d["replicas"] for p in r["pids"]] for d in agents}
        groups["driver (client)"] = [os.getpid()]
        first = agents[0]["node_id"]
        one = FleetView.static([r for r in view.replicas.values() if r["node_id"] == first], view.client_keys, timeout=60)
        out["one_node"] = steps_per_s(one, args.envs_per_run, args.seconds, groups)
        out["two_nodes"] = steps_per_s(view, args.envs_per_run, args.seconds, groups)
        out["ratio_two_vs_one"] = round(out["two_nodes"]["env_steps_per_s"] / out["one_node"]["env_steps_per_s"], 2)
    finally:
        if fleet is not None:
            fleet.shutdown()
        cluster.close()
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
