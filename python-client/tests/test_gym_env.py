"""EnvScalerEnv as a gymnasium.Env: check_env, seeding, session reuse, state and close."""

from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from envscaler import AgentAction, AnyText, EnvScalerEnv
from envscaler.protocol import EpisodeDone, SessionClosed

from helpers import FINAL_REPLY, NOTES_1_TASK, REFERENCE_ACTIONS


@pytest.fixture
def env(bridge):
    e = EnvScalerEnv(bridge.endpoints[0], timeout=30)
    yield e
    e.close()


def test_check_env_passes(env):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env)  # raises on any API violation, incl. non-deterministic seeded reset/step
    # the only expected complaint is the absence of a registered spec for render-mode checks
    serious = [w for w in caught if "render" not in str(w.message) and "spec" not in str(w.message)]
    assert not serious, [str(w.message) for w in serious]
    assert env.scenario_ids == ["notes-1", "notes-2", "hostile-1", "faults-1"]


def test_check_env_on_a_single_task_scenario(bridge):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        e = EnvScalerEnv(bridge.endpoints[1], scenario_ids=["notes-1"])
        check_env(e)
        e.close()


def test_spaces_hold_any_text():
    obs, act = AnyText(), AgentAction()
    for s in ("", "ünïcödé ✓ 中文", '{"json": [1, 2]}', "<tool_call>{}</tool_call>\n"):
        assert s in obs and s in act
    assert 3 not in obs and None not in act
    assert {"name": "add_note", "arguments": {}} in act
    assert [{"name": "a"}, {"function": {"name": "b"}}] in act
    assert {"role": "assistant", "content": "hi"} in act
    assert {"x": 1} not in act and [] not in act
    act.seed(4)
    samples = [act.sample() for _ in range(50)]
    assert all(isinstance(s, str) and 1 <= len(s) <= 64 for s in samples)
    assert len(set(samples)) > 40
    act.seed(4)
    assert [act.sample() for _ in range(50)] == samples
    # gymnasium's Text space could not hold what envs return
    assert "ünïcödé ✓" not in gym.spaces.Text(64)


def test_reset_is_deterministic_under_a_seed(env):
    a = [env.reset(seed=123)] + [env.reset() for _ in range(5)]
    b = [env.reset(seed=123)] + [env.reset() for _ in range(5)]
    assert [(o, i["scenario_id"], i["seed"]) for o, i in a] == [(o, i["scenario_id"], i["seed"]) for o, i in b]
    assert a[0][1]["seed"] == 123  # an explicit seed is the bridge's episode seed
    assert len({i["scenario_id"] for _, i in a + b}) > 1 or len(env.scenario_ids) == 1
    c = [env.reset(seed=124)] + [env.reset() for _ in range(5)]
    assert [i["seed"] for _, i in c] != [i["seed"] for _, i in a]


def test_reference_episode_and_session_reuse(env):
    obs, info = env.reset(options={"scenario_id": "notes-1"})
    assert obs == NOTES_1_TASK and info["observation"] == {"role": "user", "content": NOTES_1_TASK}
    assert info["scenario_id"] == "notes-1" and info["episode_id"] == env.episode_id
    session, first_episode = env.session_id, env.episode_id
    assert env.state()["notes"]["n1"]["title"] == "groceries"
    for action in REFERENCE_ACTIONS:
        obs, reward, terminated, truncated, info = env.step(action)
        assert isinstance(obs, str) and '"success":true' in obs
        assert reward == 0.0 and isinstance(reward, float) and not terminated and not truncated
        assert info["observation"]["role"] == "tool" and info["observation"]["content"] == obs
    assert "n1" not in env.state()["notes"]
    obs, reward, terminated, truncated, info = env.step(FINAL_REPLY)
    assert (reward, terminated, truncated) == (1.0, True, False) and type(reward) is float
    assert info["end_reason"] == "text_reply" and info["reward_info"]["passed"] == 3
    assert "episode_id" not in info  # see EnvScalerEnv's docstring
    with pytest.raises(EpisodeDone):
        env.step(FINAL_REPLY)
    # the next episode runs in the same bridge session
    _obs2, info2 = env.reset(scenario_id="notes-2")
    assert env.session_id == session and info2["mode"] == "conversation"
    assert info2["episode_id"] == env.episode_id != first_episode and env.scenario_id == "notes-2"


def test_finish_scores_the_episode_now(env):
    env.reset(scenario_id="notes-1")
    env.step(REFERENCE_ACTIONS[0])
    _obs, reward, terminated, _truncated, info = env.finish()
    assert terminated and info["end_reason"] == "client"
    assert 0.0 < reward < 1.0  # one of three checks passes
    assert info["reward_info"]["passed"] == 1


def test_close_is_idempotent_and_closes_the_session(bridge):
    env = EnvScalerEnv(bridge.endpoints[0])
    env.reset(scenario_id="notes-1")
    session = env.session_id
    env.close()
    env.close()
    with bridge.client(0) as c, pytest.raises(SessionClosed):
        c.step(session, "hi")
    with pytest.raises(gym.error.ClosedEnvironmentError):
        env.reset()
    assert env.client.closed  # the env made its client, so it closed it


def test_env_on_a_shared_client_leaves_it_open(bridge):
    with bridge.client(1) as c:
        envs = [EnvScalerEnv(client=c, scenario_ids=["notes-1"]) for _ in range(3)]
        for i, e in enumerate(envs):
            e.reset(seed=i)
        assert len({e.session_id for e in envs}) == 3
        for e in envs:
            e.close()
        assert not c.closed and c.hello()["replica"] == 1


def test_numpy_string_actions_are_accepted(env):
    env.reset(scenario_id="notes-1")
    obs, _reward, terminated, *_ = env.step(np.array(FINAL_REPLY, dtype=object))
    assert terminated and obs == "Task finished"
