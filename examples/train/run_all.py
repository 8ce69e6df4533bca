"""Every stage of the recipe in order, each as its own process (one command per stage, as
docs/training.md lists them), timed, with its peak memory from ``/usr/bin/time -v`` when present.

    python examples/train/run_all.py --run runs/recipe --model path/to/qwen2.5-coder-0.5b-instruct \\
        [--taubench-from ../shared/benchmarks/taubench] [sizes: --sft-steps 2 --grpo-steps 2 ...]

Stages: split, sft-data, sft, grpo, eval-base, eval-sft, eval-grpo, taubench (with
--taubench-from), hackability, plot. ``--from-stage NAME`` resumes at a stage (the earlier ones'
outputs must be in the run folder). Writes RUN/stages.json: per stage its command, wall seconds,
peak RSS and exit code. A stage that fails stops the run (its exit code is this command's).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from recipe_common import log, read_json, write_json

HERE = Path(__file__).resolve().parent
TIME = "/usr/bin/time"


def stage_commands(a: argparse.Namespace) -> list[tuple[str, list[str]]]:
    run, py = str(a.run), [sys.executable]
    thr = ["--threads", str(a.threads)]
    ev = [
        "--trials",
        str(a.trials),
        "--per-env",
        str(a.eval_per_env),
        "--max-steps",
        str(a.max_steps),
        "--max-new-tokens",
        str(a.max_new_tokens),
        "--temperature",
        str(a.eval_temperature),
        "--concurrency",
        str(a.concurrency),
        *thr,
    ]
    held = (["--held-out", *a.held_out] if a.held_out else []) + (["--envs-dir", *a.envs_dir] if a.envs_dir else [])
    stages = [
        ("split", [*py, str(HERE / "split_envs.py"), "--run", run, *held]),
        ("sft-data", [*py, str(HERE / "make_sft_data.py"), "--run", run, "--seeds", str(a.sft_seeds)]),
        ("sft", [*py, str(HERE / "sft.py"), "--run", run, "--model", a.model, "--max-steps", str(a.sft_steps), "--grad-accum", str(a.sft_grad_accum),
                 "--max-length", str(a.sft_max_length), "--lr", str(a.sft_lr), *thr]),
        ("grpo", [*py, str(HERE / "grpo.py"), "--run", run, "--model", str(a.run / "models" / "sft"), "--max-steps", str(a.grpo_steps), "--num-generations", str(a.num_generations),
                  "--max-completion-length", str(a.max_new_tokens), "--max-tool-calls", str(a.max_steps), "--lr", str(a.grpo_lr), "--seeds", str(a.grpo_seeds), *thr]),
        ("eval-base", [*py, str(HERE / "eval_model.py"), "--run", run, "--model", a.model, "--name", "base", *ev]),
        ("eval-sft", [*py, str(HERE / "eval_model.py"), "--run", run, "--model", str(a.run / "models" / "sft"), "--name", "sft", *ev]),
        ("eval-grpo", [*py, str(HERE / "eval_model.py"), "--run", run, "--model", str(a.run / "models" / "grpo"), "--name", "grpo", *ev]),
    ]  # fmt: skip
    if a.taubench_from:
        models = [f"base={a.model}", f"sft={a.run / 'models' / 'sft'}", f"grpo={a.run / 'models' / 'grpo'}"]
        stages.append(("taubench", [*py, str(HERE / "taubench_smoke.py"), "--run", run, "--from", str(a.taubench_from), "--tasks", str(a.taubench_tasks),
                                    "--max-steps", str(a.max_steps), "--max-new-tokens", str(a.max_new_tokens), "--temperature", str(a.eval_temperature), *thr,
                                    *[x for m in models for x in ("--model", m)]]))  # fmt: skip
    stages += [
        ("hackability", [*py, str(HERE / "hackability.py"), "--run", run]),
        ("plot", [*py, str(HERE / "plot.py"), "--run", run]),
    ]
    return stages


def peak_rss_mb(stderr_tail: str) -> float | None:
    m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", stderr_tail)
    return int(m.group(1)) / 1024 if m else None


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run", type=Path, required=True)
    ap.add_argument("--model", required=True, help="the base model: a Hugging Face folder")
    ap.add_argument("--envs-dir", nargs="+", default=None, help="folders of env bundles to split (default: the bundled envs)")
    ap.add_argument("--held-out", nargs="*", default=None, help="env ids to hold out (default: split_envs.py's seeded draw of 2)")
    ap.add_argument("--sft-seeds", type=int, default=2)
    ap.add_argument("--sft-steps", type=int, default=20)
    ap.add_argument("--sft-grad-accum", type=int, default=1)
    ap.add_argument("--sft-max-length", type=int, default=6144)
    ap.add_argument("--sft-lr", type=float, default=2e-4)
    ap.add_argument("--grpo-steps", type=int, default=20)
    ap.add_argument("--grpo-seeds", type=int, default=4)
    ap.add_argument("--grpo-lr", type=float, default=1e-5)
    ap.add_argument("--num-generations", type=int, default=4)
    ap.add_argument("--max-steps", type=int, default=6, help="agent steps per episode (eval), tool calls per rollout (GRPO)")
    ap.add_argument("--max-new-tokens", type=int, default=128, help="tokens per model turn (eval and GRPO)")
    ap.add_argument("--eval-per-env", type=int, default=3, help="task scenarios per held-out env (0: all)")
    ap.add_argument("--trials", type=int, default=2)
    ap.add_argument("--eval-temperature", type=float, default=0.7)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--taubench-from", type=Path, default=None, help="tau-bench's data folder: adds the smoke stage")
    ap.add_argument("--taubench-tasks", type=int, default=2)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--from-stage", default=None)
    ap.add_argument("--only", nargs="*", default=None, help="run only these stages")
    a = ap.parse_args(argv)

    stages = stage_commands(a)
    names = [n for n, _ in stages]
    if a.from_stage and a.from_stage not in names:
        raise SystemExit(f"--from-stage: one of {names}")
    started = not a.from_stage
    a.run.mkdir(parents=True, exist_ok=True)
    record_path = a.run / "stages.json"
    record: dict[str, Any] = read_json(record_path) if a.from_stage and record_path.is_file() else {"stages": {}}
    record["load_at_start"] = os.getloadavg()
    timed = os.path.exists(TIME)
    for name, cmd in stages:
        started = started or name == a.from_stage
        if not started or (a.only and name not in a.only):
            continue
        log(f"run_all: stage {name}: {' '.join(cmd)}")
        full = [TIME, "-v", *cmd] if timed else cmd
        t0 = time.monotonic()
        load0 = os.getloadavg()[0]
        p = subprocess.Popen(full, stderr=subprocess.PIPE, text=True, cwd=str(HERE.parents[1]))
        tail: list[str] = []
        assert p.stderr is not None
        for line in p.stderr:
            sys.stderr.write(line)
            tail = [*tail, line][-60:]
        rc = p.wait()
        text = "".join(tail)
        record["stages"][name] = {
            "command": cmd,
            "seconds": time.monotonic() - t0,
            "peak_rss_mb": peak_rss_mb(text) if timed else None,
            "exit_code": rc,
            "load_avg_1m_start": load0,
            "load_avg_1m_end": os.getloadavg()[0],
        }
        write_json(record_path, record)
        if rc != 0:
            log(f"run_all: stage {name} failed ({rc})")
            raise SystemExit(rc)
    log(f"run_all: done; {record_path}")
    return record


if __name__ == "__main__":
    main()
