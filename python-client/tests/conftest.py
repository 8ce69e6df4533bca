"""Shared fixtures: real bridges started with envscaler.launch (no mocks anywhere in this suite).

Session-scoped bridges are shared by the tests that only need a well-behaved bridge; tests that
kill replicas, reap sessions, cap sessions or need CurveZMQ start their own (``start_bridge``).
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest

from envscaler import Bridge, BridgeClient

import loopback_guard
from helpers import BUNDLED_ENVS, FAULT_ENVS, HOSTILE_ENVS, NOTES_ENVS, REPO, SMALL_FRAME_LIMIT, start_bridge


def pytest_configure(config: pytest.Config) -> None:
    """Before any test module is imported: every connect/bind of this process must stay on loopback."""
    loopback_guard.install()


@pytest.fixture(scope="session", autouse=True)
def built_bridge() -> None:
    """The suite runs the real CLI; build it only if the build is missing."""
    if not (REPO / "dist" / "cli" / "main.js").is_file():
        subprocess.run(["npm", "run", "build"], cwd=REPO, check=True)


@pytest.fixture(scope="session")
def bridge(built_bridge: None) -> Iterator[Bridge]:
    """2 replicas serving notes-v1, hostile-v1 and faults-v1, shared by most tests.

    The short hard-stop grace makes the watchdog stop native_hang (JSON.stringify of a 15M array)
    well before that builtin could run into the env's memory cap on its own. Quarantine is off
    (tests/unit/limits.test.ts tests it): hostile-1 is reset by many tests here, and a second
    watchdog stop must not turn every later hostile-1 test into `scenario_quarantined`."""
    envs = [NOTES_ENVS, HOSTILE_ENVS, FAULT_ENVS]
    with start_bridge(envs=envs, replicas=2, workers=2, extra=("--max-frame-bytes", str(SMALL_FRAME_LIMIT), "--hard-stop-grace-ms", "200", "--quarantine-after", "1000000")) as b:
        yield b


@pytest.fixture(scope="session")
def bridge1(built_bridge: None) -> Iterator[Bridge]:
    """1 replica serving notes-v1 and the bundled envs (library-v1, ...)."""
    with start_bridge(envs=[NOTES_ENVS, BUNDLED_ENVS], replicas=1) as b:
        yield b


@pytest.fixture
def client(bridge: Bridge) -> Iterator[BridgeClient]:
    with bridge.client(0, timeout=30) as c:
        yield c


@pytest.fixture
def client1(bridge: Bridge) -> Iterator[BridgeClient]:
    with bridge.client(1, timeout=30) as c:
        yield c
