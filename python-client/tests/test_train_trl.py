"""The TRL adapter inside the real TRL: schemas through transformers' own get_json_schema, the
fenced-call template through TRL's parse_response, and one GRPOTrainer step whose rewards are
bridge episodes (trainer suite: ``pytest -m trainers``, needs the [train] extra)."""

from __future__ import annotations

import gc
import inspect
import json
import os
import sys

import pytest
from trainer_helpers import KIT, missing_kit, records, require, sessions, start_train_bridge

from envscaler.adapters.bridge_episode import EpisodeInfrastructureError
from envscaler.adapters.trl import TRLEnvironments, trl_visible_schema, use_fenced_tool_calls

from helpers import REFERENCE_ACTIONS

pytestmark = pytest.mark.trainers
transformers = require("transformers", "the trainer suite needs the [train] extra (transformers)")
require("trl", "the trainer suite needs the [train] extra (trl)")

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")


@pytest.fixture(scope="module")
def train_bridge(tmp_path_factory):
    """2 replicas serving memo-v1, notes-v1 and the bundled envs, recording every episode (the GRPO test reads them)."""
    rec = tmp_path_factory.mktemp("trajectories")
    with start_train_bridge(rec, replicas=2, bundled=True) as b:
        b.record_dir = rec
        yield b


def _sessions(envs: TRLEnvironments) -> int:
    return sessions(envs.stats())


_records = records


def test_schemas_equal_what_transformers_builds(train_bridge):
    from transformers.utils import get_json_schema

    with TRLEnvironments(train_bridge) as envs:
        assert {"memo-v1", "notes-v1", "library-v1", "bank-v1"} <= set(envs.factories)
        exact = total = 0
        for env_id, cls in envs.env_classes.items():
            instance = cls()
            bridge_tools = envs.tools(env_id)
            assert bridge_tools
            for tool in bridge_tools:
                got = get_json_schema(getattr(instance, tool["function"]["name"]))
                # what TRL renders into the prompt is exactly what trl_visible_schema says ...
                assert got == trl_visible_schema(tool), (env_id, tool["function"]["name"])
                total += 1
                same = tool
                if tool["function"]["parameters"].get("required") == []:  # the same as no list: get_json_schema leaves it out
                    same = json.loads(json.dumps(tool))
                    del same["function"]["parameters"]["required"]
                exact += got == same
                # ... and that is the bridge's schema unless the tool uses something hints cannot carry
                lossy = json.dumps(tool)
                if not any(k in lossy for k in ('"pattern"', '"minimum"', '"exclusiveMinimum"', '"minItems"', '"additionalProperties"', '"null"')):
                    params = tool["function"]["parameters"]
                    if all("description" in p for p in params.get("properties", {}).values()) and list(params.get("required", [])) == [
                        p for p in params.get("properties", {}) if p in params.get("required", [])
                    ]:
                        assert got == same, (env_id, tool["function"]["name"])
            instance._close()
        assert exact >= total // 2, (exact, total)
        memo = envs.env_classes["memo-v1"]()
        assert [get_json_schema(getattr(memo, t["function"]["name"])) for t in envs.tools("memo-v1")] == envs.tools("memo-v1")  # enum, array items
        memo._close()
        # the public tool methods are the tools, nothing else (TRL lists the class's public functions)
        cls = envs.env_classes["notes-v1"]
        public = {n for n, _ in inspect.getmembers(cls, predicate=inspect.isfunction) if not n.startswith("_")}
        assert public == {"reset", "get_reward"} | {t["function"]["name"] for t in envs.tools("notes-v1")}
        assert _sessions(envs) == 0


def test_reset_tools_reward_and_no_leaks(train_bridge):
    with TRLEnvironments(train_bridge, envs=["notes-v1"]) as envs:
        row = envs.rows(["notes-1"], seeds=[3])[0]
        assert row["environment"] == "notes-v1" and row["scenario_id"] == "notes-1" and row["seed"] == 3
        assert [m["role"] for m in row["prompt"]] == ["system", "user"] and "Add a note" in row["prompt"][1]["content"]
        env = envs.factories["notes-v1"]()
        assert env.reset(**row) is None
        for action in REFERENCE_ACTIONS:
            out = getattr(env, action["name"])(**action["arguments"])
            assert json.loads(out)["success"] is True
        # a bad call is an observation (the env's own message), not an exception
        assert "invalid_arguments" in env.add_note(user_id="u2")
        assert env.get_reward() == 1.0
        # a second rollout on the same pooled instance reuses its session
        sid = env._episode.session_id
        env.reset(**row)
        assert env._episode.session_id == sid and env.get_reward() == 0.0
        assert "episode_done" in env.list_notes(user_id="u1")  # the agent acted after the end: nothing ran
        with pytest.raises(ValueError, match="conversation"):
            env.reset(scenario_id="notes-2", seed=0)
        with pytest.raises(ValueError, match="not one of"):
            env.reset(scenario_id="library-1", seed=0)
        # instances on both replicas; dropped without close(): their sessions close when collected
        others = [envs.factories["notes-v1"]() for _ in range(3)]
        for o in others:
            o.reset(**row)
        assert {o._episode.replica for o in [env, *others]} == {0, 1}
        assert _sessions(envs) == 4
        del env, others, o
        gc.collect()
        assert _sessions(envs) == 0


def test_infrastructure_failure_raises_not_zero(train_bridge):
    with TRLEnvironments(train_bridge, envs=["notes-v1"]) as envs:
        env = envs.factories["notes-v1"]()
        env.reset(scenario_id="notes-1", seed=0)
        # the bridge closes the session under the env (as its idle reaper would)
        envs.pool.client(env._episode.replica).close_session(env._episode.session_id)
        with pytest.raises(EpisodeInfrastructureError) as e:
            env.add_note(user_id="u2", title="t", body="b")  # TRL would turn this into an error observation ...
        assert e.value.code == "session_closed"
        with pytest.raises(EpisodeInfrastructureError):  # ... and get_reward makes the step fail, not score 0
            env.get_reward()
        # opt-in: leave such rollouts unscored (None: TRL keeps them out of the group's baseline)
    with TRLEnvironments(train_bridge, envs=["notes-v1"], on_infra_error="skip") as envs:
        env = envs.factories["notes-v1"]()
        env.reset(scenario_id="notes-1", seed=0)
        envs.pool.client(env._episode.replica).close_session(env._episode.session_id)
        assert env.get_reward() is None
        # the next reset opens a new session
        env.reset(scenario_id="notes-1", seed=0)
        assert env.get_reward() == 0.0


def test_fenced_template_parses_calls_for_the_generated_tools(train_bridge):
    from transformers import AutoTokenizer
    from trl.chat_template_utils import parse_response

    tok_dir = KIT / "tokenizer-qwen2.5"
    if not tok_dir.is_dir():
        missing_kit()
    tok = use_fenced_tool_calls(AutoTokenizer.from_pretrained(str(tok_dir)))
    with TRLEnvironments(train_bridge, envs=["notes-v1"]) as envs:
        env = envs.factories["notes-v1"]()
        env.reset(scenario_id="notes-1", seed=0)
        tools = [env.add_note, env.delete_note, env.list_notes]
        prompt = tok.apply_chat_template([{"role": "user", "content": "go"}], tools=tools, add_generation_prompt=True, tokenize=True, return_dict=True)["input_ids"]
        text = "".join(f"```json\n{json.dumps(a)}\n```\n" for a in REFERENCE_ACTIONS) + "<|im_end|>"
        parsed = parse_response(tok, tok(text, add_special_tokens=False)["input_ids"], prefix=list(prompt), tools=tools)
        calls = [c["function"] for c in parsed["tool_calls"]]
        assert [c["name"] for c in calls] == ["add_note", "delete_note"]
        for c in calls:  # what TRL's tool loop does with them
            assert json.loads(getattr(env, c["name"])(**c["arguments"]))["success"] is True
        assert env.get_reward() == 1.0


@pytest.fixture(scope="module")
def tiny_qwen(tmp_path_factory):
    if not (KIT / "tiny_model.py").exists():
        missing_kit()
    require("torch", "the trainer suite needs the [train] extra (torch)")
    sys.path.insert(0, str(KIT))
    from tiny_model import tiny_qwen2

    return tiny_qwen2(tmp_path_factory.mktemp("tiny") / "qwen2")


@pytest.mark.timeout(900)  # ~1.5 min on 2 idle cores; the machine may be shared
def test_grpo_trainer_one_step_rewards_from_bridge(train_bridge, tiny_qwen, tmp_path):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    torch.manual_seed(0)
    tok = use_fenced_tool_calls(AutoTokenizer.from_pretrained(str(tiny_qwen)))
    tok.padding_side = "left"
    model = AutoModelForCausalLM.from_pretrained(str(tiny_qwen), dtype=torch.float32)
    # two envs (one class each, picked by the rows' environment column); memo-1 and memo-2 score 0.5
    # and 1/3 untouched, notes-1 0: the tiny model writes no tool call, so these are the rewards
    envs = TRLEnvironments(train_bridge, envs=["memo-v1", "notes-v1"])
    dataset = envs.dataset(["memo-*"], seeds=[11]).add_item(envs.rows(["notes-1"], seeds=[11])[0])
    assert dataset["environment"] == ["memo-v1", "memo-v1", "notes-v1"] and dataset["seed"] == [11, 11, 11]
    dataset = dataset.select([0, 1])  # one step of 2 prompts x 2 generations; notes-1's row only checks the routing above
    before = {r["episode_id"] for r in _records(train_bridge.record_dir) if r.get("t") == "episode_start"}
    config = GRPOConfig(
        output_dir=str(tmp_path / "out"),
        use_cpu=True,
        bf16=False,
        per_device_train_batch_size=4,
        num_generations=2,
        max_completion_length=8,
        max_steps=1,
        max_tool_calling_iterations=2,
        learning_rate=1e-5,
        report_to="none",
        save_strategy="no",
        logging_steps=1,
        seed=0,
    )
    trainer = GRPOTrainer(model=model, args=config, train_dataset=dataset, processing_class=tok, environment_factory=envs.factories)
    trainer.train()
    logs = [h for h in trainer.state.log_history if "reward" in h]
    assert logs, trainer.state.log_history
    # the bridge played 4 episodes (2 scenarios x 2 generations) and finished each: their rewards are the trainer's
    recs = _records(train_bridge.record_dir)
    starts = {r["episode_id"]: r for r in recs if r.get("t") == "episode_start" and r["episode_id"] not in before and r["seed"] == 11}
    ends = [r for r in recs if r.get("t") == "episode_end" and r["episode_id"] in starts and r["how"] == "finish"]
    assert len(starts) == 4 and sorted(s["scenario_id"] for s in starts.values()) == ["memo-1", "memo-1", "memo-2", "memo-2"]
    assert len(ends) == 4
    rewards = sorted(e["result"]["reward"] for e in ends)
    assert rewards == pytest.approx([1 / 3, 1 / 3, 0.5, 0.5], abs=1e-3)
    assert logs[0]["reward"] == pytest.approx(sum(rewards) / 4, abs=1e-3)
    assert logs[0]["rewards/EnvScaler_memo_v1/mean"] == pytest.approx(sum(rewards) / 4, abs=1e-3)
    # the trainer dropped: every session its env instances opened is closed
    assert _sessions(envs) == 4
    del trainer
    envs.close()
    with TRLEnvironments(train_bridge, envs=["notes-v1"]) as probe:
        assert _sessions(probe) == 0
