"""The ROLL and GEM adapters: their API shapes and a reference episode each."""

from __future__ import annotations

import json
import random

import pytest

from envscaler.adapters import gem as gem_adapter
from envscaler.adapters.gem import EnvScalerGemEnv
from envscaler.adapters.roll import EnvScalerRollEnv, format_env_introduction

from helpers import FINAL_REPLY, NOTES_1_TASK, REFERENCE_ACTIONS

EXPECTED_INTRO = "# Environment Information\n\n## Brief Introduction:  \nA tiny note-taking app used by the test suite.\n\n## Environment Rules / Constraints:  \n- Titles are unique per user.\n"


def _as_qwen_text(action: dict) -> str:
    return f"<think>next step</think>\n<tool_call>\n{json.dumps(action)}\n</tool_call>"


@pytest.fixture
def roll(bridge):
    env = EnvScalerRollEnv(bridge.endpoints[0], scenario_ids=["notes-1", "notes-2", "hostile-1"])
    yield env
    env.close()


def test_format_env_introduction():
    assert format_env_introduction("Intro.", ["a", "b"]) == ("# Environment Information\n\n## Brief Introduction:  \nIntro.\n\n## Environment Rules / Constraints:  \n- a\n- b\n")
    assert format_env_introduction("X", []).endswith("## Environment Rules / Constraints:  \n")


def test_roll_reset_shapes(roll):
    obs, info = roll.reset(task_index=0)
    assert obs == {"type": "user", "content": NOTES_1_TASK}
    assert info["env_introduction"] == EXPECTED_INTRO
    assert info["env_name"] == "Notes (test fixture)"
    assert {t["function"]["name"] for t in info["tools"]} >= {"add_note", "delete_note"}
    assert info["task"]["scenario_id"] == info["task"]["task_id"] == "notes-1"
    assert info["task"]["task"] == NOTES_1_TASK and info["task"]["env_id"] == "notes-v1"
    obs, info = roll.reset(task_index=2)
    assert obs["content"] == "Set the flag." and info["env_name"] == "Hostile env (test fixture)"
    assert info["env_introduction"].endswith("## Environment Rules / Constraints:  \n")  # no rules


def test_roll_task_index_and_seed(roll):
    for bad in (3, -1, 100):
        with pytest.raises(ValueError):
            roll.reset(task_index=bad)
    for seed in range(6):
        _, info = roll.reset(seed=seed)
        expected = ["notes-1", "notes-2", "hostile-1"][random.Random(seed).randrange(3)]
        assert info["task"]["scenario_id"] == expected
        assert info["bridge_info"]["seed"] == seed


def test_roll_reference_episode(roll):
    obs, _ = roll.reset(task_index=0)
    session = roll.session_id
    obs, reward, terminated, truncated, info = roll.step(REFERENCE_ACTIONS[0])  # a parsed dict action
    assert obs["type"] == "tool" and json.loads(obs["content"])["success"] is True
    assert (reward, terminated, truncated) == (0.0, False, False) and info["action"] == REFERENCE_ACTIONS[0]
    obs, reward, terminated, truncated, info = roll.step(_as_qwen_text(REFERENCE_ACTIONS[1]))  # raw model text
    assert obs["type"] == "tool" and not terminated
    # the original envs' way of talking to the user
    obs, reward, terminated, truncated, info = roll.step({"name": "chat_with_user", "arguments": {"content": FINAL_REPLY}})
    assert obs == {"type": "user", "content": "Task finished"}
    assert reward == 1.0 and isinstance(reward, float) and terminated and not truncated
    assert info["end_reason"] == "text_reply"
    # the next reset reuses the session
    roll.reset(task_index=1)
    assert roll.session_id == session


def test_roll_rejects_unknown_scenarios(bridge):
    with pytest.raises(ValueError):
        EnvScalerRollEnv(bridge.endpoints[0], scenario_ids=["notes-1", "no-such-scenario"])


def test_gem_base_class():
    try:
        from gem.core import Env as GemEnv  # type: ignore[import-not-found]
    except Exception:
        assert gem_adapter.GEM_AVAILABLE is False and EnvScalerGemEnv.__mro__[1] is object
    else:
        assert gem_adapter.GEM_AVAILABLE is True and issubclass(EnvScalerGemEnv, GemEnv)


def test_gem_reference_episode(bridge):
    env = EnvScalerGemEnv(bridge.endpoints[1], scenario_ids=["notes-1"])
    try:
        obs, info = env.reset(seed=5)
        assert obs == NOTES_1_TASK and isinstance(info, dict)
        assert info["env_introduction"] == EXPECTED_INTRO and info["seed"] == 5 and info["tools"]
        for action in REFERENCE_ACTIONS:
            obs, reward, terminated, truncated, info = env.step(_as_qwen_text(action))
            assert isinstance(obs, str) and json.loads(obs)["success"] is True
            assert (reward, terminated, truncated) == (0.0, False, False)
        obs, reward, terminated, truncated, info = env.step(FINAL_REPLY)
        assert obs == "Task finished" and reward == 1.0 and terminated and not truncated
        assert isinstance(env.sample_random_action(), str)
        # GEM-style seeding: same seed, same episode
        env2 = EnvScalerGemEnv(client=env.client, scenario_ids=["notes-1", "notes-2", "hostile-1"])
        picks = [env2.reset(seed=s)[1]["scenario_id"] for s in (1, 2, 3)]
        assert picks == [env2.reset(seed=s)[1]["scenario_id"] for s in (1, 2, 3)]
        env2.close()
        # a random action is legal: it ends a task episode as a text reply
        env.reset(seed=6)
        assert env.step(env.sample_random_action())[2] is True
    finally:
        env.close()


def test_register_roll_through_gem_make(bridge):
    gem = pytest.importorskip("gem", reason="the ROLL registration test needs gem-llm (python-client[test])")
    from envscaler.adapters.roll import ROLL_ENV_IDS, register_roll

    assert register_roll(bridge.endpoints[0]) == list(ROLL_ENV_IDS)
    # what EnvScaler's env manager does: gem.make(env_id, **its yaml's env config), then reset/step
    env = gem.make("envscaler_non_conv_env", data_path="ignored/by/the/bridge.json")
    try:
        assert isinstance(env, EnvScalerRollEnv) and env.env_id == "envscaler_non_conv_env"
        modes = {s["scenario_id"]: s.get("mode", "task") for s in env.client.list_scenarios()}
        assert env.task_items and all(modes[t["scenario_id"]] == "task" for t in env.task_items)
        index = [t["scenario_id"] for t in env.task_items].index("notes-1")
        obs, info = env.reset(seed=1, task_index=index)
        assert obs == {"type": "user", "content": NOTES_1_TASK} and info["env_introduction"] == EXPECTED_INTRO
        for action in REFERENCE_ACTIONS:
            assert env.step(action)[0]["type"] == "tool"
        assert env.step({"name": "chat_with_user", "arguments": {"content": FINAL_REPLY}})[1:3] == (1.0, True)
    finally:
        env.close()
    conv = gem.make("envscaler_conv_env")
    try:
        assert [t["scenario_id"] for t in conv.task_items] == ["notes-2"]
    finally:
        conv.close()
    with pytest.raises(ValueError, match="endpoint"):
        gem.make("envscaler_conv_env", endpoint=None)


def test_importing_envscaler_imports_no_trainer():
    """Each trainer is an optional extra: `import envscaler` (and the TRL adapters, which need TRL only
    when a trainer runs them, and the token-episode core) must not import one, nor torch."""
    import subprocess
    import sys

    code = (
        "import sys, envscaler, envscaler.adapters, envscaler.adapters.trl, envscaler.adapters.bridge_episode\n"
        "import envscaler.adapters.trl_rollout, envscaler.adapters.token_episode\n"
        "heavy = ('trl', 'torch', 'transformers', 'datasets', 'skyrl_gym', 'openrlhf', 'verifiers', 'verl', 'gem')\n"
        "print(','.join(m for m in heavy if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == ""


def test_every_adapter_selects_scenarios_one_way():
    """match_scenarios: env ids and globs over scenario ids, in pattern order, each once; a pattern
    matching nothing names itself (every adapter's dataset builder goes through it)."""
    from envscaler.adapters.bridge_episode import match_scenarios

    listed = [{"scenario_id": "a-1", "env_id": "a-v1"}, {"scenario_id": "a-2", "env_id": "a-v1"}, {"scenario_id": "b-1", "env_id": "b-v1"}]
    assert [s["scenario_id"] for s in match_scenarios(listed)] == ["a-1", "a-2", "b-1"]
    assert [s["scenario_id"] for s in match_scenarios(listed, ["b-v1", "a-*", "b-1"])] == ["b-1", "a-1", "a-2"]
    with pytest.raises(ValueError, match="'zz' matches no task scenario"):
        match_scenarios(listed, ["zz"], what="task scenario")
