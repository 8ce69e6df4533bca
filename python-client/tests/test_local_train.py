"""Opt-in (``LOCAL_TRAIN=1``): 3 real GRPO steps of TRL on the real Qwen2.5-Coder-0.5B-Instruct,
LoRA, through the bridge (``environment_factory``), timing each step and the bridge's share of it.

    OUT=$(../shared/tools/hf-model/make-hf-model.sh --model 0.5b --python .venv-train/bin/python | tail -1)
    LOCAL_TRAIN=1 LOCAL_TRAIN_MODEL=$OUT nice -n 19 .venv-train/bin/python -m pytest -s -m trainers python-client/tests/test_local_train.py

CPU-heavy (1-3 min a step on 2 cores, ~6 GB): never part of CI. The figures go to stdout and to
``$LOCAL_TRAIN_REPORT`` (JSON) when set."""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path
from typing import Any

import pytest
from trainer_helpers import TRAIN_ENVS, episode_rewards, records, require

from helpers import start_bridge

pytestmark = [pytest.mark.trainers, pytest.mark.skipif(os.environ.get("LOCAL_TRAIN") != "1", reason="opt-in: LOCAL_TRAIN=1 (3 GRPO steps on the real 0.5B model, minutes of CPU)")]

MODEL = Path(os.environ.get("LOCAL_TRAIN_MODEL") or Path.home() / ".cache" / "hf-model" / "hf" / "qwen2.5-coder-0.5b-instruct")


@pytest.mark.timeout(3600)
def test_three_grpo_steps_on_the_real_model(tmp_path: Any) -> None:
    require("peft", "the trainer suite needs the [train] extra (peft)")
    require("trl", "the trainer suite needs the [train] extra (trl)")
    if not (MODEL / "config.json").is_file():
        pytest.fail(f"LOCAL_TRAIN=1 but no model at {MODEL}: build it with ../shared/tools/hf-model/make-hf-model.sh --model 0.5b (or set LOCAL_TRAIN_MODEL)", pytrace=False)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from envscaler import bridge_client
    from envscaler.adapters.trl import TRLEnvironments, use_fenced_tool_calls

    # the bridge's share: wall time inside BridgeClient.request (every reset, step and finish the envs send)
    in_bridge = [0.0]
    original = bridge_client.BridgeClient.request

    def timed(self: Any, *a: Any, **kw: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return original(self, *a, **kw)
        finally:
            in_bridge[0] += time.perf_counter() - t0

    steps: list[dict[str, float]] = []

    class Timer(TrainerCallback):  # type: ignore[misc]
        def on_step_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            self.t0, self.b0 = time.perf_counter(), in_bridge[0]

        def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            steps.append({"step": state.global_step, "wall_s": time.perf_counter() - self.t0, "bridge_s": in_bridge[0] - self.b0})

    torch.manual_seed(0)
    rec = tmp_path / "trajectories"
    # a step can take longer than the bridge's default idle reaper (600 s) on a loaded CPU: an
    # episode's session sits unused while the model generates (seen: session_closed after 600 s)
    with start_bridge(envs=[TRAIN_ENVS], replicas=2, extra=("--record", "--record-dir", str(rec), "--idle-timeout", "7200")) as bridge:
        bridge_client.BridgeClient.request = timed  # type: ignore[method-assign]
        try:
            envs = TRLEnvironments(bridge, envs=["memo-v1"])
            dataset = envs.dataset(["memo-1", "memo-2"], seeds=[0, 1])
            dataset = dataset.select([0, 2, 1])  # memo-1, memo-2, memo-1: one prompt a step
            tok = use_fenced_tool_calls(AutoTokenizer.from_pretrained(str(MODEL)))
            tok.padding_side = "left"
            model = AutoModelForCausalLM.from_pretrained(str(MODEL), dtype=torch.float32)
            config = GRPOConfig(
                output_dir=str(tmp_path / "out"),
                use_cpu=True,
                bf16=False,
                per_device_train_batch_size=4,
                num_generations=4,
                max_completion_length=64,
                max_tool_calling_iterations=2,
                max_steps=3,
                learning_rate=1e-5,
                report_to="none",
                save_strategy="no",
                logging_steps=1,
                seed=0,
            )
            lora = LoraConfig(r=16, lora_alpha=32, target_modules=["q_proj", "k_proj", "v_proj", "o_proj"], task_type="CAUSAL_LM")
            trainer = GRPOTrainer(model=model, args=config, train_dataset=dataset, processing_class=tok, environment_factory=envs.factories, peft_config=lora, callbacks=[Timer()])
            t0 = time.perf_counter()
            trainer.train()
            total = time.perf_counter() - t0
        finally:
            bridge_client.BridgeClient.request = original  # type: ignore[method-assign]
        envs.close()
    logs = [h for h in trainer.state.log_history if "reward" in h]
    assert len(steps) == 3 and len(logs) == 3, trainer.state.log_history
    assert any(math.isfinite(float(h.get("grad_norm", 0.0))) and float(h.get("grad_norm", 0.0)) > 0 for h in logs), logs
    ended = episode_rewards(records(rec))
    assert len(ended) >= 12  # 3 steps x 4 generations, each finished and scored by the bridge (+ the dataset's reads)
    report = {
        "model": str(MODEL),
        "steps": steps,
        "total_s": total,
        "bridge_share": sum(s["bridge_s"] for s in steps) / sum(s["wall_s"] for s in steps),
        "rewards": [h["reward"] for h in logs],
        "grad_norm": [h.get("grad_norm") for h in logs],
    }
    print("\nLOCAL_TRAIN " + json.dumps(report))
    if os.environ.get("LOCAL_TRAIN_REPORT"):
        Path(os.environ["LOCAL_TRAIN_REPORT"]).write_text(json.dumps(report, indent=1), encoding="utf-8")
