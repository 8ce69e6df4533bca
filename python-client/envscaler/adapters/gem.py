"""EnvScalerGemEnv: a bridge episode behind GEM's env API (``gem.core.Env``).

``reset(seed=None) -> (observation: str, info)``, ``step(action: str) -> (observation, reward,
terminated, truncated, info)``. When GEM (the ``gem-llm`` distribution) is importable the class
subclasses ``gem.core.Env`` so GEM's wrappers and vector envs accept it; otherwise it is a plain
class with the same methods. GEM is not a dependency of this package.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gymnasium.utils import seeding

from ..bridge_client import BridgeClient, CurveKeys
from ..episode_logic import Episode, StepTuple, check_mode, choose_scenario, close_session_quietly, episode_seed, open_client, select_scenarios, step_tuple
from ..previous_episode import finish_mode, lazy_previous
from .roll import format_env_introduction

__all__ = ["GEM_AVAILABLE", "EnvScalerGemEnv"]


def _gem_base() -> type:
    try:
        # `gem` on PyPI is also an unrelated math library: only gem-llm has gem.core.Env
        from gem.core import Env
    except Exception:
        return object
    return Env if isinstance(Env, type) else object


_Base: type = _gem_base()
GEM_AVAILABLE = _Base is not object


class EnvScalerGemEnv(_Base):  # type: ignore[misc]  # the base is chosen at import time
    """GEM-style text env: the observation is the message text (task, tool result or user reply).

    The reset info carries ``env_introduction`` (formatted like the original EnvScaler envs),
    ``tools`` (OpenAI function schemas) and the bridge's reset info; step infos are the bridge's.
    """

    def __init__(
        self,
        endpoint: str | None = None,
        scenario_ids: Sequence[str] | None = None,
        client: BridgeClient | None = None,
        curve: CurveKeys | None = None,
        timeout: float = 60.0,
        seed: int | None = None,
        mode: str | None = None,
    ) -> None:
        """``seed`` (GEM's ``make``/``make_vec`` pass one to every constructor) seeds the scenario
        draw and the bridge seeds of resets called without a seed of their own. ``mode="task"|
        "conversation"`` plays only scenarios of that mode."""
        if _Base is not object:
            super().__init__()
        self.client, self._owns_client = open_client("EnvScalerGemEnv", endpoint, client, curve, timeout)
        check_mode(mode)
        listed = self.client.list_scenarios() if scenario_ids is None or mode is not None else []
        self.scenario_ids = select_scenarios(listed, scenario_ids, mode)
        self._np_random, self._np_random_seed = seeding.np_random(None if seed is None else int(seed))
        self.episode = Episode()

    # the bridge's ids of the current episode (kept by the shared state machine)
    session_id = property(lambda self: self.episode.session_id)
    scenario_id = property(lambda self: self.episode.scenario_id)

    def reset(self, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        self.episode.check_open()
        if seed is not None:
            self._np_random, self._np_random_seed = seeding.np_random(int(seed))
        scenario = choose_scenario(self._np_random, self.scenario_ids)
        bridge_seed = episode_seed(seed, self._np_random)
        # a live episode is ended by this reset and scored after the reply where the bridge can
        # (info["previous_episode"] fetches the score when read)
        finish_previous = finish_mode(self.client, self.episode.live and self.episode.session_id is not None)
        result = self.episode.reset(lambda sid: self.client.reset(scenario, seed=bridge_seed, session_id=sid, finish_previous=finish_previous))
        obs, info = self.episode.begin(result, scenario)
        lazy_previous(info, self.client.episode_result)
        info["env_introduction"] = format_env_introduction(info.get("introduction", ""), info.get("rules", []))
        return obs, info

    def step(self, action: str) -> StepTuple:
        return self.episode.ended(step_tuple(self.client.step(self.episode.session(), action)))

    def state(self) -> dict[str, Any]:
        """The env's current state (the bridge's ``state_json``, parsed); ResetNeeded without an episode."""
        return self.client.state(self.episode.session())

    def sample_random_action(self) -> str:
        """A legal action: a short text reply (which ends a task episode)."""
        return "I am done."

    def close(self) -> None:
        if self.episode.closed:
            return
        close_session_quietly(self.client, self.episode.close())
        if self._owns_client:
            self.client.close()
