"""Bench: ``EnvScalerEnv.reset()`` of a live episode, scored in the reset's own request
(``finish_previous=True``) or after its reply (``"later"``, the client's default where the bridge
has ``reset_finish_previous_later``), back to back or with a pause before each reset standing in
for an agent's think time (a model call between two episodes takes far longer than this).

    python reset_think.py --endpoint tcp://127.0.0.1:5555 --think-ms 0,5 --n 300 --repeat 2

Start the bridge with library-v1 (``npx envscaler serve --envs envs/library --no-record``). Runs
the two modes alternately, ``--repeat`` times per think time, and prints one JSON line per run
(p50, mean and p90 of the reset's wall time, ms). Wall time: run it on a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import time

from envscaler import EnvScalerEnv


def run(endpoint: str, mode: str, think_ms: float, n: int) -> dict[str, float | str]:
    env = EnvScalerEnv(endpoint, scenario_ids=["library-1"])
    if mode == "in_line":  # as a bridge without the feature: the reset waits for the checks
        supports = env.client.supports
        env.client.supports = lambda f: False if f == "reset_finish_previous_later" else supports(f)  # type: ignore[method-assign]
    try:
        env.reset(seed=0)
        for _ in range(30):
            env.reset()
        lat = []
        for _ in range(n):
            if think_ms:
                time.sleep(think_ms / 1000)
            t0 = time.perf_counter_ns()
            env.reset()
            lat.append((time.perf_counter_ns() - t0) / 1e6)
    finally:
        env.close()
    lat.sort()
    return {"mode": mode, "think_ms": think_ms, "p50_ms": lat[len(lat) // 2], "mean_ms": sum(lat) / len(lat), "p90_ms": lat[int(len(lat) * 0.9)], "n": n}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--endpoint", required=True)
    p.add_argument("--think-ms", default="0,5")
    p.add_argument("--n", type=int, default=300)
    p.add_argument("--repeat", type=int, default=2)
    a = p.parse_args()
    for think in [float(x) for x in a.think_ms.split(",")]:
        for _ in range(a.repeat):
            for mode in ("in_line", "later"):
                print(json.dumps(run(a.endpoint, mode, think, a.n)), flush=True)


if __name__ == "__main__":
    main()
