"""Stage 4: GRPO with TRL's GRPOTrainer through the TRL adapter, on the train envs' task scenarios.

    python examples/train/grpo.py --run runs/recipe --model runs/recipe/models/sft [--max-steps 2 --num-generations 4]

The model (``--model``: a Hugging Face folder, or a recipe model folder such as RUN/models/sft,
whose adapters are merged in first) gets a new LoRA adapter. Each step takes ``--prompts`` rows
(a scenario and seed each) and plays ``--num-generations`` completions of each as a group: TRL's
tool loop calls the env's tools on the bridge (``envscaler.adapters.trl.TRLEnvironments``), and
``get_reward()`` is the bridge's score of the episode's final state (the env's rule-based checks).
The response parser reads ```json fences and ``<tool_call>`` tags (``use_fenced_tool_calls(...,
accept_tags=True)``): the base Qwen2.5-Coder writes the first, the SFT data teaches the second.

Writes RUN/models/grpo/ (adapter/, model.json), RUN/grpo/log.json (per step: the group's mean
reward and spread, TRL's log, wall time and the time spent waiting on the bridge),
RUN/grpo/episodes.jsonl (every training episode: scenario, seed, reward, checks, tool calls, state
hashes at the start and the end: hackability.py reads it) and RUN/grpo/trajectories/ (the bridge's
records).
"""

from __future__ import annotations

import argparse
import shutil
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from recipe_common import CPU_TRAINER_ARGS, IDLE_TIMEOUT, bundle_dirs, load_model, lora_config, log, model_spec, save_model_spec, write_json, write_jsonl


class BridgeMeter:
    """Times every bridge round trip of the adapter's episodes and keeps what each episode did.

    It wraps ``BridgeEpisode.reset/step/finish`` (the adapter's only calls to the bridge) for the
    duration of the stage: wall time spent waiting on the bridge, and per episode its start and end
    state hashes, tool calls, reward and checks."""

    def __init__(self) -> None:
        from envscaler.adapters.bridge_episode import BridgeEpisode

        self.cls = BridgeEpisode
        self.lock = threading.Lock()
        self.seconds = 0.0
        self.calls = 0
        self.episodes: list[dict[str, Any]] = []
        self._live: dict[int, dict[str, Any]] = {}
        self._orig = {n: getattr(BridgeEpisode, n) for n in ("reset", "step", "finish")}

    def __enter__(self) -> BridgeMeter:
        meter, orig = self, self._orig

        def reset(ep: Any, scenario_id: str, seed: int | None = None) -> Any:
            t = time.monotonic()
            try:
                out = orig["reset"](ep, scenario_id, seed)
            finally:
                meter._add(time.monotonic() - t)
            with meter.lock:
                meter._live[id(ep)] = {
                    "scenario_id": scenario_id,
                    "env_id": ep.info.get("env_id"),
                    "seed": seed,
                    "start_hash": ep.info.get("state_hash"),
                    "end_hash": ep.info.get("state_hash"),
                    "tool_calls": [],
                }
            return out

        def step(ep: Any, action: Any) -> Any:
            t = time.monotonic()
            try:
                r = orig["step"](ep, action)
            finally:
                meter._add(time.monotonic() - t)
            row = meter._live.get(id(ep))
            if row is not None:
                row["tool_calls"].append(action)
                if r is not None:
                    row["end_hash"] = (r.get("info") or {}).get("state_hash", row["end_hash"])
            return r

        def finish(ep: Any) -> Any:
            t = time.monotonic()
            try:
                end = orig["finish"](ep)
            finally:
                meter._add(time.monotonic() - t)
            with meter.lock:
                row = meter._live.pop(id(ep), None)
            if row is not None:  # the first finish of this episode (a second one is answered from the kept end)
                row.update(reward=end.reward, end_reason=end.end_reason, reward_info=end.reward_info, changed_state=row["start_hash"] != row["end_hash"])
                with meter.lock:
                    meter.episodes.append(row)
            return end

        for name, fn in (("reset", reset), ("step", step), ("finish", finish)):
            setattr(self.cls, name, fn)
        return self

    def _add(self, s: float) -> None:
        with self.lock:
            self.seconds += s
            self.calls += 1

    def __exit__(self, *exc: object) -> None:
        for name, fn in self._orig.items():
            setattr(self.cls, name, fn)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run", type=Path, required=True)
    ap.add_argument("--model", required=True, help="a Hugging Face folder or a recipe model folder (RUN/models/sft)")
    ap.add_argument("--max-steps", type=int, default=20)
    ap.add_argument("--num-generations", type=int, default=4, help="completions per prompt: the GRPO group (>= 2; the recipe uses >= 4)")
    ap.add_argument("--prompts", type=int, default=1, help="rows (scenario, seed) per step")
    ap.add_argument("--seeds", type=int, default=4, help="each train task scenario is a row with seeds 0..N-1")
    ap.add_argument("--scenarios", nargs="*", default=None, help="scenario ids or globs (default: every task scenario of the train envs)")
    ap.add_argument("--max-completion-length", type=int, default=128, help="tokens per model turn")
    ap.add_argument("--max-tool-calls", type=int, default=4, help="TRL's max_tool_calling_iterations")
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--lr", type=float, default=1e-5)
    ap.add_argument("--beta", type=float, default=0.0, help="KL coefficient (0: no reference model, TRL's default)")
    ap.add_argument("--lora-r", type=int, default=16)
    ap.add_argument("--replicas", type=int, default=1)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    from recipe_common import load_split
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    import envscaler
    from envscaler.adapters.trl import TRLEnvironments, use_fenced_tool_calls

    t0 = time.monotonic()
    split = load_split(args.run)
    out_dir = args.run / "grpo"
    shutil.rmtree(out_dir / "trajectories", ignore_errors=True)
    model_out = args.run / "models" / "grpo"
    model, tok = load_model(args.model, args.threads)
    use_fenced_tool_calls(tok, accept_tags=True)
    tok.padding_side = "left"
    steps: list[dict[str, Any]] = []
    meter = BridgeMeter()

    class StepClock(TrainerCallback):  # type: ignore[misc]
        def on_step_begin(self, *a: Any, **k: Any) -> None:
            self.t, self.bridge, self.eps = time.monotonic(), meter.seconds, len(meter.episodes)

        def on_step_end(self, a: Any, state: Any, *rest: Any, **k: Any) -> None:
            eps = meter.episodes[self.eps :]
            rewards = [float(e["reward"]) for e in eps if e.get("reward") is not None]
            steps.append(
                {
                    "step": state.global_step,
                    "seconds": time.monotonic() - self.t,
                    "bridge_seconds": meter.seconds - self.bridge,
                    "episodes": len(eps),
                    "rewards": rewards,
                    "scenarios": sorted({str(e["scenario_id"]) for e in eps}),
                }
            )
            s = steps[-1]
            log(f"grpo: step {s['step']} {s['seconds']:.0f} s (bridge {s['bridge_seconds']:.2f} s), rewards {rewards}")
            # kept as the run goes: a run stopped midway still has its finished steps
            write_json(out_dir / "steps.partial.json", steps)
            write_jsonl(out_dir / "episodes.partial.jsonl", meter.episodes)

    with (
        envscaler.launch(envs=bundle_dirs(split["train"], split["envs_dirs"]), replicas=args.replicas, record_dir=out_dir / "trajectories", extra_args=IDLE_TIMEOUT) as bridge,
        TRLEnvironments(bridge, envs=split["train"]) as envs,
    ):
        patterns = args.scenarios or [s for e in split["train"] for s in split["task_scenarios"].get(e, [])]
        dataset = envs.dataset(patterns, seeds=range(args.seeds)).shuffle(seed=args.seed)
        log(f"grpo: {len(dataset)} rows (scenario x seed) from {len(patterns)} scenario patterns")
        config = GRPOConfig(
            output_dir=str(model_out / "trainer"),
            max_steps=args.max_steps,
            per_device_train_batch_size=args.prompts * args.num_generations,
            num_generations=args.num_generations,
            max_completion_length=args.max_completion_length,
            max_tool_calling_iterations=args.max_tool_calls,
            temperature=args.temperature,
            learning_rate=args.lr,
            beta=args.beta,
            **CPU_TRAINER_ARGS,
            seed=args.seed,
        )
        lora = lora_config(args.lora_r)
        trainer = GRPOTrainer(model=model, args=config, train_dataset=dataset, processing_class=tok, environment_factory=envs.factories, peft_config=lora, callbacks=[StepClock()])
        with meter:
            t_train = time.monotonic()
            trainer.train()
            train_s = time.monotonic() - t_train
    trainer.model.save_pretrained(str(model_out / "adapter"))
    save_model_spec(model_out, model_spec(args.model), model_out / "adapter", "grpo")
    history = [dict(h) for h in trainer.state.log_history]
    # TRL logs the group statistics per step: mean reward, the spread within groups, the share of groups with no spread
    per_step = [h for h in history if "reward" in h]
    for s, h in zip(steps, per_step):
        s["trl"] = {k: v for k, v in h.items() if k.startswith(("reward", "frac_reward", "completions/", "tools/", "loss", "entropy", "step"))}
    bridge_s = sum(s["bridge_seconds"] for s in steps)
    step_s = sum(s["seconds"] for s in steps)
    result = {
        "steps": steps,
        "train_seconds": train_s,
        "wall_seconds": time.monotonic() - t0,
        "bridge_seconds": bridge_s,
        "bridge_share": bridge_s / step_s if step_s else None,
        "bridge_calls": meter.calls,
        "episodes": len(meter.episodes),
        "log_history": history,
        "settings": vars(args) | {"rows": len(dataset)},
    }
    write_json(out_dir / "log.json", result)
    write_jsonl(out_dir / "episodes.jsonl", meter.episodes)
    log(f"grpo: {len(steps)} steps in {train_s:.0f} s, {len(meter.episodes)} episodes, bridge share {result['bridge_share']}")
    return result


if __name__ == "__main__":
    main()
