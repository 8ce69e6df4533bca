"""TRL's ``rollout_func`` (``TRLRollout``): whole bridge episodes, a simulated user's turns
included, as token ids with an env mask; one step of the real GRPOTrainer with it on the tiny
random Qwen2 (trainer suite: ``pytest -m trainers``, needs the [train] extra)."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from trainer_helpers import KIT, TRAIN_ENVS, episode_rewards, memo_scenarios, missing_kit, records, require, sessions

from envscaler import Bridge
from envscaler.adapters.bridge_episode import EpisodeInfrastructureError
from envscaler.adapters.trl_rollout import ROW_FIELD, TRLRollout, episode_reward

from helpers import NOTES_ENVS, notes_scenarios, start_bridge
from user_sim import scripted_user

pytestmark = pytest.mark.trainers
require("transformers", "the trainer suite needs the [train] extra (transformers)")
require("trl", "the trainer suite needs the [train] extra (trl)")

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

#: Carol, the simulated user of notes-2 (a conversation scenario), scripted
CAROL = ["Hi, I'm Carol (u3). How many notes do I have?", "Thanks. Add a note 'x' with body 'y', please."]


@pytest.fixture(scope="module")
def bridge(tmp_path_factory: Any) -> Iterator[Bridge]:
    """2 replicas of memo-v1 and notes-v1, the simulated user scripted, every episode recorded."""
    rec = tmp_path_factory.mktemp("trajectories")
    with scripted_user(CAROL) as url, start_bridge(envs=[TRAIN_ENVS, NOTES_ENVS], replicas=2, extra=("--user-base-url", url, "--user-model", "user-sim", "--record", "--record-dir", str(rec))) as b:
        b.record_dir = rec  # type: ignore[attr-defined]
        yield b


@pytest.fixture(scope="module")
def tok() -> Any:
    if not (KIT / "tokenizer-qwen2.5").is_dir():
        missing_kit()
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(KIT / "tokenizer-qwen2.5"))


def _call(action: dict[str, Any]) -> str:
    return f"<tool_call>\n{json.dumps(action)}\n</tool_call>"


class Replay:
    """A ``generate`` that answers turn k of every episode with ``replies[k]`` (the turn is read off
    the context: how many assistant turns it has already closed)."""

    def __init__(self, tok: Any, replies: list[str], prompt_turns: int = 0) -> None:
        self.tok, self.replies, self.prompt_turns = tok, replies, prompt_turns
        self.calls: list[tuple[list[int], list[int]]] = []

    async def __call__(self, context: list[int], left: int) -> tuple[list[int], list[float]]:
        k = self.tok.decode(context).count("<|im_start|>assistant\n") - 1 - self.prompt_turns
        ids = self.tok.encode(self.replies[min(k, len(self.replies) - 1)] + "<|im_end|>", add_special_tokens=False)[:left]
        self.calls.append((list(context), ids))
        return ids, [-0.5] * len(ids)


def _trainer(tok: Any, n: int, budget: int = 1024) -> Any:
    return SimpleNamespace(num_generations=n, num_generations_eval=n, model=SimpleNamespace(training=True), processing_class=tok, max_completion_length=budget)


def test_a_conversation_group_with_the_simulated_users_turns_masked(bridge: Bridge, tok: Any) -> None:
    actions = notes_scenarios()["notes-2"]["reference_actions"]
    replies = [_call(actions[0]), "You have 1 note.", _call(actions[1]), "Done: I added 'x'."]
    with TRLRollout(bridge, generate=Replay(tok, replies)) as rollout:
        rows = rollout.rows(["notes-2"], seeds=[3])
        assert json.loads(rows[0]["prompt"][0][ROW_FIELD]) == {"scenario_id": "notes-2", "seed": 3, "prefix_actions": []}
        assert rows[0]["prompt"][1]["content"] == CAROL[0]  # the simulated user's opening is the task
        out = rollout([rows[0]["prompt"]] * 2, _trainer(tok, 2))
        assert set(out) == {"prompt_ids", "completion_ids", "logprobs", "env_mask", "envscaler_reward"}
        assert out["envscaler_reward"] == [1.0, 1.0] and episode_reward(envscaler_reward=out["envscaler_reward"]) == [1.0, 1.0]
        for ids, mask, lps in zip(out["completion_ids"], out["env_mask"], out["logprobs"], strict=True):
            assert len(ids) == len(mask) == len(lps)
            trained = tok.decode([t for t, m in zip(ids, mask, strict=True) if m])
            read = tok.decode([t for t, m in zip(ids, mask, strict=True) if not m])
            assert trained == "<|im_end|>".join(replies) + "<|im_end|>"
            assert CAROL[1] in read and CAROL[1] not in trained  # the user's turn is read, never trained
            assert read.count("<tool_response>") == 2
            assert [x for x, m in zip(lps, mask, strict=True) if m] == [-0.5] * sum(mask) and all(x == 0 for x, m in zip(lps, mask, strict=True) if not m)
        assert all(ep is not None and ep.result.end_reason == "user_stop" for ep in rollout.last_episodes)
        with pytest.raises(ValueError, match="runs of num_generations"):
            rollout([rows[0]["prompt"], [{"role": "user", "content": "x"}]], _trainer(tok, 2))
    assert sessions([bridge.client(i, timeout=10).stats() for i in range(2)]) == 0


def test_a_fork_group_continues_one_source_across_replicas(bridge: Bridge, tok: Any) -> None:
    acts = memo_scenarios()["memo-2"]["reference_actions"]
    replies = [_call(acts[1]), "Task Completed"]
    with TRLRollout(bridge, generate=Replay(tok, replies, prompt_turns=1)) as rollout:
        (row,) = rollout.rows(["memo-2"], seeds=[21], prefix_actions={"memo-2": acts[:1]})
        before = {r["episode_id"] for r in records(bridge.record_dir) if r.get("t") == "episode_start"}  # type: ignore[attr-defined]
        out = rollout([row["prompt"]] * 4, _trainer(tok, 4))
        assert out["envscaler_reward"] == [1.0] * 4
        for pids, ids, mask in zip(out["prompt_ids"], out["completion_ids"], out["env_mask"], strict=True):
            assert '"delete_memo"' in tok.decode(pids) and tok.decode(pids).endswith("<|im_start|>assistant\n")  # the prefix is prompt
            assert tok.decode([t for t, m in zip(ids, mask, strict=True) if m]) == "<|im_end|>".join(replies) + "<|im_end|>"
    starts = [r for r in records(bridge.record_dir) if r.get("t") == "episode_start" and r["episode_id"] not in before]  # type: ignore[attr-defined]
    assert len([s for s in starts if not s.get("forked_from")]) == 1  # one source played the prefix ...
    forks = [s for s in starts if s.get("forked_from")]
    assert len(forks) == 4 and all(s["forked_from"]["step"] == 1 for s in forks)  # ... forked into the group
    sessions_now = [bridge.client(i, timeout=10).stats() for i in range(2)]
    assert sessions(sessions_now) == 0


@pytest.mark.parametrize("on_infra_error", ["raise", "skip"])
def test_infrastructure_failure_raises_or_is_left_unscored(tok: Any, on_infra_error: str) -> None:
    """The replica dies mid-episode: the step fails (or, opted in, the rollout is left unscored), never reward 0."""
    import signal

    with start_bridge(envs=[TRAIN_ENVS], replicas=1) as b:
        killed: list[int] = []

        async def dying(context: list[int], left: int) -> tuple[list[int], list[float] | None]:
            if not killed:  # the replica holding the episode dies before the model's turn reaches it
                killed.append(b.replica_pids()[0])
                os.kill(killed[0], signal.SIGKILL)
            return tok.encode("Task Completed<|im_end|>", add_special_tokens=False), None

        with TRLRollout(b, generate=dying, timeout=15, on_infra_error=on_infra_error) as rollout:
            (row,) = rollout.rows(["memo-1"], seeds=[0])
            if on_infra_error == "raise":
                with pytest.raises(EpisodeInfrastructureError):
                    rollout([row["prompt"]], _trainer(tok, 1))
            else:
                out = rollout([row["prompt"]], _trainer(tok, 1))
                assert out["envscaler_reward"] == [None] and out["env_mask"] == [[0]]
        assert killed


@pytest.fixture(scope="module")
def tiny_qwen(tmp_path_factory: Any) -> Any:
    if not (KIT / "tiny_model.py").exists():
        missing_kit()
    sys.path.insert(0, str(KIT))
    from tiny_model import tiny_qwen2

    return tiny_qwen2(tmp_path_factory.mktemp("tiny") / "qwen2")


@pytest.mark.timeout(900)
def test_grpo_trainer_one_step_with_the_rollout_func(bridge: Bridge, tiny_qwen: Any, tmp_path: Any) -> None:
    """One GRPO step of the real trainer: a conversation group (notes-2, the scripted user) and a
    fork group (memo-2 after its first reference action), 2 generations each, on the tiny random model."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    torch.manual_seed(0)
    tok = AutoTokenizer.from_pretrained(str(tiny_qwen))
    tok.padding_side = "left"
    model = AutoModelForCausalLM.from_pretrained(str(tiny_qwen), dtype=torch.float32)
    acts = memo_scenarios()["memo-2"]["reference_actions"]
    rollout = TRLRollout(bridge, max_turn_tokens=6, max_steps=4)
    rows = rollout.rows(["notes-2"], seeds=[7]) + rollout.rows(["memo-2"], seeds=[7], prefix_actions={"memo-2": acts[:1]})
    from datasets import Dataset

    dataset = Dataset.from_list(rows)
    before = {r["episode_id"] for r in records(bridge.record_dir) if r.get("t") == "episode_start"}  # type: ignore[attr-defined]
    config = GRPOConfig(
        output_dir=str(tmp_path / "out"),
        use_cpu=True,
        bf16=False,
        per_device_train_batch_size=4,
        num_generations=2,
        max_completion_length=24,
        max_steps=1,
        learning_rate=1e-5,
        report_to="none",
        save_strategy="no",
        logging_steps=1,
        seed=0,
    )
    trainer = GRPOTrainer(model=model, reward_funcs=[rollout.reward], args=config, train_dataset=dataset, processing_class=tok, rollout_func=rollout)
    try:
        trainer.train()
    finally:
        rollout.close()
    logs = [h for h in trainer.state.log_history if "reward" in h]
    assert logs, trainer.state.log_history
    eps = rollout.last_episodes
    assert len(eps) == 4 and all(ep is not None for ep in eps)
    assert sorted(ep.result.scenario_id for ep in eps if ep) == ["memo-2", "memo-2", "notes-2", "notes-2"]
    rewards = [ep.reward for ep in eps if ep]
    assert logs[0]["reward"] == pytest.approx(sum(r or 0.0 for r in rewards) / 4, abs=1e-4)
    for ep in eps:
        assert ep is not None and 0 < sum(ep.response_mask) <= 24 and len(ep.response_ids) == len(ep.response_mask)
        trained = [t for t, m in zip(ep.response_ids, ep.response_mask, strict=True) if m]
        assert trained == [t for i in sorted(ep.result.generated_ids) for t in ep.result.generated_ids[i]]  # exactly the model's tokens
        if ep.result.scenario_id == "notes-2":  # the user's replies (after a text turn) are read, never trained
            last = max(i for i, m in enumerate(ep.result.messages) if m["role"] == "assistant")  # the response ends with the model's last turn
            said = [m["content"] for m in ep.result.messages[2:last] if m["role"] == "user"]
            read = tok.decode([t for t, m in zip(ep.response_ids, ep.response_mask, strict=True) if not m])
            assert all(s in read for s in said if s in CAROL)
    # the bridge played them: one reset per conversation member, one source + 2 forks for memo-2, each finished with the reward the trainer got
    recs = records(bridge.record_dir)  # type: ignore[attr-defined]
    starts = {r["episode_id"]: r for r in recs if r.get("t") == "episode_start" and r["episode_id"] not in before}
    assert sorted(s["scenario_id"] for s in starts.values() if not s.get("forked_from")) == ["memo-2", "notes-2", "notes-2"]
    assert len([s for s in starts.values() if s.get("forked_from")]) == 2
    ended = episode_rewards(recs)
    assert sorted(ended[ep.result.episode_id] for ep in eps if ep) == pytest.approx(sorted(r or 0.0 for r in rewards))
    assert sessions([bridge.client(i, timeout=10).stats() for i in range(2)]) == 0
