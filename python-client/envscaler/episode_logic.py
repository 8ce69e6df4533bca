"""The episode bookkeeping every env class here shares (sync, async, vector, fleet, ROLL, GEM).

Kept in one place so the env classes agree on how a scenario is drawn, which seed the bridge
gets, when a session is reopened, how misuse is reported and how a result becomes a Python tuple.
:class:`Episode` is the state machine; the env classes differ only in how they send requests
(blocking, asyncio, batched, placed on a fleet) and in the shapes their frameworks expect.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

import gymnasium as gym
import numpy as np

from .bridge_client import BridgeClient, CurveKeys
from .protocol import BridgeError, EpisodeDone, SessionClosed, SessionLost, UnknownSession
from .reachability import check_reachable

__all__ = [
    "LOST_SESSION",
    "MAX_SEED",
    "MODES",
    "REOPEN_SESSION",
    "EnvClosed",
    "Episode",
    "ResetNeeded",
    "StepTuple",
    "check_mode",
    "check_seed",
    "choose_scenario",
    "close_session_quietly",
    "episode_seed",
    "error_observation",
    "lost_step",
    "open_client",
    "plain_action",
    "refused_step",
    "reset_tuple",
    "step_tuple",
]

R = TypeVar("R")
#: ``(observation, reward, terminated, truncated, info)``, gymnasium's step result.
StepTuple = tuple[str, float, bool, bool, dict[str, Any]]


class ResetNeeded(gym.error.ResetNeeded, RuntimeError):
    """A step (or state, snapshot, finish) before the first ``reset``. Gymnasium's type; also a
    RuntimeError, which is what these envs raised before."""


class EnvClosed(gym.error.ClosedEnvironmentError, RuntimeError):
    """Any call but ``close`` after ``close``. Gymnasium's type; also a RuntimeError, as before."""


#: A reused session that fails `reset` with one of these is gone: open a new one instead.
REOPEN_SESSION = (SessionClosed, SessionLost, UnknownSession)
#: A step that fails with one of these lost its episode (replica restart, idle reaper): the vector
#: env ends that sub-env (truncated) and autoresets it instead of failing the whole batch.
LOST_SESSION = (SessionClosed, SessionLost, UnknownSession, EpisodeDone)

MAX_SEED = 2**32  # the bridge's seeds are 0 <= seed < 2^32 (§4 reset)


def open_client(who: str, endpoint: str | None, client: BridgeClient | None, curve: CurveKeys | None, timeout: float) -> tuple[BridgeClient, bool]:
    """The client an env uses, and whether the env owns it (made it, so closes it)."""
    if client is not None:
        return client, False
    if endpoint is None:
        raise ValueError(f"{who} needs an endpoint or a client")
    check_reachable(endpoint)  # a bridge that is not running fails here, not after the first request's timeout
    return BridgeClient(endpoint, timeout=timeout, curve=curve), True


def close_session_quietly(client: BridgeClient, session_id: str | None) -> None:
    """Closes a session on a best-effort basis: the bridge may be gone, or the session already is."""
    if session_id is None or client.closed:
        return
    try:
        client.close_session(session_id, timeout=min(5.0, client.timeout))
    except BridgeError:
        pass


#: The scenario modes ``mode=`` selects (list_scenarios' ``mode``).
MODES = ("task", "conversation")


def check_mode(mode: str | None) -> str | None:
    if mode is not None and mode not in MODES:
        raise ValueError(f"mode must be one of {MODES} or None; got {mode!r}")
    return mode


def select_scenarios(listed: Sequence[Mapping[str, Any]], scenario_ids: Sequence[str] | None, mode: str | None) -> list[str]:
    """The scenarios an env draws from: ``scenario_ids`` (default: every scenario the bridge
    lists), and with ``mode`` only those of that mode (``"task"`` or ``"conversation"``; a
    conversation needs a simulated user, ``serve --user-model``: without one it ends at the
    agent's first text reply)."""
    if mode is None:
        return list(scenario_ids) if scenario_ids is not None else [str(s["scenario_id"]) for s in listed]
    modes = {str(s["scenario_id"]): s.get("mode") for s in listed}
    pool = list(scenario_ids) if scenario_ids is not None else list(modes)
    return [s for s in pool if modes.get(s) == mode]


def choose_scenario(rng: np.random.Generator, pool: Sequence[str]) -> str:
    if not pool:
        raise ValueError("no scenarios to choose from (the bridge serves none, or scenario_ids is empty)")
    return pool[int(rng.integers(len(pool)))]


def check_seed(seed: Any, what: str = "seed") -> int:
    """``seed`` as an int in the bridge's range (0 <= seed < 2^32); a ValueError saying the range
    otherwise (a wider seed was once cut to 32 bits without a word)."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise ValueError(f"{what} must be an int in 0 <= {what} < 2**32 (the bridge's range); got {seed!r}")
    if not 0 <= int(seed) < MAX_SEED:
        raise ValueError(f"{what} must be in 0 <= {what} < 2**32 = {MAX_SEED} (the bridge's range); got {int(seed)}")
    return int(seed)


def episode_seed(seed: int | None, rng: np.random.Generator) -> int:
    """The bridge seed of an episode: an explicit ``seed`` as given (so ``reset(seed=7)`` plays the
    bridge's seed-7 episode; outside 0 <= seed < 2^32 a ValueError), else a draw from ``rng`` so
    that a seeded env stays reproducible across its later unseeded resets."""
    if seed is not None:
        return check_seed(seed)
    return int(rng.integers(0, MAX_SEED))


def reset_tuple(result: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """(observation content, info) of a reset result; info is the bridge's info plus the full observation."""
    observation = dict(result["observation"])
    info = dict(result.get("info") or {})
    info["observation"] = observation
    return str(observation.get("content", "")), info


def step_tuple(result: Mapping[str, Any], drop: Sequence[str] = ()) -> StepTuple:
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


def refused_step(code: str, message: str) -> StepTuple:
    """The step result of an action the bridge (or the client, before sending) refused without
    running it (over a size limit, not encodable, the replica overloaded): an error observation
    the agent can read, reward 0, not terminated nor truncated (the episode goes on unchanged),
    ``info["error"]`` naming the cause."""
    return error_observation(code, message), 0.0, False, False, {"error": {"code": code, "message": message}, "refused": True}


def lost_step(code: str, message: str) -> StepTuple:
    """The step result of an episode that died with its session (replica restart, node loss, idle
    reaper): truncated, reward 0, ``info["error"]`` naming the cause, no exception."""
    return error_observation(code, message), 0.0, False, True, {"error": {"code": code, "message": message}}


class Episode:
    """The episode state machine of one env (one sub-env of a vector env).

    States: *no session* (before the first reset, or after the bridge lost the session), *live*
    (a reset answered; steps go to ``session_id``), *ended* (a step terminated or truncated, or
    ``finish``: the session stays for the next reset), *reset failed* (the last reset raised: the
    session, if any, is kept for the next reset, but nothing of the previous episode is reachable
    any more) and *closed* (final). Misuse raises Gymnasium's exceptions: :class:`ResetNeeded`
    for a step (state, snapshot, finish) without an episode, :class:`EnvClosed` for anything after
    ``close``.
    """

    __slots__ = ("closed", "episode_id", "live", "reset_failed", "scenario_id", "session_id")

    def __init__(self) -> None:
        self.session_id: str | None = None
        self.episode_id: str | None = None
        self.scenario_id: str | None = None
        self.live = False  # the bridge has not ended this episode: reset/close finish it first
        self.reset_failed = False  # the last reset raised: steps are ResetNeeded until one succeeds
        self.closed = False

    def check_open(self) -> None:
        if self.closed:
            raise EnvClosed("the env is closed")

    def session(self) -> str:
        """The session a step (state, snapshot, finish) goes to."""
        self.check_open()
        if self.session_id is None:
            raise ResetNeeded("call reset() before step()")
        if self.reset_failed:
            raise ResetNeeded("the last reset() failed; call reset() again before step()")
        return self.session_id

    def failed(self) -> None:
        """A reset failed: the previous episode is gone (the bridge ended it; a failed reset in a
        session leaves it without an episode) and none is live until the next successful reset."""
        self.reset_failed = True
        self.live = False
        self.episode_id = None
        self.scenario_id = None

    def reopen(self, error: BaseException) -> bool:
        """Whether a reset that failed with ``error`` on the reused session should be sent again
        without one (the session was reaped, or its replica restarted); forgets the session if so."""
        if self.session_id is not None and isinstance(error, REOPEN_SESSION):
            self.forget()
            return True
        return False

    def reset(self, send: Callable[[str | None], R]) -> R:
        """Sends a reset on the reused session (``send(session_id)``), or on a new one
        (``send(None)``) when there is none or it is gone."""
        self.check_open()
        try:
            if self.session_id is not None:
                try:
                    return send(self.session_id)
                except REOPEN_SESSION as e:
                    self.reopen(e)
            return send(None)
        except BaseException:
            self.failed()
            raise

    async def areset(self, send: Callable[[str | None], Awaitable[R]]) -> R:
        """:meth:`reset` for asyncio."""
        self.check_open()
        try:
            if self.session_id is not None:
                try:
                    return await send(self.session_id)
                except REOPEN_SESSION as e:
                    self.reopen(e)
            return await send(None)
        except BaseException:
            self.failed()
            raise

    def begin(self, result: Mapping[str, Any], scenario_id: str) -> tuple[str, dict[str, Any]]:
        """Records a reset result: the episode is live on its session. Returns ``reset_tuple``."""
        obs, info = reset_tuple(result)
        self.started(str(result["session_id"]), info, scenario_id)
        return obs, info

    def started(self, session_id: str, info: Mapping[str, Any], scenario_id: str | None = None) -> None:
        """Records an episode that runs on ``session_id`` now (a reset, or a fork: its ``info``)."""
        self.session_id = session_id
        self.episode_id = info.get("episode_id")
        self.scenario_id = scenario_id if scenario_id is not None else info.get("scenario_id")
        self.live = True
        self.reset_failed = False

    def ended(self, step: StepTuple) -> StepTuple:
        """Records a step result; the episode is over once it is terminated or truncated."""
        if step[2] or step[3]:
            self.live = False
        return step

    def forget(self) -> None:
        """The session is gone (lost with its replica, or moved): the next reset opens a new one."""
        self.session_id = None
        self.live = False

    def close(self) -> str | None:
        """Marks the episode closed; returns the session the caller should close, if any."""
        sid, self.session_id = self.session_id, None
        self.closed = True
        self.live = False
        return sid
