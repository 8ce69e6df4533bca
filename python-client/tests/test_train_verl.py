"""The verl agent loop inside verl's own AgentLoopWorker (verl 0.9.1 installed with ``--no-deps``:
its vLLM/SGLang servers, FSDP and Megatron need GPUs). verl's worker instantiates the loop from its
registry with hydra, awaits ``run`` and pads and masks the output into its batch (its
``generate_sequences``); the LLM server is a stand-in that answers ``generate(prompt_ids=...)``
with replayed reference solutions as tokens of the real Qwen2.5 tokenizer, with logprobs
(trainer suite: ``pytest -m trainers``)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import numpy as np
import pytest
from trainer_helpers import KIT, episode_rewards, memo_scenarios, missing_kit, records, require, sessions, start_train_bridge

pytestmark = pytest.mark.trainers
require("torch", "the trainer suite needs the [train] extra (torch)")
agent_loop = require("verl.experimental.agent_loop.agent_loop", "install verl==0.9.1 --no-deps and its agent-loop imports (scripts/test-all.sh does)")

from envscaler.adapters import verl as verl_adapter  # noqa: E402
from envscaler.adapters.bridge_episode import EpisodeInfrastructureError  # noqa: E402
from envscaler.adapters.verl import EnvScalerAgentLoop, verl_rows  # noqa: E402


@pytest.fixture(scope="module")
def bridge(tmp_path_factory):
    rec = tmp_path_factory.mktemp("trajectories")
    with start_train_bridge(rec, replicas=2) as b:
        b.record_dir = rec
        yield b


@pytest.fixture(scope="module")
def tokenizer():
    if not (KIT / "tokenizer-qwen2.5").is_dir():
        missing_kit()
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(KIT / "tokenizer-qwen2.5"))


class ReplayServer:
    """Stands in for verl's LLMServerClient: each generate answers with the next scripted reply of
    its sample (keyed by the prompt's opening), with logprobs -0.01, -0.02, ... per token."""

    def __init__(self, tokenizer: Any, replies: list[str]) -> None:
        self.tokenizer, self.replies = tokenizer, replies
        self.calls: list[dict[str, Any]] = []

    def turn_of(self, prompt_ids: list[int]) -> int:
        """Which turn of its sample a prompt is: how many shorter prompts seen so far it extends
        (a sample's turn prompts grow; samples of one row share their prompts)."""
        return len({len(c["prompt_ids"]) for c in self.calls if len(c["prompt_ids"]) < len(prompt_ids) and prompt_ids[: len(c["prompt_ids"])] == c["prompt_ids"]})

    async def generate(self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any], **kw: Any) -> Any:
        from verl.workers.rollout.replica import TokenOutput

        text = self.replies[min(self.turn_of(list(prompt_ids)), len(self.replies) - 1)]
        ids = self.tokenizer.encode(text + "<|im_end|>", add_special_tokens=False)[: sampling_params["max_tokens"]]
        self.calls.append({"prompt_ids": list(prompt_ids), "ids": ids, "params": dict(sampling_params)})
        await asyncio.sleep(0)
        return TokenOutput(token_ids=ids, log_probs=[-0.01 * (i + 1) for i in range(len(ids))])


def _worker(tokenizer: Any, server: ReplayServer, endpoints: list[str], response_length: int = 512, timeout: float = 60.0) -> Any:
    """verl's AgentLoopWorker with the attributes its generate_sequences reads (its __init__ builds
    them from a full trainer config: model and rollout servers this machine cannot run)."""
    from omegaconf import OmegaConf
    from verl.utils.dataset.rl_dataset import RLHFDataset
    from verl.utils.rollout_trace import RolloutTraceConfig

    config = OmegaConf.create(
        {
            "actor_rollout_ref": {
                "rollout": {
                    "prompt_length": 4096,
                    "response_length": response_length,
                    "temperature": 1.0,
                    "top_p": 1.0,
                    "top_k": -1,
                    "calculate_log_probs": True,
                    "agent": {"default_agent_loop": "single_turn_agent"},
                    "val_kwargs": {"top_p": 1.0, "top_k": -1, "temperature": 0},
                    "trace": {},
                    "multi_turn": {},
                }
            },
            "data": {"apply_chat_template_kwargs": {}},
            "distillation": {"enabled": False},
        }
    )
    # the loop config an agent_loop_config_path yaml gives: verl passes its keys to the constructor
    agent_loop._agent_loop_registry["envscaler-test"] = OmegaConf.create(
        {"name": "envscaler-test", "_target_": "envscaler.adapters.verl.EnvScalerAgentLoop", "endpoints": endpoints, "timeout": timeout}
    )
    RolloutTraceConfig.init("envscaler", "test", None, False, None)
    w = object.__new__(agent_loop.AgentLoopWorker)
    w.config, w.llm_client, w.teacher_client, w.reward_loop_worker_handles = config, server, None, None
    w.rollout_config = config.actor_rollout_ref.rollout
    w.dataset_cls, w.tokenizer, w.processor, w.hf_model_type = RLHFDataset, tokenizer, None, "qwen2"
    w.mm_processor_kwargs, w.distillation_enabled, w.tools = {}, False, []
    return w


def _batch(rows: list[dict[str, Any]], agent_name: str, repeat: int = 1, uid: bool = False) -> Any:
    from verl.protocol import DataProto

    rows = [r for r in rows for _ in range(repeat)]
    non_tensor = {
        "raw_prompt": np.array([r["prompt"] for r in rows], dtype=object),
        "agent_name": np.array([agent_name] * len(rows), dtype=object),
        "extra_info": np.array([r["extra_info"] for r in rows], dtype=object),
        "index": np.array([r["extra_info"]["index"] for r in rows]),
    }
    if uid:
        non_tensor["uid"] = np.array([f"uid-{r['extra_info']['index']}" for r in rows], dtype=object)
    return DataProto.from_dict(tensors={}, non_tensors=non_tensor, meta_info={"global_steps": 1, "validate": False})


def _call(action: dict[str, Any]) -> str:
    return f"<tool_call>\n{json.dumps(action)}\n</tool_call>"


def _stats(bridge: Any) -> list[dict[str, Any]]:
    return [bridge.client(i, timeout=10).stats() for i in range(len(bridge.endpoints))]


def test_registered_under_envscaler():
    assert agent_loop._agent_loop_registry["envscaler"] == {"_target_": "envscaler.adapters.verl.EnvScalerAgentLoop"}
    assert issubclass(EnvScalerAgentLoop, agent_loop.AgentLoopBase)


@pytest.mark.parametrize("scenario", ["memo-1", "memo-2"])
def test_verl_worker_plays_reference_to_one_with_exact_masks(bridge, tokenizer, scenario):
    rows = verl_rows(bridge, [scenario], seeds=[4])
    assert rows[0]["agent_name"] == "envscaler" and rows[0]["extra_info"]["scenario_id"] == scenario and [m["role"] for m in rows[0]["prompt"]] == ["system", "user"]
    replies = [_call(a) for a in memo_scenarios()[scenario]["reference_actions"]] + ["Task Completed"]
    server = ReplayServer(tokenizer, replies)
    worker = _worker(tokenizer, server, bridge.endpoints)
    out = asyncio.run(worker.generate_sequences(_batch(rows, "envscaler-test", repeat=2)))
    # verl's own padding: [bsz, prompt_length] left-padded prompts, [bsz, response_length] right-padded responses
    assert out.batch["prompts"].shape == (2, 4096) and out.batch["responses"].shape == (2, 512)
    assert out.batch["rm_scores"].sum(dim=1).tolist() == [1.0, 1.0]  # the episode's reward, on the last response token
    assert len(server.calls) == 2 * len(replies)
    for b in range(2):
        attn = out.batch["attention_mask"][b].tolist()
        ids = out.batch["input_ids"][b].tolist()
        seq = [t for t, a in zip(ids, attn, strict=True) if a]
        resp_mask = out.batch["response_mask"][b].tolist()
        responses = out.batch["responses"][b].tolist()
        n = sum(out.batch["attention_mask"][b, 4096:].tolist())
        # every turn's prompt the server got is a prefix of the final sequence (tokens in, tokens out)
        mine = sorted({tuple(c["prompt_ids"]): c for c in server.calls if seq[: len(c["prompt_ids"])] == c["prompt_ids"]}.values(), key=lambda c: len(c["prompt_ids"]))
        assert len(mine) == len(replies)
        # the mask is 1 exactly on the server's tokens, in order
        trained = [t for t, m in zip(responses[:n], resp_mask[:n], strict=True) if m]
        assert trained == [t for c in mine for t in c["ids"]]
        assert tokenizer.decode(trained) == "<|im_end|>".join(replies) + "<|im_end|>"
        read = tokenizer.decode([t for t, m in zip(responses[:n], resp_mask[:n], strict=True) if not m])
        assert read.count("<tool_response>") == len(replies) - 1 and "<|im_start|>assistant\n" in read
        assert responses[n - 1] == tokenizer.convert_tokens_to_ids("<|im_end|>") and resp_mask[n - 1] == 1  # ends at the model's last token
        # logprobs: the server's at mask 1, 0 elsewhere
        lps = out.batch["rollout_log_probs"][b].tolist()
        assert [round(x, 4) for x, m in zip(lps[:n], resp_mask[:n], strict=True) if m] == [round(-0.01 * (i + 1), 4) for c in mine for i in range(len(c["ids"]))]
        assert all(x == 0 for x, m in zip(lps[:n], resp_mask[:n], strict=True) if not m)
        # the sampling params went through, with the turn's token budget
        assert all(c["params"]["temperature"] == 1.0 and 0 < c["params"]["max_tokens"] <= 512 for c in mine)
    extra = out.non_tensor_batch
    assert list(extra["envscaler_scenario_id"]) == [scenario, scenario] and list(extra["envscaler_env_fault"]) == [0, 0]
    assert sessions(_stats(bridge)) == 0
    ended = episode_rewards(records(bridge.record_dir))
    assert [ended[e] for e in extra["envscaler_episode_id"]] == [1.0, 1.0]  # the bridge's own record of each episode


def test_response_length_bounds_the_episode(bridge, tokenizer):
    rows = verl_rows(bridge, ["memo-2"], seeds=[1])
    replies = [_call(a) for a in memo_scenarios()["memo-2"]["reference_actions"]] + ["Task Completed"]
    server = ReplayServer(tokenizer, replies)
    first = len(tokenizer.encode(replies[0] + "<|im_end|>", add_special_tokens=False))
    worker = _worker(tokenizer, server, bridge.endpoints, response_length=first + 10)  # room for one turn and part of the tool result
    out = asyncio.run(worker.generate_sequences(_batch(rows, "envscaler-test")))
    assert len(server.calls) == 1  # no token left for a second turn: the episode was finished and scored
    # finished after the first action: memo-2's checks pass 2 of 3 (m1 deleted, Bob has none), 'x' was never added
    assert float(out.batch["rm_scores"].sum()) == pytest.approx(2 / 3, abs=1e-3) and list(out.non_tensor_batch["envscaler_budget_spent"]) == [1]
    assert int(out.batch["response_mask"].sum()) == first
    assert sessions(_stats(bridge)) == 0


def test_fork_group_from_a_mid_episode_state(bridge, tokenizer):
    """A row with prefix_actions: its rollout.n samples (one uid) continue forks of one source
    episode, spread over both replicas; the prefix's turn is prompt, only the group's turns are trained."""
    acts = memo_scenarios()["memo-2"]["reference_actions"]
    rows = verl_rows(bridge, ["memo-2"], seeds=[9], prefix_actions={"memo-2": acts[:1]})
    assert json.loads(rows[0]["extra_info"]["prefix_actions"]) == acts[:1]
    replies = [_call(acts[1]), "Task Completed"]
    server = ReplayServer(tokenizer, replies)
    worker = _worker(tokenizer, server, bridge.endpoints)
    verl_adapter._shared.clear()
    before = {r["episode_id"] for r in records(bridge.record_dir) if r.get("t") == "episode_start"}
    out = asyncio.run(worker.generate_sequences(_batch(rows, "envscaler-test", repeat=4, uid=True)))
    assert out.batch["rm_scores"].sum(dim=1).tolist() == [1.0] * 4
    (groups,) = [g for per_loop in verl_adapter._shared.values() for _, g in per_loop.values()] or [None]
    assert groups is not None and groups.sources == 1 and sum(groups.placed.values()) == 4 and len(groups.placed) == 2
    for b in range(4):
        n = sum(out.batch["attention_mask"][b, 4096:].tolist())
        prompt = tokenizer.decode([t for t, a in zip(out.batch["prompts"][b].tolist(), out.batch["attention_mask"][b, :4096].tolist(), strict=True) if a])
        assert '"delete_memo"' in prompt and prompt.endswith("<|im_start|>assistant\n")  # the source's turn and its result
        trained = tokenizer.decode([t for t, m in zip(out.batch["responses"][b, :n].tolist(), out.batch["response_mask"][b, :n].tolist(), strict=True) if m])
        assert trained == "<|im_end|>".join(replies) + "<|im_end|>"
    assert len(server.calls) == 4 * len(replies)
    # one source episode played the prefix: the group's episodes are forks of it (no other reset)
    starts = [r for r in records(bridge.record_dir) if r.get("t") == "episode_start" and r["episode_id"] not in before]
    assert len([s for s in starts if not s.get("forked_from")]) == 1 and len([s for s in starts if s.get("forked_from")]) == 4
    assert sessions(_stats(bridge)) == 0


def test_infrastructure_failure_raises(tokenizer, tmp_path):
    """The replica dies mid-episode: run raises EpisodeInfrastructureError, never reward 0."""
    import os
    import signal

    with start_train_bridge(tmp_path, replicas=1) as b:
        rows = verl_rows(b, ["memo-2"], seeds=[0])
        killed: list[int] = []

        class Dying(ReplayServer):
            async def generate(self, request_id: str, **kw: Any) -> Any:
                if not killed:  # the replica holding the episode dies before the model's turn reaches it
                    killed.append(b.replica_pids()[0])
                    os.kill(killed[0], signal.SIGKILL)
                return await super().generate(request_id, **kw)

        worker = _worker(tokenizer, Dying(tokenizer, [_call(memo_scenarios()["memo-2"]["reference_actions"][0])]), b.endpoints, timeout=15)
        verl_adapter._shared.clear()
        with pytest.raises(EpisodeInfrastructureError) as e:
            asyncio.run(worker.generate_sequences(_batch(rows, "envscaler-test")))
        assert killed and e.value.code in ("session_lost", "unknown_session", "session_closed", "timeout")
