"""FleetView: the client's picture of a fleet of bridge replicas whose membership changes.

No Ray here (the core package never imports it): a view pulls snapshots from a *source*, a
callable ``source(since_version)`` returning ``(version, replicas, client_keys)`` or ``None``
when nothing changed since ``since_version`` (versions are opaque, compared for equality). ``envscaler.ray`` supplies a source that asks the
fleet's registry actor; a fixed list works too (``FleetView.static``).

A replica entry is a dict with at least ``uid`` (one serve process: a restarted process gets a
new uid even on the same port, because its server key and its sessions are new), ``endpoint``
and ``server_public_key``; the fleet adds ``node_id``, ``replica``, ``generation`` and the
``sessions`` it last saw open there. ``client_keys`` are the fleet's CurveZMQ client key pair.
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

from .async_bridge_client import AsyncBridgeClient
from .bridge_client import BridgeClient
from .protocol import BridgeTimeout, SessionLost

__all__ = ["FleetSource", "FleetView", "as_fleet_view", "lost_error"]

FleetSource = Callable[[Any], "tuple[Any, list[dict[str, Any]], Mapping[str, str] | None] | None"]
T = TypeVar("T")


def lost_error(entry: Mapping[str, Any] | None, uid: str) -> SessionLost:
    where = f"{entry.get('endpoint')} on node {str(entry.get('node_id', '?'))[:12]}" if entry else uid
    return SessionLost(f"replica {where} left the fleet (its process or node died); the episode is lost")


class FleetView:
    """The live replicas of a fleet, clients to them, and where this process put its sessions.

    ``refresh()`` asks the source at most every ``refresh_interval`` seconds (``force=True``:
    now). ``pick()`` chooses the replica for a new episode: fewest sessions this process placed
    there, then fewest the fleet last reported, then at random (so many trainer processes do not
    all start on the same replica). Thread-safe.
    """

    def __init__(self, source: FleetSource, refresh_interval: float = 1.0, timeout: float = 60.0, name: str = "fleet") -> None:
        self._source = source
        self.refresh_interval = float(refresh_interval)
        self.timeout = float(timeout)
        self.name = name
        self.version: Any = None
        self.refresh_errors = 0  # snapshots the source failed to give (e.g. registry restarting)
        self.replicas: dict[str, dict[str, Any]] = {}
        self.client_keys: dict[str, str] | None = None
        self.placed: Counter[str] = Counter()
        self._clients: dict[str, BridgeClient] = {}
        self._async_clients: dict[tuple[str, int], AsyncBridgeClient] = {}
        self._last = 0.0
        self._lock = threading.RLock()
        self._rng = random.Random()
        self.refresh(force=True)

    @classmethod
    def static(cls, replicas: Sequence[Mapping[str, Any]], client_keys: Mapping[str, str] | None = None, **kw: Any) -> FleetView:
        """A view of a fixed set of replicas (e.g. bridges started by hand on several machines)."""
        entries = [dict(r) for r in replicas]
        return cls(lambda since: None if since == 0 else (0, entries, dict(client_keys) if client_keys else None), **kw)

    # ------------------------------------------------------------------ membership

    def refresh(self, force: bool = False) -> bool:
        """Pulls the source's snapshot if it is time (or ``force``); True if the replicas changed."""
        with self._lock:
            now = time.monotonic()
            if not force and now - self._last < self.refresh_interval:
                return False
            self._last = now
            try:
                snap = self._source(self.version)
            except Exception:
                # the registry is briefly unreachable (restarting after its node died): keep the
                # last picture; a replica that died meanwhile still fails its requests by timeout
                if self.version is None:
                    raise
                self.refresh_errors += 1
                return False
            if snap is None:
                return False
            version, replicas, keys = snap
            self.version = version
            if keys:
                self.client_keys = dict(keys)
            fresh = {str(r["uid"]): dict(r) for r in replicas}
            changed = set(fresh) != set(self.replicas)
            self.replicas = fresh
            for uid in [u for u in self._clients if u not in fresh]:
                self._clients.pop(uid).close()
            return changed

    def alive(self, uid: str) -> bool:
        return uid in self.replicas

    def pick(self) -> str:
        with self._lock:
            if not self.replicas:
                self.refresh(force=True)
            if not self.replicas:
                raise RuntimeError(f"the {self.name} has no live replicas")
            return min(self.replicas, key=lambda u: (self.placed[u], int(self.replicas[u].get("sessions", 0)), self._rng.random()))

    def curve_for(self, uid: str) -> dict[str, str] | None:
        entry = self.replicas[uid]
        if not entry.get("server_public_key"):
            return None
        if not self.client_keys:
            raise RuntimeError(f"the {self.name} requires CurveZMQ but handed out no client keys")
        return {"server_public_key": entry["server_public_key"], **self.client_keys}

    # ------------------------------------------------------------------ clients

    def client(self, uid: str) -> BridgeClient:
        """The (cached) blocking client of replica ``uid``."""
        with self._lock:
            c = self._clients.get(uid)
            if c is None or c.closed:
                c = self._clients[uid] = BridgeClient(self.replicas[uid]["endpoint"], timeout=self.timeout, curve=self.curve_for(uid))
            return c

    def async_client(self, uid: str) -> AsyncBridgeClient:
        """The (cached) asyncio client of replica ``uid`` for the running event loop (an asyncio
        socket belongs to the loop that reads it)."""
        key = (uid, id(asyncio.get_running_loop()))
        with self._lock:
            c = self._async_clients.get(key)
            if c is None or c.closed:
                c = self._async_clients[key] = AsyncBridgeClient(self.replicas[uid]["endpoint"], timeout=self.timeout, curve=self.curve_for(uid))
            return c

    def wait(self, uid: str, collect: Callable[[float], T], timeout: float | None = None, slice_s: float = 0.5) -> T:
        """Calls ``collect(t)`` in slices of ``slice_s`` until it answers; between slices checks that
        ``uid`` is still in the fleet and raises SessionLost as soon as it is not (a dead node
        answers nothing, so without this a step would wait out the whole timeout)."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while True:
            left = deadline - time.monotonic()
            try:
                return collect(max(0.0, min(slice_s, left)))
            except BridgeTimeout:
                if left <= slice_s:
                    raise
            self.refresh()
            if not self.alive(uid):
                raise lost_error(None, uid)

    async def await_reply(self, uid: str, awaitable: Awaitable[T], slice_s: float = 0.5) -> T:
        """``wait`` for asyncio: the awaitable's result, or SessionLost once ``uid`` leaves the fleet."""
        task = asyncio.ensure_future(awaitable)
        try:
            while True:
                done, _ = await asyncio.wait({task}, timeout=slice_s)
                if done:
                    return task.result()
                self.refresh()
                if not self.alive(uid):
                    raise lost_error(None, uid)
        finally:
            if not task.done():
                task.cancel()

    async def aclose(self) -> None:
        """Closes the asyncio clients of the running loop."""
        loop = id(asyncio.get_running_loop())
        for key in [k for k in self._async_clients if k[1] == loop]:
            await self._async_clients.pop(key).close()

    def close(self) -> None:
        with self._lock:
            for c in self._clients.values():
                c.close()
            self._clients.clear()

    def __repr__(self) -> str:
        return f"FleetView({self.name}, {len(self.replicas)} replicas, version {self.version})"


def as_fleet_view(obj: Any) -> FleetView | None:
    """``obj`` as a FleetView if it is one or can make one (``obj.view()``: an EnvFleet or a
    FleetHandle of envscaler.ray); None for endpoint strings and lists."""
    if isinstance(obj, FleetView):
        return obj
    if obj is None or isinstance(obj, (str, bytes, Sequence)):
        return None
    make = getattr(obj, "view", None)
    return make() if callable(make) else None


def discover_if_ray(timeout: float = 60.0) -> FleetView | None:
    """The fleet of the current Ray namespace when this process is inside Ray (ray imported and
    initialized), else None. Never imports Ray itself."""
    import sys

    ray = sys.modules.get("ray")
    if ray is None or not ray.is_initialized():
        return None
    from .ray import discover

    return discover(timeout=timeout)
