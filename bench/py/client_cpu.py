"""Bench: the Python client's own CPU time per env-step (or per reset) in the paths a trainer uses.

CPU time of this process (``time.process_time``: every thread, libzmq's I/O thread included), not
wall time, so the figures hold on a loaded machine where wall-clock rates are noise. One JSON line
per path; ``--repeat`` runs each path that many times and reports the median and all runs.

    python client_cpu.py --endpoints tcp://127.0.0.1:5555,tcp://127.0.0.1:5556 --envs envs/library

Paths: ``env_step`` (EnvScalerEnv.step), ``client_step`` (BridgeClient.step, no Gymnasium layer),
``env_reset`` (EnvScalerEnv.reset of a live episode), ``vec_step`` (EnvScalerVectorEnv.step of
--sessions sub-envs), ``vec_reset`` (EnvScalerVectorEnv.reset of --burst live sub-envs),
``fork_group`` (vec.fork(0) of --group sub-envs, then the reference solution's rest).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from envscaler import BridgeClient, EnvScalerEnv, EnvScalerVectorEnv

READS = [
    {"name": "get_member", "arguments": {"member_id": "M013"}},
    {"name": "search_books", "arguments": {"query": "the"}},
    {"name": "list_member_loans", "arguments": {"member_id": "M013"}},
    {"name": "get_book", "arguments": {"book_id": "B006"}},
]


def cpu_per(n: int, run: Callable[[], None]) -> float:
    """Microseconds of this process's CPU per unit of ``run`` (which does ``n`` units)."""
    c0 = time.process_time()
    run()
    return (time.process_time() - c0) / n * 1e6


def env_step(a: argparse.Namespace) -> float:
    env = EnvScalerEnv(a.endpoints[0], scenario_ids=[a.scenario])
    try:
        env.reset(seed=0)
        for i in range(200):
            env.step(READS[i % 4])

        def run() -> None:
            for i in range(a.n):
                env.step(READS[i % 4])

        return cpu_per(a.n, run)
    finally:
        env.close()


def client_step(a: argparse.Namespace) -> float:
    with BridgeClient(a.endpoints[0]) as c:
        sid = c.reset(a.scenario, seed=0)["session_id"]
        for i in range(200):
            c.step(sid, READS[i % 4])

        def run() -> None:
            for i in range(a.n):
                c.step(sid, READS[i % 4])

        out = cpu_per(a.n, run)
        c.close_session(sid)
        return out


def env_reset(a: argparse.Namespace) -> float:
    env = EnvScalerEnv(a.endpoints[0], scenario_ids=[a.scenario])
    try:
        env.reset(seed=0)
        for _ in range(20):
            env.reset()
        n = max(1, a.n // 4)

        def run() -> None:
            for _ in range(n):
                env.reset()

        return cpu_per(n, run)
    finally:
        env.close()


def vec_step(a: argparse.Namespace) -> float:
    vec = EnvScalerVectorEnv(a.endpoints, a.sessions, scenario_ids=[a.scenario])
    try:
        vec.reset(seed=0)
        for k in range(5):
            vec.step([READS[(k + i) % 4] for i in range(a.sessions)])
        rounds = max(1, a.n // a.sessions)
        batches = [[READS[(k + i) % 4] for i in range(a.sessions)] for k in range(4)]

        def run() -> None:
            for k in range(rounds):
                vec.step(batches[k % 4])

        return cpu_per(rounds * a.sessions, run)
    finally:
        vec.close()


def vec_reset(a: argparse.Namespace) -> float:
    vec = EnvScalerVectorEnv(a.endpoints, a.burst, scenario_ids=[a.scenario])
    try:
        vec.reset(seed=0)
        runs = 3
        return statistics.median(cpu_per(a.burst, lambda: vec.reset()) for _ in range(runs))
    finally:
        vec.close()


def fork_group(a: argparse.Namespace) -> float:
    scenarios = json.loads((Path(a.envs) / "scenarios.json").read_text(encoding="utf-8"))
    actions = next(s for s in scenarios if s["id"] == a.scenario)["reference_actions"]
    first, rest = actions[0], actions[1:]
    vec = EnvScalerVectorEnv(a.endpoints, a.group, scenario_ids=[a.scenario])
    cpu, steps = 0.0, 0
    try:
        for r in range(4):
            vec.reset(seed=r, options={"scenario_id": a.scenario})
            vec.step([first] * a.group)
            c0 = time.process_time()
            vec.fork(0)
            for x in rest:
                vec.step([x] * a.group)
            if r > 0:  # round 0 warms up
                cpu += time.process_time() - c0
                steps += a.group * len(rest)
        return cpu / steps * 1e6
    finally:
        vec.close()


PATHS: dict[str, Callable[[argparse.Namespace], float]] = {
    "client_step": client_step,
    "env_step": env_step,
    "env_reset": env_reset,
    "vec_step": vec_step,
    "vec_reset": vec_reset,
    "fork_group": fork_group,
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--endpoints", required=True, type=lambda s: s.split(","))
    ap.add_argument("--envs", default="envs/library", help="the bundle folder the bridge serves (fork_group plays its reference solution)")
    ap.add_argument("--scenario", default="library-1")
    ap.add_argument("--paths", default=",".join(PATHS))
    ap.add_argument("--n", type=int, default=2000, help="env-steps per measurement")
    ap.add_argument("--sessions", type=int, default=64)
    ap.add_argument("--burst", type=int, default=512)
    ap.add_argument("--group", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    for name in a.paths.split(","):
        runs: list[Any] = [round(PATHS[name](a), 1) for _ in range(a.repeat)]
        print(json.dumps({"path": name, "client_cpu_us_per_step": statistics.median(runs), "runs": runs}), flush=True)


if __name__ == "__main__":
    main()
