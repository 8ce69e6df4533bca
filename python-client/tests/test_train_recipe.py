"""The training recipe (examples/train/, docs/training.md "Recipe") end to end: split, SFT data,
SFT, GRPO through the TRL adapter, eval of base/SFT/GRPO on the held-out envs, the tau-bench smoke
run, hackability and the plot, each stage as its own process through run_all.py.

CI (``-m trainers``) runs it on a tiny random-weight Qwen2 with the real Qwen2.5 tokenizer: every
stage must run and write its outputs in the shapes the docs describe; nothing about quality is
asserted (the model writes random tokens). ``LOCAL_TRAIN=1`` runs it on the real
Qwen2.5-Coder-0.5B-Instruct (2 SFT and 2 GRPO steps; built by ../shared/tools/hf-model/make-hf-model.sh),
``LOCAL_TRAIN_RUN=DIR`` keeps that run's folder (the figures in docs/training.md come from one)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from trainer_helpers import KIT, TRAIN_ENVS

from helpers import BUNDLED_ENVS, NOTES_ENVS, REPO

pytestmark = pytest.mark.trainers
pytest.importorskip("transformers", reason="the trainer suite needs the [train] extra (transformers)")
pytest.importorskip("trl", reason="the trainer suite needs the [train] extra (trl)")
pytest.importorskip("peft", reason="the trainer suite needs the [train] extra (peft)")
pytest.importorskip("matplotlib", reason="the recipe's plot needs matplotlib (the [train] extra)")

RECIPE = REPO / "examples" / "train"
TAUBENCH = KIT.parent.parent / "benchmarks" / "taubench"
STAGES = ["split", "sft-data", "sft", "grpo", "eval-base", "eval-sft", "eval-grpo", "taubench", "hackability", "plot"]


def _env_ids(*dirs: Path) -> set[str]:
    return {json.loads(m.read_text())["id"] for d in dirs for m in d.glob("*/manifest.json")}


def _jsonl(p: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in p.read_text(encoding="utf-8").splitlines() if line.strip()]


def _run_recipe(run: Path, model: str, sizes: list[str], timeout: float, taubench: bool = True) -> None:
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRL_EXPERIMENTAL_SILENCE="1")
    cmd = [sys.executable, str(RECIPE / "run_all.py"), "--run", str(run), "--model", model, *(["--taubench-from", str(TAUBENCH)] if taubench else []), *sizes]
    r = subprocess.run(cmd, cwd=str(REPO), env=env, capture_output=True, text=True, timeout=timeout, check=False)
    assert r.returncode == 0, r.stderr[-6000:]


def _check_outputs(run: Path, *, env_ids: set[str], sft_steps: int, grpo_steps: int, generations: int, per_env: int, trials: int, tau_tasks: int) -> None:
    # every stage ran, in its own process, and was timed (peak memory where /usr/bin/time exists)
    stages = json.loads((run / "stages.json").read_text())["stages"]
    assert list(stages) == [s for s in STAGES if tau_tasks or s != "taubench"]
    for name, s in stages.items():
        assert s["exit_code"] == 0 and s["seconds"] > 0, name
        if os.path.exists("/usr/bin/time"):
            assert s["peak_rss_mb"] and s["peak_rss_mb"] > 10, name

    # split by env: disjoint, covering the bundled envs, the held-out ones with task scenarios
    split = json.loads((run / "split.json").read_text())
    train, held = set(split["train"]), set(split["held_out"])
    assert train and held and not train & held and train | held == env_ids
    assert all(split["task_scenarios"][e] for e in held)

    # SFT data: reference solutions of train envs only, exported as chat rows with tool calls
    rows = _jsonl(run / "sft" / "sft.jsonl")
    assert rows and all(r["env_id"] in train and r["reward"] == 1 for r in rows)
    for r in rows:
        roles = [m["role"] for m in r["messages"]]
        assert roles[:2] == ["system", "user"] and roles[-1] == "assistant" and "tool" in roles
        assert r["tools"] and any(m.get("tool_calls") for m in r["messages"])
    assert {r["scenario_id"] for r in rows} <= {s for e in train for s in split["task_scenarios"][e]}

    # the two adapters, chained: SFT on the base, GRPO on the SFT model
    sft_spec = json.loads((run / "models" / "sft" / "model.json").read_text())
    grpo_spec = json.loads((run / "models" / "grpo" / "model.json").read_text())
    assert len(sft_spec["adapters"]) == 1 and grpo_spec["adapters"][:1] == sft_spec["adapters"] and len(grpo_spec["adapters"]) == 2
    for a in grpo_spec["adapters"]:
        assert (Path(a) / "adapter_config.json").is_file() and (Path(a) / "adapter_model.safetensors").is_file()
    sft_log = json.loads((run / "models" / "sft" / "log.json").read_text())
    losses = [h["loss"] for h in sft_log["log_history"] if "loss" in h]
    assert sft_log["steps"] == sft_steps and len(losses) == sft_steps and all(math.isfinite(x) for x in losses)

    # GRPO: one group of `generations` bridge episodes per step, rewards in [0, 1], the bridge's time measured
    grpo = json.loads((run / "grpo" / "log.json").read_text())
    assert [s["step"] for s in grpo["steps"]] == list(range(1, grpo_steps + 1))
    for s in grpo["steps"]:
        assert s["episodes"] == generations and len(s["rewards"]) == generations
        assert all(0.0 <= x <= 1.0 for x in s["rewards"]) and 0 < s["bridge_seconds"] < s["seconds"]
        assert len(s["scenarios"]) == 1 and s["trl"]["reward"] == pytest.approx(sum(s["rewards"]) / generations, abs=1e-4)
    assert 0 < grpo["bridge_share"] < 1
    train_eps = _jsonl(run / "grpo" / "episodes.jsonl")
    assert len(train_eps) == grpo_steps * generations
    assert all(e["env_id"] in train and e["start_hash"] and "changed_state" in e for e in train_eps)
    assert list((run / "grpo" / "trajectories").glob("*.jsonl"))

    # eval: the same held-out episodes for each model, >= 2 seeds, pass^k up to the trials
    played = None
    for name in ("base", "sft", "grpo"):
        res = json.loads((run / "eval" / name / "results.json").read_text())
        eps = _jsonl(run / "eval" / name / "episodes.jsonl")
        assert res["totals"]["episodes"] == len(eps) == len(held) * per_env * trials
        assert set(res["per_env"]) == held and all(e["env_id"] in held for e in eps)
        assert sorted(res["totals"]["pass_k"]) == [str(k) for k in range(1, trials + 1)]
        assert res["totals"]["pass_k"]["1"] == pytest.approx(res["totals"]["success_rate"])
        assert 0 <= res["totals"]["mean_reward"] <= 1 and res["totals"]["reward_sd"] >= 0
        assert {e["seed"] for e in eps} == set(range(trials)) and all(e["start_hash"] and "untouched" in e for e in eps)
        keys = sorted((e["scenario_id"], e["seed"]) for e in eps)
        assert played is None or keys == played
        played = keys

    # tau-bench smoke: every model on the same tasks
    if tau_tasks:
        smoke = json.loads((run / "taubench" / "smoke.json").read_text())
        assert len(smoke["tasks"]) == tau_tasks and set(smoke["runs"]) == {"base", "sft", "grpo"}
        assert all(r["episodes"] == tau_tasks for r in smoke["runs"].values())

    # hackability: every trained-model episode judged against its untouched score
    hack = json.loads((run / "hackability.json").read_text())
    src = hack["sources"]
    assert src["grpo-train"]["episodes"] == len(train_eps) and src["eval-grpo"]["episodes"] == len(held) * per_env * trials
    for s in src.values():
        assert 0 <= s["no_state_change"] <= s["reward_at_least_threshold"] <= s["episodes"]
        assert s["unearned"] <= s["reward_at_least_threshold"] and len(s["examples"]["no_state_change"]) <= s["no_state_change"]

    png = (run / "reward.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> str:
    if not (KIT / "tiny_model.py").is_file():
        pytest.skip(f"hf-model kit not found at {KIT} (../shared is absent)")
    if not TAUBENCH.is_dir():
        pytest.skip(f"tau-bench data not found at {TAUBENCH} (../shared is absent)")
    sys.path.insert(0, str(KIT))
    from tiny_model import tiny_qwen2

    return str(tiny_qwen2(tmp_path_factory.mktemp("tiny") / "qwen2"))


@pytest.mark.timeout(1200)
def test_recipe_every_stage_on_a_tiny_model(tiny_model: str, tmp_path: Path) -> None:
    # the fixture envs (memo-v1 trains, notes-v1 is held out): 3-tool envs keep prompts near 1k
    # tokens, where the bundled envs' 18-28 tool schemas make them 4-6k (the 151,936-token
    # vocabulary's logits over them are most of a tiny model's cost)
    sizes = ["--envs-dir", str(TRAIN_ENVS), str(NOTES_ENVS), "--held-out", "notes-v1",
             "--sft-steps", "2", "--grpo-steps", "2", "--num-generations", "4", "--grpo-seeds", "1", "--max-new-tokens", "12", "--max-steps", "2",
             "--eval-per-env", "1", "--trials", "2", "--taubench-tasks", "2", "--sft-seeds", "1", "--sft-max-length", "8192"]  # fmt: skip
    _run_recipe(tmp_path / "run", tiny_model, sizes, timeout=1150)
    _check_outputs(tmp_path / "run", env_ids=_env_ids(TRAIN_ENVS, NOTES_ENVS), sft_steps=2, grpo_steps=2, generations=4, per_env=1, trials=2, tau_tasks=2)
    # the do-nothing floor: memo-1's untouched state passes 1 of its 2 checks, memo-2's 1 of 3 (trainer_helpers.TRAIN_ENVS)
    floor = json.loads((tmp_path / "run" / "hackability.json").read_text())["do_nothing"]["per_env"]
    assert floor["memo-v1"]["at_least_threshold"] == ["memo-1"] and floor["memo-v1"]["mean_untouched_reward"] == pytest.approx((0.5 + 1 / 3) / 2, abs=1e-3)
    assert floor["notes-v1"]["at_least_threshold"] == []


@pytest.fixture(scope="module")
def real_qwen() -> str:
    if os.environ.get("LOCAL_TRAIN") != "1":
        pytest.skip("set LOCAL_TRAIN=1 to run the recipe on the real Qwen2.5-Coder-0.5B (about an hour on 2 cores)")
    script = KIT / "make-hf-model.sh"
    if not script.exists():
        pytest.skip(f"hf-model kit not found at {KIT} (../shared is absent)")
    r = subprocess.run([str(script), "--model", "0.5b", "--python", sys.executable], capture_output=True, text=True, check=False)
    if r.returncode == 2:
        pytest.skip("this Python lacks gguf (make-hf-model.sh converts the GGUF): " + r.stderr.strip().splitlines()[-1])
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout.strip().splitlines()[-1]


@pytest.mark.timeout(6 * 3600)
def test_recipe_on_the_real_05b(real_qwen: str, tmp_path: Path) -> None:
    """2 SFT and 2 GRPO steps on the real 0.5B. On the fixture envs (memo-v1 trains, notes-v1 held
    out) unless LOCAL_TRAIN_BUNDLED=1 (the bundled envs: 4-6k-token prompts, several times the
    cost); the tau-bench smoke stage only with LOCAL_TRAIN_TAUBENCH=1 (its prompts are ~8k tokens)."""
    run = Path(os.environ.get("LOCAL_TRAIN_RUN") or tmp_path / "run").resolve()
    bundled = os.environ.get("LOCAL_TRAIN_BUNDLED") == "1"
    tau = 2 if os.environ.get("LOCAL_TRAIN_TAUBENCH") == "1" else 0
    envs = [] if bundled else ["--envs-dir", str(TRAIN_ENVS), str(NOTES_ENVS), "--held-out", "notes-v1"]
    sizes = [*envs, "--sft-steps", "2", "--grpo-steps", "2", "--num-generations", "4", "--grpo-seeds", "1", "--max-new-tokens", "32", "--max-steps", "2",
             "--eval-per-env", "1", "--trials", "2", "--taubench-tasks", str(tau), "--sft-seeds", "1", "--sft-max-length", "6144", "--threads", "2"]  # fmt: skip
    _run_recipe(run, real_qwen, sizes, timeout=6 * 3600 - 60, taubench=bool(tau))
    env_ids = _env_ids(BUNDLED_ENVS) if bundled else _env_ids(TRAIN_ENVS, NOTES_ENVS)
    _check_outputs(run, env_ids=env_ids, sft_steps=2, grpo_steps=2, generations=4, per_env=1, trials=2, tau_tasks=tau)
