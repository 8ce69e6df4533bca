"""Helpers of the trainer suite (``pytest -m trainers``): its bridge, its fixture env, the bridge's records."""

from __future__ import annotations

import glob
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from envscaler import Bridge

from helpers import BUNDLED_ENVS, HERE, NOTES_ENVS, REPO, start_bridge

#: memo-v1: three tools whose parameters all have descriptions, and two task scenarios whose
#: untouched state already passes some checks (finish scores memo-1 0.5, memo-2 1/3; the reference
#: actions score 1.0), so a trainer's rewards can be told apart
TRAIN_ENVS = HERE / "fixtures" / "train-envs"
#: ../shared/tools/hf-model (ENVSCALER_SHARED names another shared folder, as for the TypeScript suites)
KIT = Path(os.environ.get("ENVSCALER_SHARED") or REPO / ".." / "shared") / "tools" / "hf-model"


def memo_scenarios() -> dict[str, dict[str, Any]]:
    with open(TRAIN_ENVS / "memo" / "scenarios.json", encoding="utf-8") as f:
        return {s["id"]: s for s in json.load(f)}


@contextmanager
def start_train_bridge(record_dir: Path, replicas: int = 2, bundled: bool = False) -> Iterator[Bridge]:
    """memo-v1 and notes-v1 (and the bundled envs if asked), every episode recorded to ``record_dir``."""
    envs = [TRAIN_ENVS, NOTES_ENVS, *([BUNDLED_ENVS] if bundled else [])]
    with start_bridge(envs=envs, replicas=replicas, extra=("--record", "--record-dir", str(record_dir))) as b:
        yield b


def records(record_dir: Path) -> list[dict[str, Any]]:
    """Every record the bridge wrote (each line is ``<crc32 hex> <json>``: bridge/tools/record/trajectory-writer.ts)."""
    out: list[dict[str, Any]] = []
    for f in sorted(glob.glob(os.path.join(str(record_dir), "*.jsonl"))):
        with open(f, encoding="utf-8") as fh:
            out += [json.loads(line.split(" ", 1)[1]) for line in fh if line.strip()]
    return out


def sessions(stats: list[dict[str, Any]]) -> int:
    """Open sessions over every replica, from the bridge's ``stats``."""
    return sum(int(s["sessions"]) for s in stats)


def require(module: str, reason: str) -> Any:
    """``pytest.importorskip(module)``, except where ``ENVSCALER_TRAINERS_REQUIRED=1`` (the CI trainer
    job sets it): there a missing trainer package fails the test instead of skipping it unnoticed."""
    import importlib

    import pytest

    if os.environ.get("ENVSCALER_TRAINERS_REQUIRED") == "1":
        try:
            return importlib.import_module(module)
        except ImportError as e:
            pytest.fail(f"{module} is not importable ({e}) and ENVSCALER_TRAINERS_REQUIRED=1: {reason}", pytrace=False)
    return pytest.importorskip(module, reason=reason)


def episode_rewards(recs: list[dict[str, Any]]) -> dict[str, float]:
    """Each ended episode's reward in the records: a ``finish``'s scoring step is its end's
    ``result``; an episode that ended itself has it on its terminal ``step`` record."""
    last_step: dict[str, float] = {}
    out: dict[str, float] = {}
    for r in recs:
        if r.get("t") == "step":
            last_step[r["episode_id"]] = float(r["reward"])
        elif r.get("t") == "episode_end" and r.get("how") != "closed":
            out[r["episode_id"]] = float(r["result"]["reward"]) if r.get("result") else last_step[r["episode_id"]]
    return out


def missing_kit() -> None:
    """Skips a test whose ../shared/tools/hf-model is absent (a clone without ../shared); where
    ``ENVSCALER_SHARED_REQUIRED=1`` (scripts/test-all.sh sets it when ../shared exists) it fails."""
    import pytest

    if os.environ.get("ENVSCALER_SHARED_REQUIRED") == "1":
        pytest.fail(f"ENVSCALER_SHARED_REQUIRED=1 but the hf-model kit is missing at {KIT}", pytrace=False)
    pytest.skip(f"hf-model kit not found at {KIT} (../shared is absent)")
