"""EnvScalerEnv: one bridge session as a ``gymnasium.Env`` with text observations and actions."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym

from .bridge_client import BridgeClient, CurveKeys
from .episode_logic import REOPEN_SESSION, close_session_quietly, open_client, choose_scenario, episode_seed, plain_action, reset_tuple, step_tuple
from .spaces import AgentAction, AnyText

__all__ = ["EnvScalerEnv"]


class EnvScalerEnv(gym.Env[str, Any]):
    """One episode at a time of the bridge's scenarios.

    - ``reset(seed=None, options={"scenario_id": ...})`` (or ``reset(scenario_id=...)``): without a
      scenario id one is drawn from ``scenario_ids`` (default: every scenario the bridge lists)
      with ``self.np_random``, so ``reset(seed=123)`` is reproducible. The bridge gets ``seed`` as
      the episode seed; later unseeded resets draw theirs from ``np_random``.
      ``options={"seed": n}`` sets the bridge seed alone.
    - ``step(action)``: any action of §4 (text, ``{"name", "arguments"}``, OpenAI tool calls).
      Returns ``(content, reward, terminated, truncated, info)``; info is the bridge's step info
      plus ``info["observation"]`` (role, content, tool_results). The bridge's ``episode_id`` is
      left out of the step info because it differs between otherwise identical episodes and
      gymnasium compares step infos to check determinism; it is in the reset info and in
      ``self.episode_id``.
    - One bridge session serves every episode (``reset`` passes its id); a session the bridge
      closed or lost is replaced transparently at the next reset.
    """

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(
        self,
        endpoint: str | None = None,
        scenario_ids: Sequence[str] | None = None,
        client: BridgeClient | None = None,
        curve: CurveKeys | None = None,
        timeout: float = 60.0,
    ) -> None:
        super().__init__()
        client, self._owns_client = open_client("EnvScalerEnv", endpoint, client, curve, timeout)
        self.client = client
        self.observation_space = AnyText()
        self.action_space = AgentAction()
        self._scenario_ids = list(scenario_ids) if scenario_ids is not None else None
        self.session_id: str | None = None
        self.episode_id: str | None = None
        self.scenario_id: str | None = None
        self._closed = False

    @property
    def scenario_ids(self) -> list[str]:
        """The scenarios reset() draws from (fetched from the bridge on first use if not given)."""
        if self._scenario_ids is None:
            self._scenario_ids = [s["scenario_id"] for s in self.client.list_scenarios()]
        return self._scenario_ids

    def reset(
        self,
        *,
        seed: int | None = None,
        options: dict[str, Any] | None = None,
        scenario_id: str | None = None,
    ) -> tuple[str, dict[str, Any]]:
        if self._closed:
            raise RuntimeError("the env is closed")
        super().reset(seed=seed)
        options = options or {}
        scenario = scenario_id or options.get("scenario_id") or choose_scenario(self.np_random, self.scenario_ids)
        bridge_seed = options.get("seed")
        if bridge_seed is None:
            bridge_seed = episode_seed(seed, self.np_random)
        result = self._reset(str(scenario), int(bridge_seed))
        self.session_id = result["session_id"]
        self.scenario_id = str(scenario)
        obs, info = reset_tuple(result)
        self.episode_id = info.get("episode_id")
        return obs, info

    def _reset(self, scenario: str, seed: int) -> dict[str, Any]:
        if self.session_id is not None:
            try:
                return self.client.reset(scenario, seed=seed, session_id=self.session_id)
            except REOPEN_SESSION:
                self.session_id = None  # reaped, or its replica restarted: start a new session
        return self.client.reset(scenario, seed=seed)

    def step(self, action: Any) -> tuple[str, float, bool, bool, dict[str, Any]]:
        return step_tuple(self.client.step(self._live(), plain_action(action)), drop=("episode_id",))

    def finish(self) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Ends the episode now and scores it (``end_reason: "client"``)."""
        return step_tuple(self.client.finish(self._live()), drop=("episode_id",))

    def state(self) -> dict[str, Any]:
        """The env's current state (the bridge's ``state_json``, parsed)."""
        return self.client.state(self._live())

    # ------------------------------------------------------------------ snapshots and forks

    def snapshot(self) -> str:
        """Freezes the episode now; returns a snapshot id for :meth:`restore` or :meth:`fork`.

        The snapshot lives in the bridge until :meth:`drop_snapshot`, or until the episode it was
        taken from is closed or reset (restoring keeps it)."""
        return str(self.client.snapshot(self._live())["snapshot_id"])

    def restore(self, snapshot_id: str) -> dict[str, Any]:
        """Puts this env's episode back to a snapshot's point; returns the bridge's info."""
        info = dict(self.client.restore(self._live(), snapshot_id)["info"])
        self.episode_id = info.get("episode_id")
        self.scenario_id = info.get("scenario_id")
        return info

    def fork(self, snapshot_id: str | None = None) -> EnvScalerEnv:
        """A new env whose episode continues from this one now (or from ``snapshot_id``): same
        state, random-number position, clock, step count and conversation. It shares this env's
        client; close it when done (its session is closed, the client is not)."""
        result = self.client.fork(snapshot_id=snapshot_id) if snapshot_id is not None else self.client.fork(self._live())
        child = EnvScalerEnv(client=self.client, scenario_ids=self._scenario_ids)
        child.session_id = result["session_id"]
        child.episode_id = result["info"].get("episode_id")
        child.scenario_id = result["info"].get("scenario_id")
        return child

    def drop_snapshot(self, snapshot_id: str) -> bool:
        return self.client.drop_snapshot(snapshot_id)

    def _live(self) -> str:
        if self._closed:
            raise RuntimeError("the env is closed")
        if self.session_id is None:
            raise RuntimeError("call reset() before step()")
        return self.session_id

    def close(self) -> None:
        """Closes the bridge session (and the client if this env made it). Idempotent."""
        if self._closed:
            return
        self._closed = True
        close_session_quietly(self.client, self.session_id)
        self.session_id = None
        if self._owns_client:
            self.client.close()
        super().close()

