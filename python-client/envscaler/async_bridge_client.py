"""AsyncBridgeClient: the asyncio client, for agent loops that step many episodes independently.

One DEALER socket, any number of requests in flight from any number of coroutines; one reader
task hands each reply to the coroutine waiting for its id. The bridge runs requests for
different sessions concurrently, so N episodes cost about one round trip per step, not N.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Callable, Iterable
from typing import Any

import zmq
import zmq.asyncio

from .bridge_client import PROBE_AFTER_S, WATCH_EVERY_S, CurveKeys, _fork_fields, _reset_fields, batch_fields, connect_dealer, parse_batch
from .opening_cache import FEATURE as OPENINGS_FEATURE
from .opening_cache import OpeningCache
from .protocol import PROTOCOL_VERSION, BridgeError, BridgeExited, BridgeTimeout, CodecError, error_for, expand_reply, packb, unpackb
from .reachability import BridgeNotRunning, check_reachable

__all__ = ["AsyncBridgeClient"]

_shared: dict[str, zmq.asyncio.Context] = {}


def _context() -> zmq.asyncio.Context:
    # an asyncio view of the process's one libzmq context (sync and async sockets share its I/O thread)
    ctx = _shared.get("ctx")
    if ctx is None or ctx.closed:
        ctx = _shared["ctx"] = zmq.asyncio.Context.shadow(zmq.Context.instance().underlying)
    return ctx


class AsyncBridgeClient:
    """``await client.step(session_id, action)`` etc.; the same operations as BridgeClient.

    Use it from one event loop (the reader task lives there). ``timeout`` bounds each request;
    after a timeout the client goes on working and the late reply is dropped by id.

    ``gone``: as for ``BridgeClient``: says why the bridge can no longer answer (``Bridge.exited``
    of a launched bridge), or None while it runs. Asked before each request is sent and every
    ``WATCH_EVERY_S`` (0.5 s) while its reply is late; once it answers, the request raises
    :class:`~envscaler.BridgeExited` instead of waiting out ``timeout``. ``bridge.async_client(i)``
    passes it; a client made from an endpoint alone has no process to watch.
    """

    def __init__(
        self,
        endpoint: str,
        timeout: float = 60.0,
        curve: CurveKeys | None = None,
        context: zmq.asyncio.Context | None = None,
        gone: Callable[[], str | None] | None = None,
    ) -> None:
        self.endpoint = endpoint
        self.timeout = float(timeout)
        self.gone = gone
        self._socket = connect_dealer((context or _context()).socket(zmq.DEALER), endpoint, curve)
        self.closed = False
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._reader: asyncio.Task[None] | None = None
        self.max_in_flight = 0  # the most requests that were awaiting replies at once
        self.discarded = 0
        self._heard = False  # a reply came from the endpoint (see BridgeClient: the probe of a silent first contact)
        self._hello: dict[str, Any] | None = None  # the last hello's result (features, limits)
        self._openings = OpeningCache()  # reset openings kept, named in later resets (feature reset_known_opening)
        self._name_openings = False  # the bridge's hello lists that feature

    async def __aenter__(self) -> AsyncBridgeClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"AsyncBridgeClient({self.endpoint!r})"

    async def _read_loop(self) -> None:
        while True:
            frames = await self._socket.recv_multipart()
            try:
                reply = self._openings.incoming(expand_reply(unpackb(frames[-1] if frames else b"")))
            except CodecError:
                self.discarded += 1
                continue
            self._heard = True
            rid = reply.get("id") if isinstance(reply, dict) else None
            fut = self._pending.pop(rid, None) if type(rid) is int else None
            if fut is None or fut.done():
                self.discarded += 1  # late (timed out) or not ours
            else:
                fut.set_result(reply)

    def _ensure_reader(self) -> None:
        if self._reader is None or self._reader.done():
            self._reader = asyncio.get_running_loop().create_task(self._read_loop(), name=f"envscaler-reader-{self.endpoint}")

    async def request(self, op: str, *, timeout: float | None = None, **fields: Any) -> dict[str, Any]:
        """Sends one request and awaits its ``result``; raises its BridgeError, BridgeTimeout, or
        BridgeExited (a watched bridge's process exited: see ``gone``)."""
        if self.closed:
            raise RuntimeError("the AsyncBridgeClient is closed")
        self._check_gone()  # nothing will answer: say so now, not after the timeout
        self._ensure_reader()
        rid = next(self._ids)
        if op == "reset" and self._name_openings:
            fields = self._openings.outgoing(fields)
        frame = packb({"v": PROTOCOL_VERSION, "id": rid, "op": op, **fields})
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[rid] = fut
        self.max_in_flight = max(self.max_in_flight, len(self._pending))
        t = self.timeout if timeout is None else timeout
        try:
            await self._socket.send(frame)
            if self._heard and self.gone is None:
                reply = await asyncio.wait_for(fut, t)  # the common case: nothing to check while waiting
            else:
                reply = await self._watched(fut, op, t)
        except asyncio.TimeoutError:
            raise BridgeTimeout(f"no reply to {op} from {self.endpoint} within {t:g} s") from None
        finally:
            self._pending.pop(rid, None)
        if reply.get("ok") is True:
            result = reply.get("result")
            return result if isinstance(result, dict) else {}
        error = reply.get("error") or {}
        raise error_for(str(error.get("code", "internal_error")), str(error.get("message", "")))

    async def _watched(self, fut: asyncio.Future[dict[str, Any]], op: str, t: float) -> dict[str, Any]:
        """Awaits ``fut`` for up to ``t`` seconds, checking meanwhile what ``BridgeClient._wait``
        checks: at first contact, after ``PROBE_AFTER_S`` of silence, whether anything listens at
        the endpoint (BridgeNotRunning); with ``gone``, every ``WATCH_EVERY_S`` whether the
        bridge's process exited (BridgeExited)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + t
        probe_at = loop.time() + PROBE_AFTER_S if not self._heard and t > PROBE_AFTER_S else None
        while True:
            now = loop.time()
            until = deadline if probe_at is None else min(deadline, probe_at)
            if self.gone is not None:
                until = min(until, now + WATCH_EVERY_S)
            if until > now:
                await asyncio.wait({fut}, timeout=until - now)  # never cancels fut
            if fut.done():
                return fut.result()
            self._check_gone()
            now = loop.time()
            if probe_at is not None and probe_at <= now < deadline:
                probe_at = None
                try:
                    await asyncio.to_thread(check_reachable, self.endpoint)
                except BridgeNotRunning:
                    self._check_gone()  # a launched bridge that exited says so, not "start one with serve"
                    raise
                continue
            if now >= deadline:
                raise BridgeTimeout(f"no reply to {op} from {self.endpoint} within {t:g} s")

    def _check_gone(self) -> None:
        why = self.gone() if self.gone is not None else None
        if why:
            raise BridgeExited(f"{why}: no reply will come from {self.endpoint}")

    # ------------------------------------------------------------------ operations (§4)

    async def hello(self, client: str | None = "envscaler-python-async", **kw: Any) -> dict[str, Any]:
        fields: dict[str, Any] = {"client": client} if client is not None else {}
        self._hello = await self.request("hello", **fields, **kw)
        self._name_openings = OPENINGS_FEATURE in (self._hello.get("features") or ())
        return self._hello

    async def supports(self, feature: str) -> bool:
        """Whether the bridge lists ``feature`` in ``hello``'s ``features`` (asked once per client)."""
        hello = self._hello if self._hello is not None else await self.hello()
        return feature in (hello.get("features") or ())

    async def list_envs(self, **kw: Any) -> list[dict[str, Any]]:
        return list((await self.request("list_envs", **kw))["envs"])

    async def list_scenarios(self, env_id: str | None = None, **kw: Any) -> list[dict[str, Any]]:
        fields: dict[str, Any] = {"env_id": env_id} if env_id is not None else {}
        return list((await self.request("list_scenarios", **fields, **kw))["scenarios"])

    async def reset(self, scenario_id: str, seed: int | None = None, session_id: str | None = None, finish_previous: bool | str = False, **kw: Any) -> dict[str, Any]:
        return await self.request("reset", **_reset_fields(scenario_id, seed, session_id, finish_previous), **kw)

    async def episode_result(self, episode_id: str, **kw: Any) -> dict[str, Any]:
        """See ``BridgeClient.episode_result``."""
        return await self.request("episode_result", episode_id=episode_id, **kw)

    async def step(self, session_id: str, action: Any, **kw: Any) -> dict[str, Any]:
        return await self.request("step", session_id=session_id, action=action, **kw)

    async def step_batch(self, steps: Iterable[tuple[str, Any]], **kw: Any) -> list[dict[str, Any] | BridgeError]:
        return parse_batch(await self.request("step_batch", steps=batch_fields(steps), **kw))

    async def finish(self, session_id: str, **kw: Any) -> dict[str, Any]:
        return await self.request("finish", session_id=session_id, **kw)

    async def state(self, session_id: str, **kw: Any) -> dict[str, Any]:
        state: dict[str, Any] = json.loads((await self.request("state", session_id=session_id, **kw))["state_json"])
        return state

    async def close_session(self, session_id: str, **kw: Any) -> bool:
        return bool((await self.request("close", session_id=session_id, **kw)).get("closed"))

    async def snapshot(self, session_id: str, **kw: Any) -> dict[str, Any]:
        return await self.request("snapshot", session_id=session_id, **kw)

    async def fork(self, session_id: str | None = None, snapshot_id: str | None = None, **kw: Any) -> dict[str, Any]:
        return await self.request("fork", **_fork_fields(session_id, snapshot_id), **kw)

    async def restore(self, session_id: str, snapshot_id: str, **kw: Any) -> dict[str, Any]:
        return await self.request("restore", session_id=session_id, snapshot_id=snapshot_id, **kw)

    async def drop_snapshot(self, snapshot_id: str, **kw: Any) -> bool:
        return bool((await self.request("drop_snapshot", snapshot_id=snapshot_id, **kw))["dropped"])

    async def export_snapshot(self, session_id: str | None = None, snapshot_id: str | None = None, **kw: Any) -> dict[str, Any]:
        return await self.request("export_snapshot", **_fork_fields(session_id, snapshot_id), **kw)

    async def import_snapshot(self, blob: bytes, **kw: Any) -> dict[str, Any]:
        return await self.request("import_snapshot", blob=bytes(blob), **kw)

    async def stats(self, **kw: Any) -> dict[str, Any]:
        return await self.request("stats", **kw)

    async def close(self) -> None:
        """Stops the reader, fails pending requests and closes the socket (idempotent)."""
        if self.closed:
            return
        self.closed = True
        if self._reader is not None and not self._reader.done():
            self._reader.cancel()
            try:
                await self._reader
            except (asyncio.CancelledError, Exception):
                pass
        for fut in self._pending.values():
            if not fut.done():
                fut.set_exception(BridgeTimeout("the client was closed"))
        self._pending.clear()
        self._socket.close(linger=0)
