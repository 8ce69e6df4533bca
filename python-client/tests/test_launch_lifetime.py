"""A bridge from launch() never outlives the Python process that launched it, however that ends.

Each test runs a launcher in a child Python process (the way a trainer runs it), with an episode
open on the bridge, ends the child one way, and checks by pid that the serve process and its
replicas are gone within a liveness bound, that the launch's temporary folder is gone, and that
the open episode was closed in the recording (the replicas stopped cleanly, not killed).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import envscaler

from helpers import BUNDLED_ENVS

# how long the bridge may take to notice and stop: a liveness bound, not a timing threshold
GONE_WITHIN_S = 15.0

CHILD = r"""
import json, os, sys, time
import envscaler

how, record_dir = sys.argv[1], sys.argv[2]
with envscaler.launch(envs="library", replicas=2, extra_args=["--record-dir", record_dir], startup_timeout=120) as bridge:
    with bridge.client(0, timeout=30) as c:
        episode = c.reset("library-1", seed=0)["info"]["episode_id"]
    report = {"serve": bridge.pid, "replicas": bridge.replica_pids(), "workdir": os.path.dirname(bridge.connection_file), "episode": episode}
    print(json.dumps(report), flush=True)
    if how == "raise":
        raise RuntimeError("the trainer failed")
    if how != "exit":
        time.sleep(600)  # ended by the signal the test sends
"""


def _start_time(pid: int) -> str | None:
    """Field 22 of /proc/PID/stat (tells the process from a later one with its pid); None once it ended."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return None if fields[0] == "Z" else fields[19]  # a zombie has ended; only its parent's wait is missing


def _wait_gone(procs: dict[int, str], what: str) -> None:
    deadline = time.monotonic() + GONE_WITHIN_S
    left = dict(procs)
    while left and time.monotonic() < deadline:
        left = {p: s for p, s in left.items() if _start_time(p) == s}
        time.sleep(0.1)
    for pid in left:  # a failing run leaves nothing behind either
        os.kill(pid, signal.SIGKILL)
    assert not left, f"{what}: still running {GONE_WITHIN_S:g} s later: {sorted(left)}"


def _closed_episodes(record_dir: Path) -> list[str]:
    """Episode ids the recording says were closed (each line: crc32, a space, the JSON record)."""
    out = []
    for f in record_dir.iterdir():
        for line in f.read_text().splitlines():
            rec = json.loads(line[9:])
            if rec.get("t") == "episode_end" and rec.get("how") == "closed":
                out.append(rec["episode_id"])
    return out


@pytest.mark.parametrize("how", ["exit", "raise", "SIGTERM", "SIGINT", "SIGKILL"])
def test_the_bridge_ends_with_its_launcher(how: str, tmp_path: Path) -> None:
    record_dir = tmp_path / "trajectories"
    child = subprocess.Popen([sys.executable, "-c", CHILD, how, str(record_dir)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    procs: dict[int, str] = {}
    try:
        assert child.stdout is not None
        line = child.stdout.readline()  # the launcher prints once its bridge serves (startup_timeout bounds it)
        assert line, f"the launcher ended before its bridge served: {child.communicate()[1][-3000:]}"
        report = json.loads(line)
        assert len(report["replicas"]) == 2
        procs = {p: s for p in [report["serve"], *report["replicas"]] if (s := _start_time(p)) is not None}
        assert len(procs) == 3
        assert os.path.isdir(report["workdir"])
        if how not in ("exit", "raise"):
            child.send_signal(getattr(signal, how))
        code = child.wait(timeout=60)
        if how == "exit":
            assert code == 0
        elif how == "raise":
            assert code == 1 and "the trainer failed" in (child.stderr.read() if child.stderr else "")
        elif how == "SIGINT":
            assert code != 0  # KeyboardInterrupt ended it, after the with block stopped the bridge
        else:
            assert code == -getattr(signal, how)  # died by the signal: no Python code of ours ran
        _wait_gone(procs, f"after the launcher's {how}: serve and its replicas")
        assert not os.path.exists(report["workdir"]), "the launch's temporary folder is left behind"
        # the replicas stopped cleanly: the episode left open is closed in the recording
        assert report["episode"] in _closed_episodes(record_dir)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        for pid, start in procs.items():
            if _start_time(pid) == start:
                os.kill(pid, signal.SIGKILL)


def test_envs_takes_bundled_env_ids() -> None:
    with envscaler.launch(envs=["library", "bank-v1"], extra_args=["--no-record"], startup_timeout=60) as b:
        args = list(b.process.args) if b.process else []
        # the ids go to serve as they are: serve knows where its bundled envs are
        assert args[args.index("--envs") + 1 : args.index("--envs") + 3] == ["library", "bank-v1"]
        with b.client(0, timeout=30) as c:
            assert sorted(e["env_id"] for e in c.list_envs()) == ["bank-v1", "library-v1"]


def test_an_unknown_env_id_says_where_it_looked_and_which_ids_there_are(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(RuntimeError) as e, envscaler.launch(envs="libary", extra_args=["--no-record"], startup_timeout=60):
        pass
    first = str(e.value).splitlines()[0]
    assert first.startswith("envscaler: --envs libary:"), first
    assert f"no folder {tmp_path / 'libary'}" in first
    assert f"looked in {BUNDLED_ENVS}" in first
    assert "library (library-v1)" in first and "bank (bank-v1)" in first
