"""Issue 28 item 9: launch() is bounded by default: it records nothing unless given record_dir
(a trainer's million episodes at ~23 KB each would otherwise fill its working directory)."""

from __future__ import annotations

import sys

import envscaler
from envscaler import EnvScalerEnv

from helpers import FINAL_REPLY, NOTES_ENVS, REFERENCE_ACTIONS

launch_module = sys.modules["envscaler.launch"]  # the package's `launch` name is the function


def _play_one(bridge: envscaler.Bridge) -> None:
    with bridge.client(0, timeout=30) as c:
        env = EnvScalerEnv(client=c, scenario_ids=["notes-1"])
        env.reset(seed=1)
        for a in REFERENCE_ACTIONS:
            env.step(a)
        assert env.step(FINAL_REPLY)[1] == 1.0
        env.close()


def test_launch_records_nothing_by_default_and_says_so_once(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(launch_module, "_NOTICES_GIVEN", set())
    with envscaler.launch(envs=[str(NOTES_ENVS)], startup_timeout=60) as b:
        _play_one(b)
    assert list(tmp_path.iterdir()) == []  # no ./trajectories, nothing else
    err = capsys.readouterr().err
    assert err.count("envscaler.launch: episodes are not recorded") == 1 and "record_dir=" in err
    # a second launch in the same process says nothing more
    with envscaler.launch(envs=[str(NOTES_ENVS)], startup_timeout=60):
        pass
    assert "not recorded" not in capsys.readouterr().err
    # a choice in extra_args is the caller's
    assert launch_module._record_args(None, ["--record-dir", "x"]) == []


def test_launch_records_into_record_dir(tmp_path):
    out = tmp_path / "traj"
    with envscaler.launch(envs=[str(NOTES_ENVS)], startup_timeout=60, record_dir=out) as b:
        _play_one(b)
    files = list(out.rglob("*.jsonl"))
    assert files and any('"episode_end"' in f.read_text() for f in files)


def test_a_bridge_that_does_not_start_says_why_once_and_nothing_about_recording(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(launch_module, "_NOTICES_GIVEN", set())
    try:
        with envscaler.launch(envs="no-such-env-id", startup_timeout=60):
            raise AssertionError("the bridge should not have started")
    except RuntimeError as e:
        text = str(e)
    reason = text.splitlines()[0]
    assert reason.startswith("envscaler: ") and "no-such-env-id" in reason
    assert text.count(reason) == 1  # the reason leads the message and is not repeated in the log tail
    assert "not recorded" not in capsys.readouterr().err  # nothing served, so nothing to say about recording
