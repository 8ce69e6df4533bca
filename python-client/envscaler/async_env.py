"""AsyncEnvScalerEnv: EnvScalerEnv's semantics with ``async`` methods, one session per env object.

Many of them can share one AsyncBridgeClient and run under ``asyncio.gather``: each agent loop
awaits only its own episode's replies.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from gymnasium.utils import seeding

from .async_bridge_client import AsyncBridgeClient
from .bridge_client import CurveKeys
from .episode_logic import REOPEN_SESSION, choose_scenario, episode_seed, plain_action, reset_tuple, step_tuple
from .protocol import BridgeError
from .reachability import check_reachable

__all__ = ["AsyncEnvScalerEnv"]


class AsyncEnvScalerEnv:
    """``await env.reset(...)``, ``await env.step(action)``, ``await env.state()``, ``await env.close()``.

    Same observation/info conventions and scenario/seed rules as EnvScalerEnv (``reset(seed=...,
    options={"scenario_id": ...})`` or ``reset(scenario_id=...)``).
    """

    def __init__(
        self,
        endpoint: str | None = None,
        scenario_ids: Sequence[str] | None = None,
        client: AsyncBridgeClient | None = None,
        curve: CurveKeys | None = None,
        timeout: float = 60.0,
    ) -> None:
        if client is None:
            if endpoint is None:
                raise ValueError("AsyncEnvScalerEnv needs an endpoint or a client")
            check_reachable(endpoint)  # fail now, naming the endpoint, not at the first request's timeout
            client = AsyncBridgeClient(endpoint, timeout=timeout, curve=curve)
            self._owns_client = True
        else:
            self._owns_client = False
        self.client = client
        self._scenario_ids = list(scenario_ids) if scenario_ids is not None else None
        self.np_random: np.random.Generator = seeding.np_random()[0]
        self.session_id: str | None = None
        self.episode_id: str | None = None
        self.scenario_id: str | None = None
        self._closed = False

    async def scenario_ids(self) -> list[str]:
        if self._scenario_ids is None:
            self._scenario_ids = [s["scenario_id"] for s in await self.client.list_scenarios()]
        return self._scenario_ids

    async def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None, scenario_id: str | None = None) -> tuple[str, dict[str, Any]]:
        if self._closed:
            raise RuntimeError("the env is closed")
        if seed is not None:
            self.np_random, _ = seeding.np_random(int(seed))
        options = options or {}
        scenario = scenario_id or options.get("scenario_id")
        if scenario is None:
            scenario = choose_scenario(self.np_random, await self.scenario_ids())
        bridge_seed = options.get("seed")
        if bridge_seed is None:
            bridge_seed = episode_seed(seed, self.np_random)
        result = None
        if self.session_id is not None:
            try:
                result = await self.client.reset(str(scenario), seed=int(bridge_seed), session_id=self.session_id)
            except REOPEN_SESSION:
                self.session_id = None
        if result is None:
            result = await self.client.reset(str(scenario), seed=int(bridge_seed))
        self.session_id = result["session_id"]
        self.scenario_id = str(scenario)
        obs, info = reset_tuple(result)
        self.episode_id = info.get("episode_id")
        return obs, info

    async def step(self, action: Any) -> tuple[str, float, bool, bool, dict[str, Any]]:
        return step_tuple(await self.client.step(self._live(), plain_action(action)), drop=("episode_id",))

    async def finish(self) -> tuple[str, float, bool, bool, dict[str, Any]]:
        return step_tuple(await self.client.finish(self._live()), drop=("episode_id",))

    async def state(self) -> dict[str, Any]:
        return await self.client.state(self._live())

    def _live(self) -> str:
        if self._closed:
            raise RuntimeError("the env is closed")
        if self.session_id is None:
            raise RuntimeError("call reset() before step()")
        return self.session_id

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self.session_id is not None and not self.client.closed:
            try:
                await self.client.close_session(self.session_id, timeout=min(5.0, self.client.timeout))
            except BridgeError:
                pass
        self.session_id = None
        if self._owns_client:
            await self.client.close()
