"""Deterministic replay of recorded trajectories from Python: runs ``envscaler replay --json``,
which re-executes each episode in fresh sandboxes with the recorded simulated-user replies."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Sequence
from typing import Any

from .launch import resolve_command


def replay(
    file: str | os.PathLike[str],
    envs: str | os.PathLike[str] | Sequence[str | os.PathLike[str]] | None = None,
    episode: str | None = None,
    command: str | Sequence[str] | None = None,
) -> list[dict[str, Any]]:
    """One result per episode: ``ok``, ``steps``, ``changed`` (env/scenario sources that changed
    since recording) and, when not ok, ``divergence`` = the first differing step, what differed
    and both sides. ``envs`` are the bundle folders the episodes were played on."""
    args = [*resolve_command(command), "replay", os.fspath(file), "--json"]
    if envs is not None:
        paths = [envs] if isinstance(envs, (str, os.PathLike)) else list(envs)
        args += ["--envs", *[os.path.abspath(os.fspath(p)) for p in paths]]
    if episode:
        args += ["--episode", episode]
    out = subprocess.run(args, capture_output=True, text=True, check=False)
    # exit code 1 means "some episode diverged", which the results say; anything else is a failure
    if out.returncode not in (0, 1) or not out.stdout.strip():
        raise RuntimeError(f"envscaler replay failed ({out.returncode}): {out.stderr[-2000:]}")
    results: list[dict[str, Any]] = json.loads(out.stdout.strip().splitlines()[-1])
    return results
