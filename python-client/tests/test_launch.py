"""launch(): finding the CLI, waiting for a serving bridge, stopping it cleanly, failing loudly."""

from __future__ import annotations

import os
import shutil
import sys

import pytest

import envscaler
from envscaler.launch import resolve_command

from helpers import NOTES_ENVS, REPO


def test_resolve_command_order(monkeypatch, tmp_path):
    assert resolve_command("node /x/main.js --flag") == ["node", "/x/main.js", "--flag"]
    assert resolve_command(["node", "/y.js"]) == ["node", "/y.js"]
    monkeypatch.setenv("ENVSCALER_CLI", "node '/path with space/main.js'")
    assert resolve_command() == ["node", "/path with space/main.js"]
    monkeypatch.delenv("ENVSCALER_CLI")
    # an `envscaler` on PATH comes next
    fake = tmp_path / "envscaler"
    fake.write_text("#!/bin/sh\nexit 0\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    assert resolve_command() == [str(fake)]
    # then the repository's build next to this package
    monkeypatch.setenv("PATH", os.path.dirname(shutil.which("node")))
    assert resolve_command() == [shutil.which("node"), str(REPO / "dist" / "cli" / "main.js")]
    # a copied (non-editable) install has no repository next to it: a build in the working directory
    monkeypatch.setattr(sys.modules["envscaler.launch"], "_REPO_ROOT", tmp_path / "site-packages")
    monkeypatch.chdir(REPO)
    assert resolve_command() == [shutil.which("node"), str(REPO / "dist" / "cli" / "main.js")]
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FileNotFoundError, match="ENVSCALER_CLI"):
        resolve_command()


def test_launch_via_env_var_and_clean_stop(monkeypatch):
    monkeypatch.setenv("ENVSCALER_CLI", f"{shutil.which('node')} {REPO / 'dist' / 'cli' / 'main.js'}")
    with envscaler.launch(envs=NOTES_ENVS, replicas=2, warm_sessions=4, extra_args=["--no-record"]) as b:
        args = list(b.process.args)
        assert args[args.index("--warm-sessions") + 1] == "4"
        assert len(b.endpoints) == 2 and len(set(b.endpoints)) == 2
        replicas = b.replica_pids()
        assert len(replicas) == 2
        for i in range(2):
            with b.client(i, timeout=5) as c:
                assert c.hello()["replica"] == i
        conn_file, process = b.connection_file, b.process
    # SIGTERM: the bridge stopped its replicas, removed its file and exited 0
    assert process.returncode == 0
    assert not os.path.exists(conn_file)
    assert all(not os.path.exists(f"/proc/{p}") or _is_zombie(p) for p in replicas)


def _is_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def test_launch_failure_is_reported_with_the_log(tmp_path):
    with pytest.raises(RuntimeError) as e, envscaler.launch(envs=tmp_path / "no-such-dir", extra_args=["--no-record"], startup_timeout=30):
        pass
    assert "did not start" in str(e.value) and "log tail" in str(e.value)


def test_missing_cli_is_a_clear_error(monkeypatch):
    monkeypatch.delenv("ENVSCALER_CLI", raising=False)
    with pytest.raises(FileNotFoundError), envscaler.launch(command=["/nonexistent/envscaler-cli"]):
        pass
