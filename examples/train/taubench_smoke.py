"""Stage 6: a SMOKE number on a few tau-bench tasks (not a tau-bench score).

    python examples/train/taubench_smoke.py --run runs/recipe --from ../shared/benchmarks/taubench \\
        --model base=MODEL --model sft=runs/recipe/models/sft --model grpo=runs/recipe/models/grpo [--tasks 2]

Imports tau-bench retail (``envscaler import taubench``) into RUN/taubench/bundles and plays the
first ``--tasks`` tasks of its test split with each model (eval_model.py with the same settings,
named ``taubench-NAME``). tau-bench tasks are conversations with a simulated user; here none is
attached (a local LLM as the user would double the cost), so each episode ends at the agent's first
text reply and is scored then (the bridge's ``no_user`` end). That is why it is a smoke number:
it shows the model acts on tau-bench's tools and the reward is computed, nothing about its skill.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import eval_model
from recipe_common import envscaler_cli, log, read_json


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run", type=Path, required=True)
    ap.add_argument("--from", dest="source", type=Path, required=True, help="tau-bench's data folder (../shared/benchmarks/taubench)")
    ap.add_argument("--model", action="append", required=True, help="NAME=PATH, once per model")
    ap.add_argument("--tasks", type=int, default=2, help="the first N tasks of retail's test split")
    ap.add_argument("--trials", type=int, default=1)
    ap.add_argument("--max-steps", type=int, default=8)
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--temperature", type=float, default=0.7)
    ap.add_argument("--threads", type=int, default=0)
    args = ap.parse_args(argv)

    bundles = args.run / "taubench" / "bundles"
    if not (bundles / "taubench-retail" / "manifest.json").is_file():
        envscaler_cli("import", "taubench", "--from", str(args.source), "--out", str(bundles), "--domain", "retail")
    scenarios = read_json(bundles / "taubench-retail" / "scenarios.json")
    tasks = [s["id"] for s in scenarios if s["id"].startswith("retail-test-")][: args.tasks]
    out: dict[str, Any] = {"tasks": tasks, "runs": {}}
    for spec in args.model:
        name, _, path = spec.partition("=")
        if not path:
            raise SystemExit(f"--model takes NAME=PATH, not {spec!r}")
        res = eval_model.main(
            [
                "--run", str(args.run), "--model", path, "--name", f"taubench-{name}",
                "--envs", "taubench-retail-v1", "--envs-dir", str(bundles), "--scenarios", *tasks,
                "--trials", str(args.trials), "--max-steps", str(args.max_steps), "--max-new-tokens", str(args.max_new_tokens),
                "--temperature", str(args.temperature), "--threads", str(args.threads),
            ]
        )  # fmt: skip
        out["runs"][name] = {
            "mean_reward": res["totals"]["mean_reward"],
            "success_rate": res["totals"]["success_rate"],
            "episodes": res["totals"]["episodes"],
            "tool_call_share": res["totals"]["tool_call_share"],
        }
    (args.run / "taubench" / "smoke.json").write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    log(f"taubench smoke (no simulated user): {out['runs']}")
    return out


if __name__ == "__main__":
    main()
