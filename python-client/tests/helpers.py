"""Helpers of the test suite: paths, the notes-1 reference solution, bridges of a test's own."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import envscaler
from envscaler import Bridge

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent  # python-client/tests -> the TypeScript project
VECTORS = HERE / ".." / ".." / "protocol" / "vectors"
NOTES_ENVS = REPO / "tests" / "fixtures" / "envs"
HOSTILE_ENVS = REPO / "tests" / "fixtures" / "hostile"
#: faults-v1: hostile-v1's memory and output bombs under a deadline they cannot reach
FAULT_ENVS = REPO / "tests" / "fixtures" / "faults"
BUNDLED_ENVS = REPO / "envs"
PROTOCOL_DOC = REPO / "docs" / "protocol.md"

#: the shared bridge's frame limit, small so the oversized-frame test sends 1 MiB, not 8
SMALL_FRAME_LIMIT = 1 << 20


def notes_scenarios() -> dict[str, dict[str, Any]]:
    with open(NOTES_ENVS / "notes" / "scenarios.json", encoding="utf-8") as f:
        return {s["id"]: s for s in json.load(f)}


#: notes-1's reference solution, read from the fixture (not restated here)
REFERENCE_ACTIONS: list[dict[str, Any]] = notes_scenarios()["notes-1"]["reference_actions"]
NOTES_1_TASK: str = notes_scenarios()["notes-1"]["task"]
FINAL_REPLY = "Done: Bob has his 'todo' note and Ann's groceries note is deleted."


@contextmanager
def start_bridge(envs: list[Path] | None = None, replicas: int = 1, extra: tuple[str, ...] = (), **kw: Any) -> Iterator[Bridge]:
    """A bridge of our own; nothing recorded to disk (the CLI records to ./trajectories by default)."""
    with envscaler.launch(
        envs=[str(p) for p in (envs or [NOTES_ENVS, HOSTILE_ENVS])],
        replicas=replicas,
        extra_args=("--no-record", *extra),
        startup_timeout=60,
        **kw,
    ) as bridge:
        yield bridge


def play_reference(step, session_id: str) -> dict[str, Any]:
    """Plays notes-1's reference actions and a closing text reply; returns the last step result."""
    for action in REFERENCE_ACTIONS:
        r = step(session_id, action)
        assert r["terminated"] is False and r["reward"] == 0, r
        assert r["observation"]["role"] == "tool"
        assert json.loads(r["observation"]["content"])["success"] is True
    return step(session_id, FINAL_REPLY)


def wait_for(predicate, timeout: float, interval: float = 0.1, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)
