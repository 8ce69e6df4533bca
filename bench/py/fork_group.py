"""Bench: a GRPO fork group played through the Python client users call (EnvScalerVectorEnv).

Each round: every sub-env is reset to the scenario and takes the first reference action (not
timed); then, timed: ``vec.fork(0)`` (the group continues from sub-env 0) and the group plays
the rest of the reference solution, one ``vec.step`` per action (every sub-env the same action).
Prints one JSON line: env-steps/s over the timed part, and the fork's own time.

    python fork_group.py --endpoints tcp://127.0.0.1:5555,tcp://127.0.0.1:5556 --group 64 --rounds 5
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from envscaler import EnvScalerVectorEnv


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--endpoints", required=True)
    ap.add_argument("--envs", required=True, help="the folder of the bundle the bridge serves (its reference solution is played)")
    ap.add_argument("--scenario", default="library-1")
    ap.add_argument("--group", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=1, help="untimed rounds first")
    args = ap.parse_args()
    scenarios = json.loads((Path(args.envs) / "scenarios.json").read_text(encoding="utf-8"))
    actions = next(s for s in scenarios if s["id"] == args.scenario)["reference_actions"]
    first, rest = actions[0], actions[1:]
    vec = EnvScalerVectorEnv(args.endpoints.split(","), num_envs=args.group, scenario_ids=[args.scenario])
    rates: list[float] = []
    fork_ms: list[float] = []
    client_cpu: list[float] = []  # share of the timed part this process spent on the CPU (the client's own work)
    try:
        for r in range(args.warmup + args.rounds):  # the first rounds warm up (JIT, pools, images)
            vec.reset(seed=r, options={"scenario_id": args.scenario})
            vec.step([first] * args.group)  # only sub-env 0's episode matters: the others are replaced by forks of it
            t0, c0 = time.perf_counter(), time.process_time()
            outcomes = vec.fork(0)
            t1 = time.perf_counter()
            failed = [o for o in outcomes if not isinstance(o, str)]
            if failed:
                raise SystemExit(f"fork failed for {len(failed)} targets: {failed[0]!r}")
            steps = 0
            for a in rest:
                _, _, terminated, truncated, _ = vec.step([a] * args.group)
                steps += args.group
                if terminated.any() or truncated.any():
                    raise SystemExit("the reference solution ended early; the group would be autoreset")
            t2, c2 = time.perf_counter(), time.process_time()
            if r >= args.warmup:
                rates.append(steps / (t2 - t0))
                fork_ms.append((t1 - t0) * 1000)
                client_cpu.append((c2 - c0) / (t2 - t0))
        result = {"steps_per_s": statistics.median(rates), "fork_ms": statistics.median(fork_ms), "client_cpu_share": statistics.median(client_cpu), "rounds": args.rounds, "group": args.group}
        print(json.dumps({**result, "steps_per_round": args.group * len(rest), "replicas": len(vec.clients)}))
    finally:
        vec.close()


if __name__ == "__main__":
    main()
