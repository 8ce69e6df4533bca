"""What the recipe's stages share: the run folder's layout, JSON files, the bridge, model loading
and the Hugging Face policy the evaluation plays with.

Every stage is a script with a ``main(argv)`` (``python examples/train/<stage>.py --help``);
``run_all.py`` calls them in order in one process. A run folder (``--run``) holds everything:

    split.json                 which envs train, which are held out (split_envs.py)
    sft/trajectories/          the bridge's records of the reference solutions (make_sft_data.py)
    sft/sft.jsonl              `envscaler export chat` of them: TRL's messages + tools rows
    models/sft/                the SFT LoRA adapter + model.json (sft.py)
    models/grpo/               the GRPO LoRA adapter + model.json, grpo/log.json (grpo.py)
    eval/<name>/               episodes.jsonl and results.json per evaluated model (eval_model.py)
    reward.png                 reward per GRPO step and the eval bars (plot.py)
    hackability.json           reward without the state change the task asks for (hackability.py)
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
BUNDLED_ENVS = REPO / "envs"

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")


# ---------------------------------------------------------------------------------------------- files


def write_json(path: Path, value: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(value, indent=1, ensure_ascii=False, default=str) + "\n", encoding="utf-8")
    tmp.replace(path)


def read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def write_jsonl(path: Path, rows: Sequence[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")


#: ``serve --idle-timeout`` of the recipe's bridges: the bridge closes a session unused for this
#: long (default 600 s), and one model turn of a 0.5B on a loaded 2-core CPU took longer than that
#: (an eval episode died with ``session_closed`` waiting on it)
IDLE_TIMEOUT = ("--idle-timeout", "21600")

#: The trainer arguments SFT and GRPO share on this CPU: no GPU, no bf16, a log line every step,
#: nothing saved by the trainer (the stages save their adapters themselves), no tracker.
CPU_TRAINER_ARGS: dict[str, Any] = {"logging_steps": 1, "save_strategy": "no", "report_to": "none", "use_cpu": True, "bf16": False}


def lora_config(rank: int) -> Any:
    """The LoRA both training stages put on the model: rank r, alpha 2r, on the attention projections."""
    from peft import LoraConfig

    return LoraConfig(r=rank, lora_alpha=2 * rank, target_modules=["q_proj", "k_proj", "v_proj", "o_proj"], task_type="CAUSAL_LM")


def load_split(run: Path) -> dict[str, Any]:
    p = run / "split.json"
    if not p.is_file():
        raise SystemExit(f"{p} is missing: run split_envs.py --run {run} first")
    split: dict[str, Any] = read_json(p)
    return split


def cli() -> list[str]:
    """The envscaler CLI's command line (the same lookup envscaler.launch uses)."""
    from envscaler.launch import resolve_command

    return resolve_command()


def envscaler_cli(*args: str) -> str:
    """Runs ``envscaler <args>``; returns its stdout, raises with its stderr when it fails."""
    r = subprocess.run([*cli(), *args], capture_output=True, text=True, check=False)
    if r.returncode != 0:
        raise RuntimeError(f"envscaler {' '.join(args)} failed ({r.returncode}):\n{r.stderr[-3000:]}")
    return r.stdout + r.stderr


def _manifests(envs_dirs: Sequence[str | Path]) -> list[tuple[str, Path]]:
    """(env id, bundle folder) of every bundle in the given folders of bundles."""
    out = []
    for d in envs_dirs:
        for manifest in sorted(Path(d).glob("*/manifest.json")):
            m = read_json(manifest)
            out.append((str(m.get("env_id") or m.get("id")), manifest.parent))
    return out


def bundled_scenarios(env_ids: Sequence[str], envs_dirs: Sequence[str | Path] = (BUNDLED_ENVS,)) -> list[dict[str, Any]]:
    """The scenarios (with their reference actions) of the given envs, read from their bundles."""
    out: list[dict[str, Any]] = []
    for env_id, folder in _manifests(envs_dirs):
        if env_id in env_ids:
            out += read_json(folder / "scenarios.json")
    return out


def bundle_dirs(env_ids: Sequence[str], envs_dirs: Sequence[str | Path] = (BUNDLED_ENVS,)) -> list[str]:
    """The bundle folders of the given env ids (a bridge serving only them)."""
    dirs = [str(folder) for env_id, folder in _manifests(envs_dirs) if env_id in env_ids]
    if len(dirs) != len(set(env_ids)):
        raise SystemExit(f"not every env of {list(env_ids)} has a bundle in {[str(d) for d in envs_dirs]}")
    return dirs


def env_ids_of(envs_dirs: Sequence[str | Path] = (BUNDLED_ENVS,)) -> list[str]:
    return [env_id for env_id, _ in _manifests(envs_dirs)]


# ---------------------------------------------------------------------------------------------- models


def model_spec(path: str | Path) -> dict[str, Any]:
    """``{"base": folder, "adapters": [folders]}``: a plain HF folder, or a recipe model (a folder with model.json)."""
    p = Path(path)
    if (p / "model.json").is_file():
        spec: dict[str, Any] = read_json(p / "model.json")
        return spec
    return {"base": str(p), "adapters": []}


def load_model(path: str | Path, threads: int = 0) -> tuple[Any, Any]:
    """The model (fp32, CPU, LoRA adapters merged in order) and its tokenizer (left padding)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if threads:
        torch.set_num_threads(threads)
    spec = model_spec(path)
    tok = AutoTokenizer.from_pretrained(spec["base"])
    tok.padding_side = "left"
    model = AutoModelForCausalLM.from_pretrained(spec["base"], dtype=torch.float32)
    for adapter in spec["adapters"]:
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, adapter).merge_and_unload()
    model.eval()
    return model, tok


def save_model_spec(out: Path, base_spec: dict[str, Any], adapter_dir: Path, stage: str) -> None:
    write_json(out / "model.json", {"base": base_spec["base"], "adapters": [*base_spec["adapters"], str(adapter_dir.resolve())], "stage": stage})


# ---------------------------------------------------------------------------------------------- the policy


class BatchedPolicy:
    """An ``envscaler.Agent`` policy over a local HF model: the chat template (with the tools) in,
    the model's raw text out (the env reads ```json fences, ``<tool_call>`` tags and bare JSON).
    Calls that arrive together (episodes played concurrently) are generated as one batch, which
    on a CPU is several times the tokens per second of one sequence at a time."""

    def __init__(self, model: Any, tokenizer: Any, max_new_tokens: int = 96, temperature: float = 0.7, batch: int = 4, max_prompt_tokens: int = 0) -> None:
        from envscaler.tokens import template_messages

        self.model, self.tok = model, tokenizer
        self.max_new_tokens, self.temperature, self.batch = max_new_tokens, temperature, max(1, batch)
        self.max_prompt_tokens = max_prompt_tokens
        self._template_messages = template_messages
        self._pending: list[tuple[str, asyncio.Future[str]]] = []
        self._runner: asyncio.Task[None] | None = None
        self._lock = threading.Lock()
        self.calls = 0
        self.generated_tokens = 0
        self.generate_seconds = 0.0

    async def __call__(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
        text = self.tok.apply_chat_template(self._template_messages(messages), tools=tools or None, tokenize=False, add_generation_prompt=True)
        fut: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._pending.append((text, fut))
        if self._runner is None or self._runner.done():
            self._runner = asyncio.create_task(self._drain())
        return await fut

    async def _drain(self) -> None:
        while self._pending:
            await asyncio.sleep(0.05)  # let the other episodes' next calls arrive
            take, self._pending = self._pending[: self.batch], self._pending[self.batch :]
            try:
                outs = await asyncio.to_thread(self._generate, [t for t, _ in take])
            except Exception as e:  # the policy's failure is that episode's (Agent records policy_error)
                for _, f in take:
                    f.set_exception(e)
                continue
            for (_, f), o in zip(take, outs):
                f.set_result(o)

    def _generate(self, texts: list[str]) -> list[str]:
        import torch

        with self._lock:
            t0 = time.monotonic()
            enc = self.tok(texts, return_tensors="pt", padding=True, add_special_tokens=False)
            if self.max_prompt_tokens and enc["input_ids"].shape[1] > self.max_prompt_tokens:
                enc = {k: v[:, -self.max_prompt_tokens :] for k, v in enc.items()}
            sample = self.temperature > 0
            with torch.no_grad():
                out = self.model.generate(
                    **enc,
                    max_new_tokens=self.max_new_tokens,
                    do_sample=sample,
                    temperature=self.temperature if sample else None,
                    top_p=None,
                    top_k=None,
                    pad_token_id=self.tok.pad_token_id,
                )
            new = out[:, enc["input_ids"].shape[1] :]
            self.calls += len(texts)
            self.generated_tokens += int((new != self.tok.pad_token_id).sum())
            self.generate_seconds += time.monotonic() - t0
            return [str(s) for s in self.tok.batch_decode(new, skip_special_tokens=True)]


# ---------------------------------------------------------------------------------------------- metrics


def pass_hat_k(successes: int, trials: int, k: int) -> float:
    """tau-bench's pass^k for one scenario: C(c, k) / C(n, k)."""
    return math.comb(successes, k) / math.comb(trials, k) if trials >= k else float("nan")


def summarize(episodes: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Mean reward (and its spread), success rate (reward 1), pass^k over scenarios, per env."""

    def block(eps: Sequence[dict[str, Any]]) -> dict[str, Any]:
        if not eps:
            return {"episodes": 0}
        rewards = [float(e["reward"]) for e in eps]
        mean = sum(rewards) / len(rewards)
        sd = math.sqrt(sum((r - mean) ** 2 for r in rewards) / len(rewards))
        by_scenario: dict[str, list[float]] = {}
        for e in eps:
            by_scenario.setdefault(e["scenario_id"], []).append(float(e["reward"]))
        kmax = min(len(v) for v in by_scenario.values())
        pass_k = {str(k): sum(pass_hat_k(sum(r >= 1.0 for r in v), len(v), k) for v in by_scenario.values()) / len(by_scenario) for k in range(1, kmax + 1)}
        return {
            "episodes": len(eps),
            "scenarios": len(by_scenario),
            "mean_reward": mean,
            "reward_sd": sd,
            "success_rate": sum(r >= 1.0 for r in rewards) / len(rewards),
            "pass_k": pass_k,
            "mean_steps": sum(int(e.get("steps", 0)) for e in eps) / len(eps),
            "tool_call_share": sum(bool(e.get("tool_calls")) for e in eps) / len(eps),
        }

    envs = sorted({e["env_id"] for e in episodes})
    return {"totals": block(episodes), "per_env": {env: block([e for e in episodes if e["env_id"] == env]) for env in envs}}


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)
