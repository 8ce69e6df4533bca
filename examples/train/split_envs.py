"""Stage 1: split the bundled envs into train envs and held-out envs, by env (a held-out env's
tools, data and scenarios are never seen in SFT or GRPO).

    python examples/train/split_envs.py --run runs/recipe [--held-out library-v1 clinic-v1 | --n-held-out 2 --seed 0]

Writes RUN/split.json: ``{"train": [...], "held_out": [...], "task_scenarios": {env: [ids]}}``.
Only task scenarios are used later: TRL's tool loop has no turn for a simulated user, and the
evaluation runs without one (docs/training.md, "Recipe").
"""

from __future__ import annotations

import argparse
import random
from collections.abc import Sequence
from pathlib import Path

from recipe_common import BUNDLED_ENVS, bundled_scenarios, env_ids_of, log, write_json


def main(argv: Sequence[str] | None = None) -> dict[str, object]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run", type=Path, required=True, help="the run folder")
    ap.add_argument("--envs-dir", type=Path, nargs="+", default=[BUNDLED_ENVS], help="folders of env bundles (default: the bundled envs)")
    ap.add_argument("--held-out", nargs="*", default=None, help="env ids to hold out (default: --n-held-out drawn with --seed)")
    ap.add_argument("--n-held-out", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    ids = env_ids_of(args.envs_dir)
    if args.held_out:
        unknown = [e for e in args.held_out if e not in ids]
        if unknown:
            raise SystemExit(f"not env ids of {args.envs_dir}: {unknown} (there are {ids})")
        held = sorted(args.held_out)
    else:
        if not 0 < args.n_held_out < len(ids):
            raise SystemExit(f"--n-held-out must be between 1 and {len(ids) - 1}")
        held = sorted(random.Random(args.seed).sample(ids, args.n_held_out))
    train = [e for e in ids if e not in held]
    tasks: dict[str, list[str]] = {}
    for s in bundled_scenarios(ids, args.envs_dir):
        if s.get("mode", "task") == "task":
            tasks.setdefault(s["env_id"], []).append(s["id"])
    split = {"envs_dirs": [str(d.resolve()) for d in args.envs_dir], "train": train, "held_out": held, "seed": args.seed, "task_scenarios": tasks}
    write_json(args.run / "split.json", split)
    log(f"split: train {train} ({sum(len(tasks.get(e, [])) for e in train)} task scenarios), held out {held} ({sum(len(tasks.get(e, [])) for e in held)})")
    return split


if __name__ == "__main__":
    main()
