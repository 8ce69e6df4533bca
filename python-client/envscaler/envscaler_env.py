"""EnvScalerEnv: one bridge session as a ``gymnasium.Env`` with text observations and actions."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym

from .bridge_client import BridgeClient, CurveKeys
from .episode_logic import Episode, StepTuple, check_mode, check_seed, choose_scenario, close_session_quietly, episode_seed, open_client, plain_action, select_scenarios, step_tuple
from .previous_episode import finish_mode, lazy_previous
from .protocol import BridgeError
from .spaces import AgentAction, AnyText
from .transcript import Transcript, snapshot_transcript

__all__ = ["EnvScalerEnv"]


class EnvScalerEnv(gym.Env[str, Any]):
    """One episode at a time of the bridge's scenarios.

    - ``reset(seed=None, options={"scenario_id": ...})`` (or ``reset(scenario_id=...)``): without a
      scenario id one is drawn from ``scenario_ids`` (default: every scenario the bridge lists)
      with ``self.np_random``, so ``reset(seed=123)`` is reproducible. The bridge gets ``seed`` as
      the episode seed; later unseeded resets draw theirs from ``np_random``.
      ``options={"seed": n}`` sets the bridge seed alone. Seeds are 0 <= seed < 2^32 (the
      bridge's range); any other is a ValueError saying so. ``mode="task"|"conversation"``
      draws only scenarios of that mode.
    - A failed ``reset`` (unknown scenario, env fault, lost replica) leaves the env needing a
      reset: ``step``, ``state``, ``finish`` and ``snapshot`` raise ``ResetNeeded`` and nothing
      of the previous episode is reachable (the bridge ended it).
    - ``step(action)``: any action of §4 (text, ``{"name", "arguments"}``, OpenAI tool calls).
      Returns ``(content, reward, terminated, truncated, info)``; info is the bridge's step info
      plus ``info["observation"]`` (role, content, tool_results). The bridge's ``episode_id`` is
      left out of the step info because it differs between otherwise identical episodes and
      gymnasium compares step infos to check determinism; it is in the reset info and in
      ``self.episode_id``.
    - One bridge session serves every episode (``reset`` passes its id); a session the bridge
      closed or lost is replaced transparently at the next reset.
    - Every episode the bridge started is scored, however it stops. The bridge itself truncates
      and scores an episode at the scenario's ``max_steps`` (in the reset info), so no
      ``TimeLimit`` is needed. For a lower cap pass ``max_steps=n`` (also through
      ``gymnasium.make(envscaler.ENV_ID, max_steps=n)``): on the n-th step of an episode the
      bridge has not ended, the env ends it with ``finish`` and returns that step truncated with
      the finish's reward and ``reward_info`` (``info["end_reason"] == "client"``,
      ``info["truncated_by"] == "max_steps"``). A ``TimeLimit`` (``max_episode_steps``) cannot
      do that: the wrapper truncates without telling the env. So a ``reset`` or ``close`` in the
      middle of an episode finishes it first: the recorded episode is scored, though the
      truncated step the trainer saw carried reward 0. A reset does that in the same request
      (``finish_previous``); the finished episode's result is ``info["previous_episode"]``
      (``{"episode_id", "finished", "reward", "end_reason", "reward_info", ...}``). Where the
      bridge has ``reset_finish_previous_later``, the reset does not wait for that scoring: the
      bridge scores the old episode after replying, and ``info["previous_episode"]`` is a
      ``PreviousEpisode`` mapping that fetches the score the first time anything beyond
      ``episode_id``/``finished``/``step``/``state_hash`` is read (one request; none if never read).
    - ``step(None)`` is an unreadable action like any other: an ``invalid_action`` observation.
    """

    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012 (gymnasium.Env declares it so; every env overrides it)

    def __init__(
        self,
        endpoint: str | None = None,
        scenario_ids: Sequence[str] | None = None,
        client: BridgeClient | None = None,
        curve: CurveKeys | None = None,
        timeout: float = 60.0,
        max_steps: int | None = None,
        mode: str | None = None,
    ) -> None:
        super().__init__()
        if max_steps is not None and int(max_steps) < 1:
            raise ValueError("max_steps must be >= 1")
        self.max_steps = None if max_steps is None else int(max_steps)
        self._steps = 0
        self.episode = Episode()
        self.client, self._owns_client = open_client("EnvScalerEnv", endpoint, client, curve, timeout)
        self.observation_space = AnyText()
        self.action_space = AgentAction()
        self.mode = check_mode(mode)
        self._given_scenarios = list(scenario_ids) if scenario_ids is not None else None
        self._scenario_ids = self._given_scenarios if mode is None else None
        #: the episode as the agent saw it (``messages``); a fork starts with a copy of its source's
        self.transcript = Transcript()
        self._snapshot_transcripts: dict[str, Transcript] = {}

    # the bridge's ids of the current episode (kept by the shared state machine)
    session_id = property(lambda self: self.episode.session_id)
    episode_id = property(lambda self: self.episode.episode_id)
    scenario_id = property(lambda self: self.episode.scenario_id)

    @property
    def scenario_ids(self) -> list[str]:
        """The scenarios reset() draws from (fetched from the bridge on first use if not given)."""
        if self._scenario_ids is None:
            self._scenario_ids = select_scenarios(self.client.list_scenarios(), self._given_scenarios, self.mode)
        return self._scenario_ids

    def reset(
        self,
        *,
        seed: int | None = None,
        options: dict[str, Any] | None = None,
        scenario_id: str | None = None,
    ) -> tuple[str, dict[str, Any]]:
        self.episode.check_open()
        if seed is not None:
            check_seed(seed)  # before anything changes: a seed out of range is the caller's error
        super().reset(seed=seed)
        self.transcript = Transcript()  # the old episode's messages go, whether or not this reset succeeds
        options = options or {}
        scenario = str(scenario_id or options.get("scenario_id") or choose_scenario(self.np_random, self.scenario_ids))
        bridge_seed = options.get("seed")
        bridge_seed = episode_seed(seed, self.np_random) if bridge_seed is None else check_seed(bridge_seed, "options['seed']")
        # a live episode is ended and scored by the reset itself (one request): after the reply
        # where the bridge can ("later": info["previous_episode"] fetches the score when read),
        # else in it; a bridge without either gets the finish first, as before
        live = self.episode.live and self.episode.session_id is not None and not self.client.closed
        finish_previous = finish_mode(self.client, live)
        if live and not finish_previous:
            self._finish_quietly()
        result = self.episode.reset(lambda sid: self.client.reset(scenario, seed=bridge_seed, session_id=sid, finish_previous=finish_previous))
        self._steps = 0
        obs, info = self.episode.begin(result, scenario)
        lazy_previous(info, self.client.episode_result)
        self.transcript.start(obs, info)
        self._snapshot_transcripts.clear()  # the bridge drops an episode's snapshots at its reset
        return obs, info

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The episode so far as OpenAI chat messages, as ``Agent(mode="fc")`` sends them to the
        model (``self.transcript.messages("prompt")`` for prompt mode; ``self.transcript.tools``
        are the tools)."""
        return self.transcript.messages()

    def step(self, action: Any) -> StepTuple:
        obs, reward, terminated, truncated, info = self.episode.ended(step_tuple(self.client.step(self.episode.session(), plain_action(action)), drop=("episode_id",)))
        self._steps += 1
        if terminated or truncated:
            self.transcript.record(action, obs, terminated, truncated, info)
            return obs, reward, terminated, truncated, info
        if self.max_steps is not None and self._steps >= self.max_steps:
            # the trainer's time limit is reached before the bridge's own: score the episode now,
            # so the truncated step carries the reward instead of leaving the episode unscored
            _, reward, _, _, end = self.finish()
            info.update({k: v for k, v in end.items() if k in ("end_reason", "reward_info", "error")})
            info["truncated_by"] = "max_steps"
            self.transcript.record(action, obs, False, True, info)
            return obs, reward, False, True, info
        self.transcript.record(action, obs, terminated, truncated, info)
        return obs, reward, terminated, truncated, info

    def finish(self) -> StepTuple:
        """Ends the episode now and scores it (``end_reason: "client"``)."""
        result = step_tuple(self.client.finish(self.episode.session()), drop=("episode_id",))
        self.episode.live = False
        return result

    def _finish_quietly(self) -> None:
        """Scores an episode left running (reset or close mid-episode); the bridge may be gone."""
        if not self.episode.live or self.episode.session_id is None or self.client.closed:
            return
        self.episode.live = False
        try:
            self.client.finish(self.episode.session_id)
        except BridgeError:
            pass

    def state(self) -> dict[str, Any]:
        """The env's current state (the bridge's ``state_json``, parsed)."""
        return self.client.state(self.episode.session())

    # ------------------------------------------------------------------ snapshots and forks

    def snapshot(self) -> str:
        """Freezes the episode now; returns a snapshot id for :meth:`restore` or :meth:`fork`.

        The snapshot lives in the bridge until :meth:`drop_snapshot`, or until the episode it was
        taken from is closed or reset (restoring keeps it)."""
        snapshot_id = str(self.client.snapshot(self.episode.session())["snapshot_id"])
        self._snapshot_transcripts[snapshot_id] = self.transcript.copy()
        return snapshot_id

    def restore(self, snapshot_id: str) -> dict[str, Any]:
        """Puts this env's episode back to a snapshot's point; returns the bridge's info."""
        info = dict(self.client.restore(self.episode.session(), snapshot_id)["info"])
        self.episode.episode_id = info.get("episode_id")
        self.episode.scenario_id = info.get("scenario_id")
        self.episode.live = True
        self.transcript = snapshot_transcript(self._snapshot_transcripts, snapshot_id, info)
        return info

    def fork(self, snapshot_id: str | None = None) -> EnvScalerEnv:
        """A new env whose episode continues from this one now (or from ``snapshot_id``): same
        state, random-number position, clock, step count and conversation. It shares this env's
        client; close it when done (its session is closed, the client is not)."""
        result = self.client.fork(snapshot_id=snapshot_id) if snapshot_id is not None else self.client.fork(self.episode.session())
        child = EnvScalerEnv(client=self.client, scenario_ids=self._scenario_ids)
        child.episode.started(str(result["session_id"]), result["info"])
        child.transcript = snapshot_transcript(self._snapshot_transcripts, snapshot_id, result["info"]) if snapshot_id is not None else self.transcript.copy()
        return child

    def drop_snapshot(self, snapshot_id: str) -> bool:
        self._snapshot_transcripts.pop(snapshot_id, None)
        return self.client.drop_snapshot(snapshot_id)

    def close(self) -> None:
        """Closes the bridge session (and the client if this env made it). Idempotent."""
        if self.episode.closed:
            return
        self._finish_quietly()
        close_session_quietly(self.client, self.episode.close())
        if self._owns_client:
            self.client.close()
        super().close()
