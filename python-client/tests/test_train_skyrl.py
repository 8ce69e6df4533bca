"""The SkyRL adapter through skyrl-gym's own registry: ``make`` + ``init``/``step`` playing memo's
reference solutions to reward 1.0 (trainer suite: ``pytest -m trainers``, needs the [train] extra)."""

from __future__ import annotations

import gc
import json

import pytest
from trainer_helpers import memo_scenarios, require, sessions, start_train_bridge

from envscaler.adapters.bridge_episode import EpisodeInfrastructureError

pytestmark = pytest.mark.trainers
skyrl_gym = require("skyrl_gym", "the trainer suite needs the [train] extra (skyrl-gym)")

from envscaler.adapters.skyrl import EnvScalerTextEnv, register, skyrl_rows  # noqa: E402


@pytest.fixture(scope="module")
def bridge(tmp_path_factory):
    with start_train_bridge(tmp_path_factory.mktemp("trajectories"), replicas=2) as b:
        yield b


def _stats(bridge):
    return [bridge.client(i, timeout=10).stats() for i in range(len(bridge.endpoints))]


def _as_text(action: dict) -> str:
    return f"<tool_call>\n{json.dumps(action)}\n</tool_call>"


def test_make_init_step_plays_reference_to_one(bridge):
    from skyrl_gym.envs.base_text_env import BaseTextEnv

    register()
    register()  # idempotent
    rows = skyrl_rows(bridge, ["memo-*"], seeds=[5])
    assert [r["extra_info"]["scenario_id"] for r in rows] == ["memo-1", "memo-2"] and all(r["env_class"] == "envscaler" for r in rows)
    for row in rows:
        env = skyrl_gym.make("envscaler", env_config={"endpoints": bridge.endpoints}, extras=row)
        assert isinstance(env, BaseTextEnv) and isinstance(env, EnvScalerTextEnv)
        messages, meta = env.init(row["prompt"])
        assert messages == row["prompt"] and [m["role"] for m in messages] == ["system", "user"]
        assert {t["function"]["name"] for t in meta["tools"]} == {"list_memos", "add_memo", "delete_memo"}
        for action in memo_scenarios()[row["extra_info"]["scenario_id"]]["reference_actions"]:
            out = env.step(_as_text(action))
            assert out["done"] is False and out["reward"] == 0.0
            assert out["observations"][0]["role"] == "tool" and json.loads(out["observations"][0]["content"])["success"] is True
        out = env.step("Task Completed")
        assert out["done"] is True and out["reward"] == 1.0 and out["metadata"]["end_reason"] == "text_reply"
        assert env.get_metrics()["success"] == 1.0
        env.close()
    assert sessions(_stats(bridge)) == 0


def test_agent_mistakes_are_observations_and_sessions_do_not_leak(bridge):
    row = skyrl_rows(bridge, ["memo-1"], seeds=[0])[0]
    envs = [EnvScalerTextEnv({"endpoints": bridge.endpoints}, row) for _ in range(4)]
    for e in envs:
        e.init()
    assert {e._episode.replica for e in envs} == {0, 1}  # spread over both replicas
    out = envs[0].step('<tool_call>\n{"name": "add_memo", "arguments": {"user_id": "u2"}}\n</tool_call>')
    assert out["done"] is False and "invalid_arguments" in out["observations"][0]["content"]
    out = envs[0].step("<tool_call>{not json</tool_call>")
    assert out["done"] is False and out["observations"][0]["role"] == "user" and "invalid_action" in out["observations"][0]["content"]
    assert sessions(_stats(bridge)) == 4
    envs[0].close()
    del envs, e  # SkyRL dropping envs without close(): their sessions close when collected
    gc.collect()
    assert sessions(_stats(bridge)) == 0


def test_infrastructure_failure_raises(bridge):
    row = skyrl_rows(bridge, ["memo-1"], seeds=[0])[0]
    env = EnvScalerTextEnv({"endpoints": bridge.endpoints}, row)
    env.init()
    bridge.client(env._episode.replica).close_session(env._episode.session_id)
    with pytest.raises(EpisodeInfrastructureError) as e:
        env.step(_as_text({"name": "list_memos", "arguments": {"user_id": "u1"}}))
    assert e.value.code == "session_closed"
    env.close()
    with pytest.raises(ValueError, match="endpoints"):
        EnvScalerTextEnv({}, row)
