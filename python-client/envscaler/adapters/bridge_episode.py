"""What every trainer adapter shares: a pool of replica clients, one bridge episode, and the rule
that tells an infrastructure failure from an episode's own end.

Trainers differ in how they call an env (TRL's tool methods, SkyRL's ``step(text)``, verifiers'
``env_response``, OpenRLHF's ``AgentInstance.step``), but not in what a bridge episode is: a reset
of a (scenario, seed) on a session, steps, a scored end. :class:`BridgeEpisode` is that, blocking
(the trainers here call their envs from threads or executors). :class:`EndpointPool` spreads
episodes over the replicas and owns the clients; a trainer that drops an env without closing it
still gets its session closed (a ``weakref.finalize`` per episode), so no session outlives the
object that opened it.
"""

from __future__ import annotations

import fnmatch
import itertools
import threading
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..agent import system_prompt
from ..bridge_client import BridgeClient, CurveKeys
from ..episode_logic import REOPEN_SESSION
from ..launch import watch_of
from ..protocol import (
    BridgeError,
    BridgeExited,
    BridgeTimeout,
    EngineUnavailable,
    EpisodeDone,
    InternalError,
    Overloaded,
    SessionClosed,
    SessionLost,
    ShuttingDown,
    TooManySessions,
    UnknownSession,
    UserSimulatorFailed,
)
from ..reachability import BridgeNotRunning

__all__ = ["INFRA_AT_RESET", "BridgeEpisode", "EndpointPool", "EpisodeEnd", "EpisodeInfrastructureError", "endpoints_of", "match_scenarios", "prompt_messages"]


class EpisodeInfrastructureError(RuntimeError):
    """The bridge could not run an episode (no reply, replica restarted, session reaped, overloaded,
    engine gone, a bug of ours): not something the policy did, so never a reward of 0.

    ``cause`` is the :class:`~envscaler.BridgeError` (its ``code`` names the failure), or the
    :class:`~envscaler.reachability.BridgeNotRunning` of a bridge nothing listens for any more
    (``code`` ``"bridge_not_running"``)."""

    def __init__(self, message: str, cause: BridgeError | BridgeNotRunning) -> None:
        super().__init__(message)
        self.cause = cause
        self.code = cause.code if isinstance(cause, BridgeError) else "bridge_not_running"


#: What a reset can fail with that is the bridge's doing, not the caller's (``UnknownScenario``,
#: ``BadRequest``) nor the env's (``EnvFault``, ``EnvLoadFailed``, ``ScenarioQuarantined``): these
#: become :class:`EpisodeInfrastructureError`, like any failure of a step.
INFRA_AT_RESET: tuple[type[BaseException], ...] = (
    BridgeTimeout,
    BridgeExited,
    BridgeNotRunning,
    SessionClosed,
    SessionLost,
    UnknownSession,
    TooManySessions,
    Overloaded,
    EngineUnavailable,
    ShuttingDown,
    InternalError,
    UserSimulatorFailed,
)


def endpoints_of(bridge: Any) -> tuple[list[str], CurveKeys | None]:
    """The endpoints and CurveZMQ keys of a :class:`~envscaler.Bridge`, one endpoint or a list."""
    if isinstance(bridge, str):
        return [bridge], None
    if hasattr(bridge, "endpoints"):
        return list(bridge.endpoints), getattr(bridge, "curve", None)
    eps = [str(e) for e in bridge]
    if not eps:
        raise ValueError("no bridge endpoints given")
    return eps, None


class EndpointPool:
    """One blocking client per replica, shared by every episode placed on it; episodes are placed
    round-robin. ``close()`` closes every episode still open and the clients (idempotent)."""

    def __init__(self, bridge: Any, timeout: float = 60.0, curve: CurveKeys | None = None) -> None:
        self.endpoints, found_curve = endpoints_of(bridge)
        self.curve = curve if curve is not None else found_curve
        self.gone = watch_of(bridge)
        self.timeout = float(timeout)
        self._clients: dict[int, BridgeClient] = {}
        self._lock = threading.Lock()
        self._next = itertools.count()
        self._episodes: weakref.WeakSet[BridgeEpisode] = weakref.WeakSet()
        self.closed = False

    def client(self, replica: int) -> BridgeClient:
        with self._lock:
            if self.closed:
                raise RuntimeError("the EndpointPool is closed")
            c = self._clients.get(replica)
            if c is None or c.closed:
                c = self._clients[replica] = BridgeClient(self.endpoints[replica], timeout=self.timeout, curve=self.curve, gone=self.gone)
            return c

    def episode(self) -> BridgeEpisode:
        """A new episode holder on the next replica (it opens a session at its first reset)."""
        replica = next(self._next) % len(self.endpoints)
        ep = BridgeEpisode(self.client(replica), replica)
        self._episodes.add(ep)
        return ep

    def stats(self) -> list[dict[str, Any]]:
        """The bridge's ``stats`` of every replica."""
        return [self.client(i).stats() for i in range(len(self.endpoints))]

    def close(self) -> None:
        if self.closed:
            return
        for ep in list(self._episodes):
            ep.close()
        with self._lock:
            self.closed = True
            for c in self._clients.values():
                c.close()
            self._clients.clear()

    def __enter__(self) -> EndpointPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _close_session(client: BridgeClient, box: list[str | None]) -> None:
    # runs from weakref.finalize: must not reference the episode object itself
    sid, box[0] = box[0], None
    if sid is None or client.closed:
        return
    try:
        client.close_session(sid, timeout=min(5.0, client.timeout))
    except Exception:  # interpreter shutdown, bridge gone: the bridge's idle reaper is the backstop
        pass


@dataclass
class EpisodeEnd:
    """How an episode ended: its reward, why, and the env's own error if it faulted."""

    reward: float
    end_reason: str | None
    error: dict[str, Any] | None = None
    reward_info: dict[str, Any] | None = None

    @property
    def env_fault(self) -> bool:
        """The env (not the policy) ended it: the reward says nothing about the policy."""
        return self.end_reason == "env_fault" or self.error is not None


@dataclass(eq=False)
class BridgeEpisode:
    """One episode at a time on one session of one replica (the session is reused by later resets)."""

    client: BridgeClient
    replica: int
    info: dict[str, Any] = field(default_factory=dict)
    observation: str = ""
    end: EpisodeEnd | None = None
    #: the infrastructure failure that broke the current episode, if any (raised by ``result()``)
    failure: EpisodeInfrastructureError | None = None
    steps: int = 0
    _box: list[str | None] = field(default_factory=lambda: [None])

    def __post_init__(self) -> None:
        self._finalizer = weakref.finalize(self, _close_session, self.client, self._box)

    @property
    def session_id(self) -> str | None:
        return self._box[0]

    @property
    def live(self) -> bool:
        return self._box[0] is not None and self.end is None and self.failure is None and bool(self.info)

    def _infra(self, what: str, e: BridgeError | BridgeNotRunning) -> EpisodeInfrastructureError:
        # str(BridgeError) already starts with its code ("timeout: no reply ..."): not repeated here
        detail = str(e) if isinstance(e, BridgeError) else f"bridge_not_running: {e}"
        err = EpisodeInfrastructureError(f"{what} failed on replica {self.replica} ({self.client.endpoint}): {detail}", e)
        self.failure = err
        return err

    def reset(self, scenario_id: str, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        """Starts (scenario, seed) on this holder's session, or on a new one if it has none or it is gone.

        A failure of the bridge (:data:`INFRA_AT_RESET`: no reply, nothing listening, the bridge
        exited, overloaded, ...) is recorded and raised as :class:`EpisodeInfrastructureError`, as
        for a step. Other errors are raised as the bridge gave them: ``UnknownScenario`` and the
        like are the caller's mistake; an env fault during reset (``EnvFault``) is the env's."""
        if self._finalizer is not None and not self._finalizer.alive:
            raise RuntimeError("the episode holder is closed")
        self.info, self.observation, self.end, self.failure, self.steps = {}, "", None, None, 0
        sid = self._box[0]
        try:
            try:
                result = self.client.reset(scenario_id, seed=seed, session_id=sid)
            except REOPEN_SESSION:
                if sid is None:
                    raise
                self._box[0] = None
                result = self.client.reset(scenario_id, seed=seed)
        except INFRA_AT_RESET as e:
            assert isinstance(e, (BridgeError, BridgeNotRunning))
            raise self._infra("reset", e) from e
        self._box[0] = str(result["session_id"])
        self.info = dict(result.get("info") or {})
        self.observation = str((result.get("observation") or {}).get("content", ""))
        if self.info.get("end_reason") == "user_stop":  # the simulated user ended it in its opening
            self.finish()
        return self.observation, self.info

    def step(self, action: Any) -> dict[str, Any] | None:
        """One action. Returns the bridge's step result, or None when the episode had already ended
        (the agent acted after the end: nothing ran). A bridge failure is recorded and raised as
        :class:`EpisodeInfrastructureError`."""
        if self.failure is not None:
            raise self.failure
        sid = self._box[0]
        if sid is None or not self.info:
            raise RuntimeError("reset() the episode before stepping it")
        if self.end is not None:
            return None
        try:
            r = self.client.step(sid, action)
        except EpisodeDone:
            return None
        except (BridgeError, BridgeNotRunning) as e:
            raise self._infra("step", e) from e
        self.steps += 1
        self._record(r)
        return r

    def _record(self, r: dict[str, Any]) -> None:
        if r.get("terminated") or r.get("truncated"):
            info = r.get("info") or {}
            self.end = EpisodeEnd(float(r.get("reward", 0.0)), info.get("end_reason"), info.get("error"), info.get("reward_info"))

    def finish(self) -> EpisodeEnd:
        """The episode's end: ``finish`` on the bridge if it is still running, then its scored end."""
        if self.failure is not None:
            raise self.failure
        if self.end is not None:
            return self.end
        sid = self._box[0]
        if sid is None or not self.info:
            raise RuntimeError("reset() the episode before finishing it")
        try:
            self._record(self.client.finish(sid))
        except (BridgeError, BridgeNotRunning) as e:
            raise self._infra("finish", e) from e
        assert self.end is not None
        return self.end

    def close(self) -> None:
        """Closes the session (idempotent); the holder cannot be reset again."""
        self._finalizer()


def prompt_messages(info: dict[str, Any], observation: str, mode: str = "fc") -> list[dict[str, str]]:
    """The agent's opening: ``envscaler.agent.system_prompt`` for this reset's info, then the task
    (or the simulated user's first message) as the user turn, exactly as ``envscaler.Agent`` starts."""
    return [{"role": "system", "content": system_prompt(info, "prompt" if mode == "prompt" else "fc")}, {"role": "user", "content": observation}]


def tools_of(info: dict[str, Any]) -> Sequence[dict[str, Any]]:
    return list(info.get("tools") or [])


#: how many ids a pattern error lists before "and N more"
SHOWN_IDS = 10


def match_scenarios(
    listed: Sequence[dict[str, Any]],
    patterns: str | Sequence[str] = (),
    what: str = "scenario on the bridge",
    *,
    left_out: Sequence[dict[str, Any]] = (),
    left_out_why: str = "",
) -> list[dict[str, Any]]:
    """The scenarios (as ``list_scenarios`` gives them) that ``patterns`` name, in pattern order and
    each once: a pattern is an env id or a glob over scenario ids (none: all); a single str is one
    pattern. A pattern that matches nothing is an error naming it and listing the ids there are (a
    typo must not shrink a dataset silently); if it matches scenarios of ``left_out`` (scenarios
    the caller excluded), the error names them and adds ``left_out_why``."""
    chosen: list[dict[str, Any]] = []
    # a str is a Sequence[str] of its letters: "library-*" must be one pattern, not 9
    for p in [patterns] if isinstance(patterns, str) else (patterns or ["*"]):
        hits = _matching(listed, p)
        if not hits:
            excluded = _matching(left_out, p)
            if excluded:
                ids = ", ".join(str(s["scenario_id"]) for s in excluded[:SHOWN_IDS])
                raise ValueError(f"scenario pattern {p!r} matches no {what}, only scenarios left out ({ids}): {left_out_why}")
            raise ValueError(f"scenario pattern {p!r} matches no {what}; {_available(listed)}")
        chosen += [h for h in hits if h not in chosen]
    return chosen


def _matching(listed: Sequence[dict[str, Any]], pattern: str) -> list[dict[str, Any]]:
    return [s for s in listed if s["env_id"] == pattern or fnmatch.fnmatchcase(s["scenario_id"], pattern)]


def _available(listed: Sequence[dict[str, Any]]) -> str:
    ids = [str(s["scenario_id"]) for s in listed]
    if not ids:
        return "there are none"
    more = f" and {len(ids) - SHOWN_IDS} more" if len(ids) > SHOWN_IDS else ""
    return f"there are {len(ids)}: {', '.join(ids[:SHOWN_IDS])}{more}"
