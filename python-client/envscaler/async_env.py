"""AsyncEnvScalerEnv: EnvScalerEnv's semantics with ``async`` methods, one session per env object.

Many of them can share one AsyncBridgeClient and run under ``asyncio.gather``: each agent loop
awaits only its own episode's replies.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

import numpy as np
from gymnasium.utils import seeding

from .async_bridge_client import AsyncBridgeClient
from .bridge_client import CurveKeys
from .episode_logic import LOST_SESSION, Episode, StepTuple, check_mode, check_seed, choose_scenario, episode_seed, lost_step, plain_action, select_scenarios, step_tuple
from .fleet_view import as_fleet_view, discover_if_ray, lost_error
from .previous_episode import AsyncPreviousEpisode, scored
from .protocol import BridgeError, BridgeExited, BridgeTimeout, SessionLost, ShuttingDown
from .reachability import BridgeNotRunning, check_reachable
from .transcript import Transcript, snapshot_transcript

__all__ = ["AsyncEnvScalerEnv"]

R = TypeVar("R")


class AsyncEnvScalerEnv:
    """``await env.reset(...)``, ``await env.step(action)``, ``await env.state()``, ``await env.close()``.

    Same observation/info conventions and scenario/seed rules as EnvScalerEnv (``reset(seed=...,
    options={"scenario_id": ...})`` or ``reset(scenario_id=...)``).

    A reset of a live episode ends it in the same request. Where the bridge has
    ``reset_finish_previous_later`` the reset does not wait for its scoring: the bridge scores it
    after replying, and ``info["previous_episode"]`` is an :class:`~envscaler.AsyncPreviousEpisode`:
    ``episode_id``, ``finished``, ``step`` and ``state_hash`` read at once; ``await
    info["previous_episode"].fetch()`` gets the score (one ``episode_result`` request, none if
    never awaited), after which ``reward``, ``reward_info``, ``end_reason``, ... read as from a dict
    (before it they raise ``ScoreNotFetched``: a plain read cannot wait on the event loop it runs
    on). A bridge without the feature scores it in the reset, and ``info["previous_episode"]`` is a
    plain dict.

    ``fleet=`` (an ``envscaler.ray`` fleet or handle, or a FleetView; inside Ray with no endpoint
    the namespace's fleet is found by itself): each reset places the episode on the least loaded
    live replica and every step of it goes there; when that replica or its node dies the step
    returns truncated with ``info["error"]["code"] == "session_lost"`` (no exception), and the
    next reset starts on a live replica.
    """

    def __init__(
        self,
        endpoint: str | None = None,
        scenario_ids: Sequence[str] | None = None,
        client: AsyncBridgeClient | None = None,
        curve: CurveKeys | None = None,
        timeout: float = 60.0,
        fleet: Any = None,
        mode: str | None = None,
    ) -> None:
        self.fleet = as_fleet_view(fleet) if fleet is not None else None
        if self.fleet is None and endpoint is None and client is None:
            self.fleet = discover_if_ray(timeout)
        self.replica: str | None = None  # with a fleet: the uid of the replica this episode is on
        if self.fleet is not None:
            client = None
            self._owns_client = False
        elif client is None:
            if endpoint is None:
                raise ValueError("AsyncEnvScalerEnv needs an endpoint or a client")
            check_reachable(endpoint)  # fail now, naming the endpoint, not at the first request's timeout
            client = AsyncBridgeClient(endpoint, timeout=timeout, curve=curve)
            self._owns_client = True
        else:
            self._owns_client = False
        self._client = client  # with a fleet: the current replica's client, set by _place
        self.mode = check_mode(mode)
        self._given_scenarios = list(scenario_ids) if scenario_ids is not None else None
        self._scenario_ids = self._given_scenarios if mode is None else None
        self.np_random: np.random.Generator = seeding.np_random()[0]
        self.episode = Episode()
        #: the episode as the agent saw it (``messages``); see envscaler.transcript
        self.transcript = Transcript()
        self._snapshot_transcripts: dict[str, Transcript] = {}  # the conversation up to each snapshot this env took

    # the bridge's ids of the current episode (kept by the shared state machine)
    session_id = property(lambda self: self.episode.session_id)
    episode_id = property(lambda self: self.episode.episode_id)
    scenario_id = property(lambda self: self.episode.scenario_id)

    @property
    def client(self) -> AsyncBridgeClient:
        if self._client is None:  # a fleet env before its first placement
            self._place()
        assert self._client is not None
        return self._client

    async def scenario_ids(self) -> list[str]:
        if self._scenario_ids is None:
            self._scenario_ids = select_scenarios(await self.client.list_scenarios(), self._given_scenarios, self.mode)
        return self._scenario_ids

    async def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None, scenario_id: str | None = None) -> tuple[str, dict[str, Any]]:
        self.episode.check_open()
        if seed is not None:
            check_seed(seed)
            self.np_random, _ = seeding.np_random(int(seed))
        options = options or {}
        scenario = scenario_id or options.get("scenario_id")
        if scenario is None:
            scenario = choose_scenario(self.np_random, await self.scenario_ids())
        bridge_seed = options.get("seed")
        bridge_seed = episode_seed(seed, self.np_random) if bridge_seed is None else check_seed(bridge_seed, "options['seed']")
        live = self.episode.live
        self.transcript = Transcript()  # the old episode's messages go, whether or not this reset succeeds
        self._snapshot_transcripts.clear()  # the bridge drops an episode's snapshots at its reset

        async def send(sid: str | None) -> dict[str, Any]:
            if self.fleet is not None:
                self._place()  # keeps a live session's replica; a session that is gone moves
                sid = self.episode.session_id
            # a running episode is ended by this same reset (info["previous_episode"]) and scored
            # after the reply where the bridge can ("later"), else in it
            finish_previous: bool | str = live and sid is not None
            if finish_previous and await self.client.supports("reset_finish_previous_later"):
                finish_previous = "later"
            elif finish_previous:
                finish_previous = await self.client.supports("reset_finish_previous")
            return await self._call(self.client.reset(str(scenario), seed=bridge_seed, session_id=sid, finish_previous=finish_previous))

        obs, info = self.episode.begin(await self.episode.areset(send), str(scenario))
        previous = info.get("previous_episode")
        if isinstance(previous, Mapping) and previous.get("pending"):
            info["previous_episode"] = AsyncPreviousEpisode(previous, self._result_fetcher())
        elif isinstance(previous, Mapping):
            info["previous_episode"] = scored(previous)
        self.transcript.start(obs, info)
        return obs, info

    def _result_fetcher(self) -> Callable[[str], Awaitable[dict[str, Any]]]:
        """``episode_result`` on the replica that served the reset just made (the score is kept
        there), even if this env's later episodes move to another (a fleet)."""
        client, replica, fleet = self.client, self.replica, self.fleet

        async def fetch(episode_id: str) -> dict[str, Any]:
            if fleet is None or replica is None:
                return await client.episode_result(episode_id)
            return await fleet.await_reply(replica, client.episode_result(episode_id))

        return fetch

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The episode so far as OpenAI chat messages, as ``Agent(mode="fc")`` sends them to the
        model (``self.transcript.messages("prompt")`` for prompt mode)."""
        return self.transcript.messages()

    async def step(self, action: Any) -> StepTuple:
        sid = self.episode.session()
        result = self.episode.ended(await self._ending(lambda: self.client.step(sid, plain_action(action))))
        obs, _, terminated, truncated, info = result
        self.transcript.record(action, obs, terminated, truncated, info)
        return result

    async def finish(self) -> StepTuple:
        sid = self.episode.session()
        result = await self._ending(lambda: self.client.finish(sid))
        self.episode.live = False
        return result

    async def state(self) -> dict[str, Any]:
        return await self._call(self.client.state(self.episode.session()))

    # ------------------------------------------------------------------ snapshots and forks (as EnvScalerEnv's)

    async def snapshot(self) -> str:
        """Freezes the episode now; returns a snapshot id for :meth:`restore` or :meth:`fork`.

        The snapshot lives in the bridge until :meth:`drop_snapshot`, or until the episode it was
        taken from is closed or reset (restoring keeps it)."""
        snapshot_id = str((await self._call(self.client.snapshot(self.episode.session())))["snapshot_id"])
        self._snapshot_transcripts[snapshot_id] = self.transcript.copy()
        return snapshot_id

    async def restore(self, snapshot_id: str) -> dict[str, Any]:
        """Puts this env's episode back to a snapshot's point; returns the bridge's info."""
        info = dict((await self._call(self.client.restore(self.episode.session(), snapshot_id)))["info"])
        self.episode.episode_id = info.get("episode_id")
        self.episode.scenario_id = info.get("scenario_id")
        self.episode.live = True
        self.transcript = snapshot_transcript(self._snapshot_transcripts, snapshot_id, info)
        return info

    async def fork(self, snapshot_id: str | None = None, *, client: AsyncBridgeClient | None = None) -> AsyncEnvScalerEnv:
        """A new env whose episode continues from this one now (or from ``snapshot_id``): same
        state, random-number position, clock, step count and conversation. It shares this env's
        client (with a fleet: its replica); close it when done (its session is closed, the client
        is not).

        ``client=`` (another replica's AsyncBridgeClient) puts the fork on that replica instead:
        the episode (or snapshot) is exported here, imported there, forked there and the import
        dropped, so a group can be spread over replicas (``asyncio.gather`` of forks, one client
        each). Its forks continue byte-identically to forks made here."""
        if client is None or client is self._client:
            result = await self._call(self.client.fork(snapshot_id=snapshot_id) if snapshot_id is not None else self.client.fork(self.episode.session()))
            child = AsyncEnvScalerEnv(client=self.client, scenario_ids=self._scenario_ids)
            if self.fleet is not None and self.replica is not None:
                child.fleet, child.replica = self.fleet, self.replica
                self.fleet.placed[self.replica] += 1
        else:
            exported = await self._call(self.client.export_snapshot(snapshot_id=snapshot_id) if snapshot_id is not None else self.client.export_snapshot(self.episode.session()))
            held = (await client.import_snapshot(exported["blob"]))["snapshot_id"]
            try:
                result = await client.fork(snapshot_id=held)
            finally:
                await client.drop_snapshot(held)
            child = AsyncEnvScalerEnv(client=client, scenario_ids=self._scenario_ids)
        child.episode.started(str(result["session_id"]), result["info"])
        child.transcript = snapshot_transcript(self._snapshot_transcripts, snapshot_id, result["info"]) if snapshot_id is not None else self.transcript.copy()
        return child

    async def drop_snapshot(self, snapshot_id: str) -> bool:
        self._snapshot_transcripts.pop(snapshot_id, None)
        return await self._call(self.client.drop_snapshot(snapshot_id))

    # ------------------------------------------------------------------ fleet placement

    def _place(self) -> None:
        """Keeps the session's replica while it lives; otherwise picks the least loaded one."""
        assert self.fleet is not None
        self.fleet.refresh()
        if self.replica is not None and self.episode.session_id is not None and self.fleet.alive(self.replica):
            return
        if self.replica is not None and self.fleet.placed[self.replica] > 0:
            self.fleet.placed[self.replica] -= 1
        self.episode.forget()
        self.replica = self.fleet.pick()
        self.fleet.placed[self.replica] += 1
        self._client = self.fleet.async_client(self.replica)

    async def _call(self, awaitable: Awaitable[R]) -> R:
        if self.fleet is None or self.replica is None:
            return await awaitable
        return await self.fleet.await_reply(self.replica, awaitable)

    async def _ending(self, request: Callable[[], Awaitable[dict[str, Any]]]) -> StepTuple:
        if self.fleet is None:
            try:
                return step_tuple(await request(), drop=("episode_id",))
            except (SessionLost, ShuttingDown, BridgeTimeout, BridgeExited, BridgeNotRunning) as e:
                # the replica died, restarted, is stopping or stopped answering mid-step (or the
                # launched bridge a watched client serves exited): the episode ends here, and the
                # next reset opens a new session
                self.episode.forget()
                return lost_step("session_lost", str(e))
        self.fleet.refresh()
        try:
            if self.replica is None or not self.fleet.alive(self.replica):
                raise lost_error(None, str(self.replica))
            return step_tuple(await self._call(request()), drop=("episode_id",))
        except (*LOST_SESSION, ShuttingDown, BridgeTimeout, BridgeNotRunning) as e:
            # the episode died with its replica (or node; a replica shutting down goes the same
            # way): it ends here, and the next reset moves to a live replica
            self.episode.forget()
            return lost_step("session_lost", str(e))

    async def close(self) -> None:
        if self.episode.closed:
            return
        sid = self.episode.close()
        if self.fleet is not None and self.replica is not None and self.fleet.placed[self.replica] > 0:
            self.fleet.placed[self.replica] -= 1
        client = self._client
        if sid is not None and client is not None and not client.closed:
            try:
                await client.close_session(sid, timeout=min(5.0, client.timeout))
            except BridgeError:
                pass
        if self._owns_client and client is not None:
            await client.close()
