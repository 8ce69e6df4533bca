"""The episode bookkeeping every env class here shares (sync, vector, async, adapters).

Kept in one place so the env classes agree on how a scenario is drawn, which seed the bridge
gets, when a session is reopened and how a step result becomes a Python tuple.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .bridge_client import BridgeClient
from .protocol import BridgeError, EpisodeDone, SessionClosed, SessionLost, UnknownSession
from .reachability import check_reachable

__all__ = [
    "open_client",
    "close_session_quietly",
    "REOPEN_SESSION",
    "LOST_SESSION",
    "MAX_SEED",
    "choose_scenario",
    "episode_seed",
    "reset_tuple",
    "step_tuple",
    "error_observation",
    "plain_action",
]

#: A reused session that fails `reset` with one of these is gone: open a new one instead.
REOPEN_SESSION = (SessionClosed, SessionLost, UnknownSession)
#: A step that fails with one of these lost its episode (replica restart, idle reaper): the vector
#: env ends that sub-env (truncated) and autoresets it instead of failing the whole batch.
LOST_SESSION = (SessionClosed, SessionLost, UnknownSession, EpisodeDone)

MAX_SEED = 2**32  # the bridge's seeds are 0 <= seed < 2^32 (§4 reset)


def open_client(who: str, endpoint: str | None, client: Any, curve: Any, timeout: float) -> tuple[Any, bool]:
    """The client an env uses, and whether the env owns it (made it, so closes it)."""
    if client is not None:
        return client, False
    if endpoint is None:
        raise ValueError(f"{who} needs an endpoint or a client")
    check_reachable(endpoint)  # a bridge that is not running fails here, not after the first request's timeout
    return BridgeClient(endpoint, timeout=timeout, curve=curve), True


def close_session_quietly(client: Any, session_id: str | None) -> None:
    """Closes a session on a best-effort basis: the bridge may be gone, or the session already is."""
    if session_id is None or client.closed:
        return
    try:
        client.close_session(session_id, timeout=min(5.0, client.timeout))
    except BridgeError:
        pass


def choose_scenario(rng: np.random.Generator, pool: Sequence[str]) -> str:
    if not pool:
        raise ValueError("no scenarios to choose from (the bridge serves none, or scenario_ids is empty)")
    return pool[int(rng.integers(len(pool)))]


def episode_seed(seed: int | None, rng: np.random.Generator) -> int:
    """The bridge seed of an episode: an explicit in-range ``seed`` as given (so ``reset(seed=7)``
    plays the bridge's seed-7 episode), else a draw from ``rng`` so that a seeded env stays
    reproducible across its later unseeded resets."""
    if seed is not None and 0 <= int(seed) < MAX_SEED:
        return int(seed)
    return int(rng.integers(0, MAX_SEED))


def reset_tuple(result: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """(observation content, info) of a reset result; info is the bridge's info plus the full observation."""
    observation = dict(result["observation"])
    info = dict(result.get("info") or {})
    info["observation"] = observation
    return str(observation.get("content", "")), info


def step_tuple(result: Mapping[str, Any], drop: Sequence[str] = ()) -> tuple[str, float, bool, bool, dict[str, Any]]:
    """The gymnasium 5-tuple of a step result. ``drop`` names info keys to leave out."""
    observation = dict(result["observation"])
    info = {k: v for k, v in (result.get("info") or {}).items() if k not in drop}
    info["observation"] = observation
    return (
        str(observation.get("content", "")),
        float(result.get("reward", 0.0)),  # may arrive as an int (§2)
        bool(result.get("terminated", False)),
        bool(result.get("truncated", False)),
        info,
    )


def error_observation(code: str, message: str) -> str:
    """The observation text for an episode the client ended because of an error (same shape as the bridge's)."""
    return json.dumps({"error": {"type": code, "message": message}})


def plain_action(action: Any) -> Any:
    """Unwraps numpy scalars (an element of a sampled action batch) so msgpack can encode the action."""
    item = getattr(action, "item", None)
    if item is not None and getattr(action, "shape", None) == ():
        return item()
    return action
