"""The OpenRLHF agent file run by OpenRLHF's own ``MultiTurnAgentExecutor`` (openrlhf installed with
``--no-deps``: its vLLM, DeepSpeed and flash-attn need a GPU). The LLM engine is a stand-in that
replays memo's reference solutions as tokens of the real Qwen2.5 tokenizer (trainer suite:
``pytest -m trainers``)."""

from __future__ import annotations

import asyncio
import gc
import json
from types import SimpleNamespace

import pytest
from trainer_helpers import KIT, memo_scenarios, missing_kit, require, sessions, start_train_bridge

from envscaler.adapters.bridge_episode import EpisodeInfrastructureError

pytestmark = pytest.mark.trainers
require("torch", "the trainer suite needs the [train] extra (torch)")
agent_mod = require("openrlhf.utils.agent", "install openrlhf==0.11.2 --no-deps (scripts/test-all.sh does) for the OpenRLHF test")

from envscaler.adapters import openrlhf_agent  # noqa: E402
from envscaler.adapters.openrlhf_agent import AgentExecutor, AgentInstance, chatml_feedback, openrlhf_rows  # noqa: E402


@pytest.fixture(scope="module")
def bridge(tmp_path_factory):
    with start_train_bridge(tmp_path_factory.mktemp("trajectories"), replicas=2) as b:
        yield b


@pytest.fixture
def endpoints(bridge, monkeypatch):
    monkeypatch.setenv("ENVSCALER_ENDPOINTS", ",".join(bridge.endpoints))
    yield bridge.endpoints
    for pool in openrlhf_agent._pools.values():
        pool.close()


@pytest.fixture(scope="module")
def tokenizer():
    if not (KIT / "tokenizer-qwen2.5").is_dir():
        missing_kit()
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(KIT / "tokenizer-qwen2.5"))


class ReplayEngine:
    """Stands in for OpenRLHF's vLLM engine: answers each generate with the next scripted reply."""

    def __init__(self, tokenizer, replies):
        self.tokenizer, self.replies, self.prompts = tokenizer, list(replies), []

    async def generate(self, token_ids, sampling_params, multi_modal_data=None):
        self.prompts.append(list(token_ids))
        text = self.replies.pop(0)
        ids = self.tokenizer(text + "<|im_end|>", add_special_tokens=False)["input_ids"]
        return SimpleNamespace(outputs=[SimpleNamespace(token_ids=ids, text=text, finish_reason="stop", logprobs=None)])


def _stats(bridge):
    return [bridge.client(i, timeout=10).stats() for i in range(len(bridge.endpoints))]


def test_real_executor_plays_reference_to_one(bridge, endpoints, tokenizer):
    assert issubclass(AgentInstance, agent_mod.AgentInstanceBase) and issubclass(AgentExecutor, agent_mod.MultiTurnAgentExecutor)
    rows = openrlhf_rows(bridge, ["memo-*"], seeds=[3])
    assert [json.loads(r["label"]) for r in rows] == [{"scenario_id": "memo-1", "seed": 3}, {"scenario_id": "memo-2", "seed": 3}]
    assert "<tools>" in rows[0]["prompt"][0]["content"]  # prompt mode: the tools are in the system prompt
    executor = AgentExecutor()
    for row in rows:
        sid = json.loads(row["label"])["scenario_id"]
        replies = [f"<tool_call>\n{json.dumps(a)}\n</tool_call>" for a in memo_scenarios()[sid]["reference_actions"]] + ["Task Completed"]
        engine = ReplayEngine(tokenizer, replies)
        prompt = tokenizer.apply_chat_template(row["prompt"], tokenize=False, add_generation_prompt=True)
        params = SimpleNamespace(max_tokens=None, logprobs=None)
        out = asyncio.run(executor.execute(prompt, row["label"], params, 8192, tokenizer, engine))
        assert out["reward"] == 1.0 and float(out["scores"]) == 1.0
        assert len(out["action_ranges"]) == len(replies) and not engine.replies
        text = tokenizer.decode(out["observation_tokens"])
        assert text.count("<tool_response>") == len(replies) - 1 and '"success": true' in text.replace('"success":true', '"success": true')
        # the feedback left the model's next turn open, as a chat template would
        assert tokenizer.decode(engine.prompts[1]).endswith("</tool_response><|im_end|>\n<|im_start|>assistant\n")
    assert sessions(_stats(bridge)) == 0  # each instance closed its session at the end of its sample


def test_dropped_instances_close_and_failures_raise(bridge, endpoints):
    label = json.dumps({"scenario_id": "memo-1", "seed": 0})
    instances = [AgentInstance() for _ in range(4)]
    for a in instances:
        asyncio.run(a.reset({"observation": "x", "label": label}))
    assert {a.episode.replica for a in instances} == {0, 1}
    assert sessions(_stats(bridge)) == 4
    del instances, a  # OpenRLHF dropped them mid-sample (an aborted rollout)
    gc.collect()
    assert sessions(_stats(bridge)) == 0
    inst = AgentInstance()
    asyncio.run(inst.reset({"observation": "x", "label": label}))
    bridge.client(inst.episode.replica).close_session(inst.episode.session_id)
    with pytest.raises(EpisodeInfrastructureError):
        asyncio.run(inst.step({"action_text": "Task Completed", "label": label}))
    with pytest.raises(ValueError, match="scenario_id"):
        asyncio.run(AgentInstance().reset({"observation": "x", "label": "{}"}))


def test_chatml_feedback():
    tool = {"role": "tool", "tool_results": [{"content": "A"}, {"content": "B"}]}
    assert chatml_feedback(tool, "call", False) == "<|im_end|>\n<|im_start|>user\n<tool_response>\nA\n</tool_response>\n<tool_response>\nB\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
    assert chatml_feedback({"role": "user", "content": "Task finished"}, "done<|im_end|>", True) == "<|im_start|>user\nTask finished<|im_end|>\n"
