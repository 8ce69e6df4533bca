"""Per-sub-env outcomes (issue 28 items 1, 4, 9): one bad sub-env never raises for the others, a
failed reset is that sub-env's outcome, misuse of the vector env itself raises before anything is
sent, ``finish(mask)``, ``mode=``, seeds in the bridge's range, ``step(None)``."""

from __future__ import annotations

import json

import gymnasium
import numpy as np
import pytest

from envscaler import EnvScalerEnv, EnvScalerVectorEnv
from envscaler.episode_logic import MAX_SEED

from helpers import NOTES_ENVS, REFERENCE_ACTIONS, SMALL_FRAME_LIMIT, start_bridge

ADD = REFERENCE_ACTIONS[0]
N = 8


@pytest.fixture
def vec(bridge):
    v = EnvScalerVectorEnv(bridge.endpoints, num_envs=N, scenario_ids=["notes-1"], timeout=30)
    yield v
    v.close()


def _error_code(infos, i):
    err = infos.get("error", {})
    return str(err["code"][i]) if "_code" in err and err["_code"][i] else None


def _sent(vec) -> int:
    return sum(vec.requests_sent.values())


def test_one_oversize_action_among_8_on_2_replicas_is_that_sub_envs_outcome(bridge, vec):
    """The issue's case: one action over the frame limit among 8 sub-envs on 2 replicas."""
    assert sorted(set(vec.replica_of)) == [0, 1]
    vec.reset(seed=3)
    before = [vec.state(i) for i in range(N)]
    bad = 3
    actions = [ADD] * N
    actions[bad] = "x" * (SMALL_FRAME_LIMIT + 10)  # over the bridge's max_frame_bytes: never sent
    sent = dict(vec.requests_sent)
    obs, rewards, terminated, truncated, infos = vec.step(actions)
    # the other replicas' batches went out, one step_batch per replica, and nothing raised
    assert vec.requests_sent["step_batch"] - sent.get("step_batch", 0) == 2
    for i in range(N):
        if i == bad:
            continue
        assert json.loads(obs[i])["success"] is True, obs[i]
        assert infos["observation"]["role"][i] == "tool" and infos["step"][i] == 1
        assert not terminated[i] and not truncated[i] and rewards[i] == 0
        assert _error_code(infos, i) is None
    # the bad one: an error observation the agent can read; its episode goes on unchanged
    assert json.loads(obs[bad])["error"]["type"] == "too_large"
    assert "max_frame_bytes" in json.loads(obs[bad])["error"]["message"]
    assert _error_code(infos, bad) == "too_large"
    assert not terminated[bad] and not truncated[bad] and rewards[bad] == 0
    # the bridge's state for all 8: the 7 added their note, the bad one is as it was
    after = [vec.state(i) for i in range(N)]
    for i in range(N):
        if i == bad:
            assert after[i] == before[i]
        else:
            assert after[i] != before[i] and "todo" in json.dumps(after[i])
    # and the bad sub-env plays on from where it was: its next step is its first
    obs, _, terminated, _, infos = vec.step([ADD] * N)
    assert infos["step"][bad] == 1 and json.loads(obs[bad])["success"] is True


def test_none_unencodable_and_refused_actions_are_per_sub_env():
    with start_bridge(envs=[NOTES_ENVS], replicas=2, extra=("--max-action-bytes", "2000")) as b:
        vec = EnvScalerVectorEnv(b.endpoints, num_envs=N, scenario_ids=["notes-1"], timeout=30)
        try:
            _none_unencodable_and_refused(vec)
        finally:
            vec.close()


def _none_unencodable_and_refused(vec):
    vec.reset(seed=4)
    actions: list = [ADD] * N
    actions[1] = None  # an unreadable action like any other: the bridge's invalid_action observation
    actions[2] = object()  # cannot be encoded at all: refused before sending
    actions[4] = "y" * 5000  # fits a frame, but the bridge refuses it (max_action_bytes) in its batch entry
    actions[7] = {"name": "add_note", "arguments": {1: "x"}}  # encodable by msgpack, forbidden by the protocol (a non-string key)
    obs, _, terminated, truncated, infos = vec.step(actions)
    assert json.loads(obs[1])["error"]["type"] == "invalid_action" and infos["step"][1] == 1
    assert _error_code(infos, 2) == "bad_request" and json.loads(obs[2])["error"]["type"] == "bad_request"
    assert _error_code(infos, 4) == "too_large" and "max-action-bytes" in json.loads(obs[4])["error"]["message"]
    assert _error_code(infos, 7) == "bad_request" and "not a string" in json.loads(obs[7])["error"]["message"]
    for i in (0, 3, 5, 6):
        assert json.loads(obs[i])["success"] is True
    assert not terminated.any() and not truncated.any()


def test_batches_over_the_frame_limit_are_split_and_all_run(bridge, vec):
    vec.reset(seed=5)
    big = "Done. " + "z" * (SMALL_FRAME_LIMIT // 2)  # two of these on one replica do not fit one frame
    actions = [ADD] * N
    actions[0] = actions[2] = big  # sub-envs 0 and 2 are on replica 0
    sent = vec.requests_sent.get("step_batch", 0)
    _obs, _rewards, terminated, _, infos = vec.step(actions)
    assert vec.requests_sent["step_batch"] - sent == 3  # replica 0's batch went out in two frames
    assert terminated[0] and terminated[2]  # both ran: a text reply ends a task
    assert _error_code(infos, 0) is None and _error_code(infos, 2) is None


def test_a_failed_reset_is_that_sub_envs_outcome_and_it_is_reset_next_step(bridge, vec):
    vec.reset(seed=6)
    vec.step([ADD] * N)
    ids = ["notes-1"] * N
    ids[2] = "no-such-scenario"
    obs, infos = vec.reset(options={"scenario_ids": ids})
    assert _error_code(infos, 2) == "unknown_scenario" and json.loads(obs[2])["error"]["type"] == "unknown_scenario"
    for i in set(range(N)) - {2}:
        assert obs[i].startswith("Bob") or "note" in obs[i].lower()
        assert _error_code(infos, i) is None and infos["previous_episode"]["finished"][i]
    # it keeps nothing of its old episode
    with pytest.raises(gymnasium.error.ResetNeeded):
        vec.state(2)
    assert vec.episodes[2].episode_id is None
    # the next step resets it (its action ignored) and steps the others
    obs, _, _, _, infos = vec.step([ADD] * N)
    assert infos["scenario_id"][2] == "notes-1" and infos["_introduction"][2] and infos["_introduction"].sum() == 1
    assert vec.state(2)["notes"] is not None
    assert all(infos["step"][i] == 1 for i in set(range(N)) - {2})


def test_misuse_of_the_vector_env_raises_before_anything_is_sent(bridge, vec):
    with pytest.raises(gymnasium.error.ResetNeeded):
        vec.step([ADD] * N)
    vec.reset(seed=7)
    sent = _sent(vec)
    with pytest.raises(ValueError, match="need 8 actions"):
        vec.step([ADD] * (N - 1))
    with pytest.raises(ValueError, match="2\\*\\*32"):
        vec.reset(seed=[1] * (N - 1) + [MAX_SEED])
    with pytest.raises(ValueError, match="mask needs 8"):
        vec.finish([True])
    assert _sent(vec) == sent
    vec.close()
    with pytest.raises(gymnasium.error.ClosedEnvironmentError):
        vec.step([ADD] * N)


def test_finish_mask_scores_those_episodes_and_they_are_autoreset(bridge, vec):
    vec.reset(seed=8)
    vec.step([ADD] * N)
    mask = np.zeros(N, dtype=bool)
    mask[[0, 5]] = True
    _, rewards, terminated, _, infos = vec.finish(mask)
    assert list(infos["_end_reason"]) == list(mask)
    assert infos["end_reason"][0] == "client" and infos["reward_info"]["total"][5] == 3
    assert terminated[0] and terminated[5] and not terminated[[1, 2, 3, 4, 6, 7]].any()
    assert 0 < rewards[0] < 1  # one of notes-1's checks passed
    _, _, _, _, infos = vec.step([ADD] * N)
    # the finished ones start anew (reset info), the others take their second step
    assert list(infos["_introduction"]) == list(mask)
    assert infos["step"][1] == 2


def test_mode_selects_scenarios_in_every_env_class(bridge):
    import asyncio

    from envscaler import AsyncEnvScalerEnv
    from envscaler.adapters.gem import EnvScalerGemEnv
    from envscaler.adapters.roll import EnvScalerRollEnv

    with bridge.client(0, timeout=30) as c:
        listed = {s["scenario_id"]: s["mode"] for s in c.list_scenarios()}
        conv = sorted(s for s, m in listed.items() if m == "conversation")
        task = sorted(s for s, m in listed.items() if m == "task")
        assert conv == ["notes-2"] and "notes-1" in task
        assert sorted(EnvScalerEnv(client=c, mode="conversation").scenario_ids) == conv
        assert sorted(EnvScalerEnv(client=c, mode="task").scenario_ids) == task
        assert EnvScalerEnv(client=c, scenario_ids=["notes-1", "notes-2"], mode="task").scenario_ids == ["notes-1"]
        assert sorted(EnvScalerGemEnv(client=c, mode="conversation").scenario_ids) == conv
        assert [t["scenario_id"] for t in EnvScalerRollEnv(client=c, mode="conversation").task_items] == conv
        with pytest.raises(ValueError, match="mode must be one of"):
            EnvScalerEnv(client=c, mode="chat")
    v = EnvScalerVectorEnv(bridge.endpoints, num_envs=2, mode="conversation", timeout=30)
    try:
        assert v.scenario_ids == conv
        _obs, infos = v.reset(seed=1)
        assert list(infos["scenario_id"]) == ["notes-2", "notes-2"] and list(infos["mode"]) == ["conversation"] * 2
    finally:
        v.close()

    async def main() -> list[str]:
        env = AsyncEnvScalerEnv(bridge.endpoints[0], mode="task")
        try:
            return sorted(await env.scenario_ids())
        finally:
            await env.close()

    assert asyncio.run(main()) == task


def test_a_conversation_with_no_simulated_user_ends_at_the_first_reply(bridge):
    """The shared bridge runs without --user-model: a conversation cannot run on to its step cap."""
    with bridge.client(0, timeout=30) as c:
        env = EnvScalerEnv(client=c, mode="conversation")
        env.reset(seed=2)
        obs, _, terminated, _, info = env.step(REFERENCE_ACTIONS[0] | {"arguments": {"user_id": "u3"}, "name": "list_notes"})
        assert not terminated
        obs, _reward, terminated, truncated, info = env.step("You have one note.")
        assert terminated and not truncated and info["end_reason"] == "no_user"
        assert "--user-model" in obs and info["reward_info"]["total"] >= 1
        env.close()
    v = EnvScalerVectorEnv(bridge.endpoints, num_envs=2, mode="conversation", timeout=30)
    try:
        v.reset(seed=3)
        _, _, terminated, _, infos = v.step(["Hello, how can I help?"] * 2)
        assert terminated.all() and list(infos["end_reason"]) == ["no_user", "no_user"]
    finally:
        v.close()


def test_seeds_outside_the_bridge_range_are_an_error_that_says_the_range(bridge):
    with bridge.client(0, timeout=30) as c:
        env = EnvScalerEnv(client=c, scenario_ids=["notes-1"])
        for bad in (2**70, -1, MAX_SEED):
            with pytest.raises(ValueError, match=r"0 <= seed < 2\*\*32"):
                env.reset(seed=bad)
        with pytest.raises(ValueError, match=r"options\['seed'\]"):
            env.reset(options={"seed": 2**40})
        _, info = env.reset(seed=MAX_SEED - 1)
        assert info["seed"] == MAX_SEED - 1
        env.close()


def test_step_none_is_an_observation_like_any_other_bad_action(bridge):
    with bridge.client(0, timeout=30) as c:
        env = EnvScalerEnv(client=c, scenario_ids=["notes-1"])
        env.reset(seed=1)
        for bad in (None, 42, {}):
            obs, _reward, terminated, truncated, info = env.step(bad)
            assert json.loads(obs)["error"]["type"] == "invalid_action" and not terminated and not truncated
        assert info["step"] == 3
        env.close()
