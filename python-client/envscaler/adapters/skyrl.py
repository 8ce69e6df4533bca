"""SkyRL (``skyrl-gym`` >= 0.4): a bridge episode as a ``BaseTextEnv``.

    from envscaler.adapters.skyrl import register, skyrl_rows
    register()                                   # skyrl_gym.make("envscaler", env_config=..., extras=row)
    rows = skyrl_rows(bridge, ["library-*"], seeds=range(4))   # write them to parquet for SkyRL

SkyRL's generator makes one env per trajectory with ``skyrl_gym.make(env_class, env_config=...,
extras=<the dataset row>)``, calls ``init(prompt)``, then ``step(model_text)`` until ``done``, then
``close()``. Here ``init`` starts the row's scenario and seed on the bridge (``extras["extra_info"]``
holds ``scenario_id`` and ``seed``), ``step`` sends the raw model text (the bridge parses Hermes/
Qwen ``<tool_call>`` blocks, ```` ```json ```` fences and bare JSON calls) and returns the tool
results as ``tool`` messages (a simulated user's reply as a ``user`` message), and the episode's
reward on the step that ends it. ``env_config`` carries ``endpoints`` (a list, spread round-robin:
one pool of clients per process) and optionally ``timeout``.

Failures: an infrastructure failure raises :class:`EpisodeInfrastructureError` from ``init`` or
``step`` (SkyRL's generator fails the batch rather than training on a fake 0); an env fault ends
the episode with reward 0 and ``metadata["envscaler_error"]``, counted in ``get_metrics()``.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from contextlib import closing
from typing import Any

from .bridge_episode import BridgeEpisode, EndpointPool, prompt_messages
from .openings import openings

__all__ = ["ENV_CLASS", "EnvScalerTextEnv", "register", "skyrl_rows"]

#: the id ``register()`` gives the env (the dataset's ``env_class``)
ENV_CLASS = "envscaler"

_pools: dict[tuple[str, ...], EndpointPool] = {}
_pools_lock = threading.Lock()


def _pool(endpoints: Sequence[str], timeout: float) -> EndpointPool:
    # one pool per process and bridge: SkyRL makes an env per trajectory, the clients outlive them
    key = tuple(endpoints)
    with _pools_lock:
        pool = _pools.get(key)
        if pool is None or pool.closed:
            pool = _pools[key] = EndpointPool(list(endpoints), timeout=timeout)
        return pool


def _get(config: Any, key: str, default: Any = None) -> Any:
    if config is None:
        return default
    if isinstance(config, Mapping):
        return config.get(key, default)
    return getattr(config, key, default)  # an OmegaConf DictConfig


def _base() -> type:
    try:
        from skyrl_gym.envs.base_text_env import BaseTextEnv
    except Exception:  # skyrl-gym not installed: same methods, plain base
        return object
    return BaseTextEnv if isinstance(BaseTextEnv, type) else object


_Base: type = _base()


class EnvScalerTextEnv(_Base):  # type: ignore[misc]  # the base is chosen at import time
    """One bridge episode per instance (SkyRL makes one per trajectory)."""

    def __init__(self, env_config: Any = None, extras: Mapping[str, Any] | None = None) -> None:
        if _Base is not object:
            super().__init__()
        extras = dict(extras or {})
        info = dict(extras.get("extra_info") or {})
        self.scenario_id = str(info.get("scenario_id") or extras.get("scenario_id") or "")
        if not self.scenario_id:
            raise ValueError("the row needs extra_info.scenario_id (skyrl_rows writes it)")
        seed = info.get("seed", extras.get("seed"))
        self.seed = None if seed is None else int(seed)
        endpoints = _get(env_config, "endpoints")
        if not endpoints:
            raise ValueError("env_config needs endpoints (the bridge's, e.g. Bridge.endpoints)")
        self._episode: BridgeEpisode = _pool([str(e) for e in endpoints], float(_get(env_config, "timeout", 60.0))).episode()
        self.max_turns = 1
        self.turns = 0
        self._faults = 0

    def init(self, prompt: Any = None) -> tuple[list[dict[str, str]], dict[str, Any]]:
        """Starts the episode; returns the agent's opening (system prompt and task) and the reset info.

        The row's own ``prompt`` is ignored: the bridge's opening is the one its scenario and seed give."""
        obs, info = self._episode.reset(self.scenario_id, self.seed)
        self.max_turns = int(info.get("max_steps") or 1)
        return prompt_messages(info, obs), {"tools": info.get("tools", []), "episode_id": info.get("episode_id"), "seed": info.get("seed")}

    def step(self, action: str) -> dict[str, Any]:
        self.turns += 1
        r = self._episode.step(action)  # raises EpisodeInfrastructureError
        if r is None:  # stepped after the end
            over = self._episode.finish()
            return {"observations": [], "reward": over.reward, "done": True, "metadata": {"end_reason": over.end_reason}}
        obs = r.get("observation") or {}
        results = obs.get("tool_results") or []
        # a tool message per call result; a simulated user's reply (or an unreadable action's error) as a user turn
        observations = [{"role": "tool", "content": str(t.get("content", ""))} for t in results] or [{"role": "user", "content": str(obs.get("content", ""))}]
        end = self._episode.end
        metadata: dict[str, Any] = {"step": (r.get("info") or {}).get("step")}
        if end is None:
            return {"observations": observations, "reward": 0.0, "done": False, "metadata": metadata}
        metadata["end_reason"] = end.end_reason
        if end.env_fault:
            self._faults += 1
            metadata["envscaler_error"] = end.error
        return {"observations": [], "reward": end.reward, "done": True, "metadata": metadata}

    def get_metrics(self) -> dict[str, Any]:
        """``steps``, ``env_faults``, ``infra_failures`` (1.0 when the bridge failed the episode) and
        ``success`` (reward 1). An episode the bridge failed has no ``success``: it says nothing about
        the task, and skyrl-gym's default aggregation averages each key over the episodes that have
        it, so the success rate stays over the episodes that were played out."""
        end, failed = self._episode.end, self._episode.failure is not None
        metrics: dict[str, Any] = {"steps": self._episode.steps, "env_faults": self._faults, "infra_failures": float(failed)}
        if not failed:
            metrics["success"] = float(end is not None and end.reward >= 1 - 1e-9)
        return metrics

    def close(self) -> None:
        """Closes the episode's session (SkyRL calls this when the trajectory is done)."""
        self._episode.close()


def register(env_id: str = ENV_CLASS) -> None:
    """Registers :class:`EnvScalerTextEnv` with skyrl-gym under ``env_id`` (idempotent)."""
    import skyrl_gym

    if env_id not in skyrl_gym.registry:
        skyrl_gym.register(id=env_id, entry_point="envscaler.adapters.skyrl:EnvScalerTextEnv")


def skyrl_rows(
    bridge: Any,
    scenarios: str | Sequence[str] = (),
    seeds: Iterable[int] = (0,),
    env_class: str = ENV_CLASS,
    data_source: str = "envscaler",
    include_conversation: bool = False,
) -> list[dict[str, Any]]:
    """Dataset rows in SkyRL's shape: ``prompt`` (the opening, as ``init`` returns it), ``env_class``,
    ``data_source``, ``extra_info`` (``scenario_id``, ``seed``, ``env_id``). ``scenarios``: ids or
    globs (default: all task scenarios); ``include_conversation=True`` adds conversation scenarios
    (they need a bridge with a simulated user, ``serve --user-model``). Each (scenario, seed) is
    reset once to read its opening."""
    with closing(openings(bridge, scenarios, seeds, include_conversation=include_conversation)) as opened:
        return [
            {
                "prompt": o.messages,
                "env_class": env_class,
                "data_source": data_source,
                "extra_info": {"scenario_id": o.scenario_id, "seed": o.seed, "env_id": o.env_id},
            }
            for o in opened
        ]
