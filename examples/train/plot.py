"""Stage 8: the reward per GRPO step (group mean, spread and each completion) next to the eval bars
(mean reward +- sd and success rate of each evaluated model on the held-out envs).

    python examples/train/plot.py --run runs/recipe [--out docs/img/recipe-reward.png]

Reads RUN/grpo/log.json and RUN/eval/*/results.json; writes RUN/reward.png (or --out).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from recipe_common import log, read_json


def main(argv: Sequence[str] | None = None) -> Path:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run", type=Path, required=True)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--evals", nargs="*", default=["base", "sft", "grpo"], help="eval names, in the order of the bars")
    args = ap.parse_args(argv)

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    steps: list[dict[str, Any]] = read_json(args.run / "grpo" / "log.json")["steps"]
    evals = [(n, read_json(args.run / "eval" / n / "results.json")) for n in args.evals if (args.run / "eval" / n / "results.json").is_file()]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9, 3.4), dpi=100, gridspec_kw={"width_ratios": [3, 2]})
    xs = [s["step"] for s in steps]
    means = [sum(s["rewards"]) / len(s["rewards"]) if s["rewards"] else float("nan") for s in steps]
    sds = [(sum((r - m) ** 2 for r in s["rewards"]) / len(s["rewards"])) ** 0.5 if s["rewards"] else 0.0 for s, m in zip(steps, means)]
    for s in steps:
        ax1.scatter([s["step"]] * len(s["rewards"]), s["rewards"], s=12, color="0.6", zorder=1)
    ax1.errorbar(xs, means, yerr=sds, color="C0", marker="o", capsize=3, zorder=2, label="group mean +- sd")
    ax1.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax1.set_xlabel("GRPO step")
    ax1.set_ylabel("episode reward (bridge)")
    ax1.set_ylim(-0.05, 1.05)
    ax1.set_title("reward per GRPO step (train envs)", fontsize=10)
    ax1.legend(fontsize=8, loc="upper left")
    names = [n for n, _ in evals]
    mr = [r["totals"]["mean_reward"] for _, r in evals]
    sd = [r["totals"]["reward_sd"] for _, r in evals]
    sr = [r["totals"]["success_rate"] for _, r in evals]
    x = list(range(len(evals)))
    ax2.bar([i - 0.2 for i in x], mr, width=0.4, yerr=sd, capsize=3, color="C0", label="mean reward +- sd")
    ax2.bar([i + 0.2 for i in x], sr, width=0.4, color="white", edgecolor="C1", hatch="//", label="success rate")
    for i, (m, s) in enumerate(zip(mr, sr)):
        ax2.text(i - 0.2, m + 0.02, f"{m:.2f}", ha="center", fontsize=8)
        ax2.text(i + 0.2, s + 0.02, f"{s:.2f}", ha="center", fontsize=8)
    ax2.set_xticks(x, names)
    ax2.set_ylim(0, 1.1)
    n_eps = evals[0][1]["totals"]["episodes"] if evals else 0
    ax2.set_title(f"held-out envs ({n_eps} episodes each)", fontsize=10)
    ax2.legend(fontsize=8, loc="upper right")
    fig.tight_layout()
    out = args.out or args.run / "reward.png"
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out)
    plt.close(fig)
    log(f"plot: {out}")
    return out


if __name__ == "__main__":
    main()
