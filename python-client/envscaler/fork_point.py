"""ForkPoint: a point in an episode to continue from, with the conversation that led there.

GRPO from a mid-episode state: play an episode k steps, freeze it, then run the agent N times
from that point. The env's side of the point is a snapshot (or a live session) on one replica;
the agent's side is the conversation so far, which the bridge does not hand back (a fork's info
carries the state, not the messages). A ForkPoint keeps both:

    env = envscaler.EnvScalerEnv(bridge.endpoints[0])
    env.reset(scenario_id="library-1", seed=0)
    env.step(first_action)
    point = envscaler.fork_point(env)                      # snapshot + env.transcript, now
    group = await envscaler.rollout(bridge, policy, start_from=point, trials=8)
    env.drop_snapshot(point.snapshot_id)                   # or let the source's reset/close drop it

``rollout(start_from=...)`` forks the snapshot once per trial and runs ``Agent.run(env,
prefix=point.transcript)`` on each fork, the trials dealt over every replica it was given (the
snapshot is exported once and imported once on each other replica: a group of 64 does not run on
one replica's thread while the others idle); :meth:`ForkPoint.open` is that fork for a loop of your own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .transcript import Transcript

if TYPE_CHECKING:
    from collections.abc import Sequence

    from .async_bridge_client import AsyncBridgeClient
    from .async_env import AsyncEnvScalerEnv
    from .envscaler_env import EnvScalerEnv

__all__ = ["ForkPoint", "afork_point", "fork_point"]


@dataclass
class ForkPoint:
    """Where to fork from (``snapshot_id``, or a live ``session_id``: exactly one), on which
    replica (``endpoint``), and the conversation up to there (``transcript``)."""

    transcript: Transcript
    endpoint: str
    snapshot_id: str | None = None
    session_id: str | None = None
    #: the point exported as bytes (once, when first wanted on another replica)
    _blob: bytes | None = field(default=None, repr=False, compare=False)
    #: endpoint -> the id of this point imported there (see :meth:`stage`)
    _staged: dict[str, str] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        if (self.snapshot_id is None) == (self.session_id is None):
            raise ValueError("a ForkPoint has exactly one of snapshot_id and session_id")

    async def _export(self, source: AsyncBridgeClient | None) -> bytes:
        if self._blob is None:
            if source is None or source.endpoint != self.endpoint:
                raise ValueError(f"this point lives on {self.endpoint}: forking it on another replica needs source=, a client of {self.endpoint}, to export it")
            exported = await (source.export_snapshot(snapshot_id=self.snapshot_id) if self.snapshot_id is not None else source.export_snapshot(self.session_id))
            self._blob = bytes(exported["blob"])
        return self._blob

    async def stage(self, client: AsyncBridgeClient, source: AsyncBridgeClient | None = None) -> None:
        """Imports this point on ``client``'s replica once, so that forks there (:meth:`open`) need
        no export or import each; ``source`` reaches ``endpoint`` (the point is exported from there
        the first time). :meth:`release` drops what was staged. Nothing to do on the point's own replica."""
        if client.endpoint != self.endpoint and client.endpoint not in self._staged:
            blob = await self._export(source)
            self._staged[client.endpoint] = str((await client.import_snapshot(blob))["snapshot_id"])

    async def release(self, clients: Sequence[AsyncBridgeClient]) -> None:
        """Drops the imports :meth:`stage` made on these clients' replicas."""
        for c in clients:
            held = self._staged.pop(c.endpoint, None)
            if held is not None:
                await c.drop_snapshot(held)

    async def open(self, client: AsyncBridgeClient, source: AsyncBridgeClient | None = None) -> AsyncEnvScalerEnv:
        """A new async env holding a fork of this point, on ``client``'s replica. On another replica
        than ``endpoint``'s the point is forked from its import there (:meth:`stage`d, or imported for
        this fork and dropped after: ``source`` must then reach ``endpoint``); the fork continues
        byte-identically to one made on the point's own replica. Its ``transcript`` is a copy of
        this point's; close it when done."""
        from .async_env import AsyncEnvScalerEnv

        if client.endpoint == self.endpoint:
            result = await (client.fork(snapshot_id=self.snapshot_id) if self.snapshot_id is not None else client.fork(self.session_id))
        elif client.endpoint in self._staged:
            result = await client.fork(snapshot_id=self._staged[client.endpoint])
        else:
            held = str((await client.import_snapshot(await self._export(source)))["snapshot_id"])
            try:
                result = await client.fork(snapshot_id=held)
            finally:
                await client.drop_snapshot(held)
        env = AsyncEnvScalerEnv(client=client)
        env.episode.started(str(result["session_id"]), result["info"])
        env.transcript = self.transcript.copy()
        return env


def _endpoint(env: Any) -> str:
    return str(env.client.endpoint)


def fork_point(env: EnvScalerEnv, snapshot: bool = True) -> ForkPoint:
    """The point ``env``'s episode is at now: a snapshot of it (``snapshot=False``: its live
    session, which must then not move on before the forks are made) and a copy of its transcript."""
    if snapshot:
        return ForkPoint(transcript=env.transcript.copy(), endpoint=_endpoint(env), snapshot_id=env.snapshot())
    return ForkPoint(transcript=env.transcript.copy(), endpoint=_endpoint(env), session_id=env.episode.session())


async def afork_point(env: AsyncEnvScalerEnv, snapshot: bool = True) -> ForkPoint:
    """:func:`fork_point` for an ``AsyncEnvScalerEnv``."""
    sid = env.episode.session()
    transcript = env.transcript.copy()
    if snapshot:
        result = await env.client.snapshot(sid)
        return ForkPoint(transcript=transcript, endpoint=_endpoint(env), snapshot_id=str(result["snapshot_id"]))
    return ForkPoint(transcript=transcript, endpoint=_endpoint(env), session_id=sid)
