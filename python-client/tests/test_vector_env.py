"""EnvScalerVectorEnv over 2 replicas with 4 sub-envs."""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium.vector import AutoresetMode, VectorEnv

from envscaler import EnvScalerVectorEnv, TextBatch

from helpers import FINAL_REPLY, NOTES_1_TASK, REFERENCE_ACTIONS

ADD, DELETE = REFERENCE_ACTIONS


@pytest.fixture
def vec(bridge):
    v = EnvScalerVectorEnv(bridge.endpoints, num_envs=4, scenario_ids=["notes-1"], timeout=30)
    yield v
    v.close()


def _requests(bridge) -> list[int]:
    """Each replica's request counter (the stats request itself counts one)."""
    out = []
    for i in range(len(bridge.endpoints)):
        with bridge.client(i) as c:
            out.append(c.stats()["requests"])
    return out


def test_api_shape(vec):
    assert isinstance(vec, VectorEnv)
    assert vec.num_envs == 4 and vec.metadata["autoreset_mode"] == AutoresetMode.NEXT_STEP
    assert isinstance(vec.observation_space, TextBatch) and vec.observation_space.n == 4
    assert "x" in vec.single_observation_space and isinstance(vec.single_action_space.sample(), str)
    vec.action_space.seed(0)
    sample = vec.action_space.sample()
    assert sample.shape == (4,) and sample.dtype == object and sample in vec.action_space
    assert vec.replica_of == [0, 1, 0, 1]


def test_lockstep_reference_solutions_one_batch_per_replica(bridge, vec):
    obs, info = vec.reset(seed=7)
    assert obs.dtype == object and obs.shape == (4,) and list(obs) == [NOTES_1_TASK] * 4
    assert obs in vec.observation_space
    # round-robin: sub-envs 0, 2 on replica 0 and 1, 3 on replica 1
    assert [s.split("-")[1] for s in vec.session_ids] == ["0", "1", "0", "1"]
    assert list(info["scenario_id"]) == ["notes-1"] * 4 and info["_scenario_id"].all()
    assert len(set(info["seed"])) == 4  # each sub-env its own episode seed
    for action in (ADD, DELETE):
        before = _requests(bridge)
        sent = vec.requests_sent.get("step_batch", 0)
        obs, rew, term, trunc, info = vec.step([action] * 4)
        after = _requests(bridge)
        # exactly one step_batch reached each replica (plus the second stats request)
        assert [a - b for a, b in zip(after, before)] == [2, 2]
        assert vec.requests_sent["step_batch"] == sent + 2
        assert rew.dtype == np.float64 and term.dtype == np.bool_ and trunc.dtype == np.bool_
        assert list(rew) == [0.0] * 4 and not term.any() and not trunc.any()
        assert all('"success":true' in o for o in obs)
        assert list(info["observation"]["role"]) == ["tool"] * 4 and list(info["step"]) == [vec_step(action)] * 4
    obs, rew, term, trunc, info = vec.step([FINAL_REPLY] * 4)
    assert list(rew) == [1.0] * 4 and term.all() and not trunc.any()
    assert list(obs) == ["Task finished"] * 4
    assert list(info["end_reason"]) == ["text_reply"] * 4
    assert list(info["reward_info"]["passed"]) == [3] * 4
    # next step: NEXT_STEP autoreset of all four; the actions are ignored, no step_batch is sent
    old_episodes = list(vec.episode_ids)
    sent = vec.requests_sent["step_batch"]
    obs, rew, term, trunc, info = vec.step([{"name": "explode", "arguments": {}}] * 4)
    assert vec.requests_sent["step_batch"] == sent
    assert list(obs) == [NOTES_1_TASK] * 4 and list(rew) == [0.0] * 4 and not term.any() and not trunc.any()
    assert all(a != b for a, b in zip(old_episodes, vec.episode_ids))
    assert list(info["episode_id"]) == vec.episode_ids
    # the sessions were reused for the new episodes
    assert [s.split("-")[1] for s in vec.session_ids] == ["0", "1", "0", "1"]


def vec_step(action) -> int:
    return 1 if action is ADD else 2


def test_staggered_autoreset(vec):
    vec.reset(options={"scenario_ids": ["notes-1"] * 4})
    sessions = list(vec.session_ids)
    # step 1: sub-env 0 replies at once (ends with reward 0), the others start solving
    obs, rew, term, trunc, info = vec.step([FINAL_REPLY, ADD, ADD, ADD])
    assert list(term) == [True, False, False, False] and rew[0] == 0.0
    assert info["reward_info"]["passed"][0] == 0 and not info["_reward_info"][1:].any()
    # step 2: sub-env 0 is autoreset (its action ignored: it would raise episode_done otherwise)
    obs, rew, term, trunc, info = vec.step([FINAL_REPLY, DELETE, DELETE, DELETE])
    assert obs[0] == NOTES_1_TASK and rew[0] == 0.0 and not term[0] and not trunc[0]
    assert info["scenario_id"][0] == "notes-1" and info["_scenario_id"][0] and not info["_scenario_id"][1:].any()
    assert not term.any()
    # step 3: the others finish with the full reward, sub-env 0 plays its new episode
    obs, rew, term, trunc, info = vec.step([ADD, FINAL_REPLY, FINAL_REPLY, FINAL_REPLY])
    assert list(term) == [False, True, True, True] and list(rew) == [0.0, 1.0, 1.0, 1.0]
    # step 4: they are autoreset while sub-env 0 goes on
    obs, rew, term, trunc, info = vec.step([DELETE, "x", "x", "x"])
    assert list(obs[1:]) == [NOTES_1_TASK] * 3 and not term.any()
    assert '"success":true' in obs[0]
    obs, rew, term, trunc, info = vec.step([FINAL_REPLY, ADD, ADD, ADD])
    assert list(term) == [True, False, False, False] and rew[0] == 1.0
    assert vec.session_ids == sessions


def test_reset_options(bridge):
    v = EnvScalerVectorEnv(bridge.endpoints, num_envs=4, timeout=30)  # all scenarios of the bridge
    try:
        obs, info = v.reset(options={"scenario_ids": ["notes-1", "notes-2", "hostile-1", "notes-1"]})
        assert list(info["scenario_id"]) == ["notes-1", "notes-2", "hostile-1", "notes-1"]
        assert obs[2] == "Set the flag."
        a, _ = v.reset(seed=3)
        b, ib = v.reset(seed=3)
        assert list(a) == list(b)
        assert set(ib["scenario_id"]) <= {"notes-1", "notes-2", "hostile-1", "faults-1"}
        _, ic = v.reset(seed=3)
        assert list(ic["seed"]) == list(ib["seed"])
        # a partial reset leaves the other sub-envs alone
        episodes = list(v.episode_ids)
        _, im = v.reset(options={"reset_mask": np.array([False, True, False, False]), "scenario_id": "notes-1"})
        assert list(im["_scenario_id"]) == [False, True, False, False]
        assert v.episode_ids[0] == episodes[0] and v.episode_ids[1] != episodes[1]
        with pytest.raises(ValueError):
            v.reset(options={"scenario_ids": ["notes-1"]})
        with pytest.raises(ValueError):
            v.step(["x"])
    finally:
        v.close()


def test_close_closes_all_sessions(bridge):
    v = EnvScalerVectorEnv(bridge.endpoints, num_envs=2, scenario_ids=["notes-1"])
    v.reset()
    sessions = list(v.session_ids)
    v.close()
    from envscaler.protocol import SessionClosed

    for i, s in enumerate(sessions):
        with bridge.client(i) as c, pytest.raises(SessionClosed):
            c.state(s)


def test_a_step_goes_out_in_chunks_and_every_sub_env_gets_its_own_result(bridge, monkeypatch):
    from envscaler import vector_env

    monkeypatch.setattr(vector_env, "STEP_BATCH_CHUNK", 3)  # 5 sub-envs per replica: chunks of 3 and 2
    v = EnvScalerVectorEnv(bridge.endpoints, num_envs=10, scenario_ids=["notes-1"], timeout=30)
    try:
        v.reset(seed=1)
        before = _requests(bridge)
        # odd sub-envs end their episode now (reward 0), even ones add the note
        obs, rew, term, trunc, info = v.step([ADD if i % 2 == 0 else FINAL_REPLY for i in range(10)])
        after = _requests(bridge)
        assert list(rew) == [0.0] * 10 and not trunc.any()
        assert [a - b for a, b in zip(after, before)] == [3, 3]  # two step_batch chunks each, plus the stats request
        assert v.requests_sent["step_batch"] == 4
        assert list(term) == [i % 2 == 1 for i in range(10)]
        assert all('"success":true' in obs[i] for i in range(0, 10, 2))
        assert list(info["step"]) == [1] * 10 and list(info["_end_reason"]) == [i % 2 == 1 for i in range(10)]
    finally:
        v.close()


def test_add_info_builds_what_gymnasiums_does():
    # the override skips an allocation; the arrays, dtypes, masks and key order must stay gymnasium's
    ours = EnvScalerVectorEnv.__new__(EnvScalerVectorEnv, "tcp://127.0.0.1:1")
    ours.num_envs = 5
    theirs = VectorEnv()
    theirs.num_envs = 5
    infos = [
        (0, {"step": 1, "reward_info": {"passed": 2, "checks": [1]}, "observation": {"role": "tool", "content": "x"}, "final_obs": "a"}),
        (3, {"step": 2.5, "flag": True, "vec": np.arange(3.0), "n": np.int32(7), "none": None, "observation": {"role": "user"}}),
        (1, {"reward_info": {"passed": 0.5}, "final_obs": "b", "flag": False, "vec": np.ones(3)}),
        (4, {}),
    ]

    def build(env):
        out: dict = {}
        for i, info in infos:
            out = env._add_info(out, info, i)
        return out

    def same(a, b):
        assert list(a) == list(b)
        for k in a:
            if isinstance(a[k], dict):
                same(a[k], b[k])
            else:
                assert a[k].dtype == b[k].dtype and a[k].shape == b[k].shape, k
                assert [repr(x) for x in a[k].tolist()] == [repr(x) for x in b[k].tolist()], k

    same(build(ours), build(theirs))


def test_add_infos_builds_what_gymnasiums_does_one_by_one():
    # the step's and reset's infos are added a key at a time (_add_infos); the result must be what
    # gymnasium's _add_info gives called sub-env by sub-env in the same order, also for keys that
    # are dicts for some sub-envs only, keys that look like masks, and a vector_infos given non-empty
    ours = EnvScalerVectorEnv.__new__(EnvScalerVectorEnv, "tcp://127.0.0.1:1")
    ours.num_envs = 6
    theirs = VectorEnv()
    theirs.num_envs = 6
    tables = [
        [
            (2, {"step": 1, "tool_calls": [{"id": "c1"}], "diff": [], "observation": {"role": "tool", "content": "x", "tool_results": [{"content": "x"}]}}),
            (0, {"step": 2.5, "error": {"code": "too_large", "message": "m"}, "refused": True, "final_obs": {"a": 1}}),
            (5, {"step": 3, "reward_info": {"passed": 1, "checks": [1]}, "flag": np.bool_(True), "vec": np.arange(2.0), "observation": {"role": "user"}}),
            (1, {"reward_info": {"passed": 0.5}, "final_obs": "b", "flag": False, "vec": np.ones(2), "n": np.int32(7), "none": None}),
            (4, {}),
        ],
        [(0, {"mixed": {"a": 1}}), (3, {"mixed": 2}), (4, {"mixed": {"b": "x"}, "other": 1})],
        [(1, {"x": 1, "_x": "looks like a mask"}), (2, {"x": 2.0})],
    ]
    for rows in tables:
        start = {"kept": np.array([1, 2, 3, 4, 5, 6]), "_kept": np.ones(6, dtype=np.bool_)}

        def one_by_one(env, rows=rows, start=start):
            out = {k: v.copy() for k, v in start.items()}
            for i, info in rows:
                out = env._add_info(out, info, i)
            return out

        def same(a, b):
            assert list(a) == list(b)
            for k in a:
                if isinstance(a[k], dict):
                    same(a[k], b[k])
                elif isinstance(a[k], np.ndarray):
                    assert a[k].dtype == b[k].dtype and a[k].shape == b[k].shape, k
                    assert [repr(x) for x in a[k].tolist()] == [repr(x) for x in b[k].tolist()], k
                else:  # gymnasium's own oddity (a key that is a dict for some sub-envs only) kept as is
                    assert repr(a[k]) == repr(b[k]), k

        together = ours._add_infos({k: v.copy() for k, v in start.items()}, rows)
        same(together, one_by_one(theirs))
