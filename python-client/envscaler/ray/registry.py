"""FleetRegistry: the named Ray actor that knows which replicas of a fleet are alive.

Agents heartbeat their live replicas; an agent not heard from within ``ttl_s`` is dropped
(its node died, or its worker was killed), so a reader never gets an endpoint older than the
heartbeat bound. Expiry is checked on every call rather than by a timer: a snapshot is always
computed at the moment it is read. ``version`` changes whenever the set of replicas does, so
clients poll cheaply (``snapshot(since=version)`` is ``None`` while nothing changed).

The fleet's CurveZMQ client key pair lives here, in the actor's memory, and is handed out only
with snapshots asked for from the registry's own namespace. A Ray namespace is not a security
boundary (anyone who can reach the cluster's GCS can run code on its nodes); this check keeps
the keys from leaking to other jobs by accident, and the keys never touch a disk.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

__all__ = ["REGISTRY_NAME", "FleetRegistry"]

REGISTRY_NAME = "envscaler-registry"


class FleetRegistry:
    def __init__(self, namespace: str, client_keys: dict[str, str], ttl_s: float = 3.0) -> None:
        self.namespace = namespace
        self._keys = dict(client_keys)
        self.ttl_s = float(ttl_s)
        # the registry is restarted elsewhere if its node dies: a fresh epoch keeps a client's old
        # version from matching the new registry's before the agents have heartbeated it full again
        self._epoch = uuid.uuid4().hex[:8]
        self._n = 0
        self._agents: dict[str, dict[str, Any]] = {}
        self.withdrawn: list[dict[str, Any]] = []  # (agent, reason, when): for stats and tests

    @property
    def version(self) -> str:
        return f"{self._epoch}:{self._n}"

    def _expire(self) -> None:
        now = time.monotonic()
        for agent, a in list(self._agents.items()):
            if now - a["seen"] > self.ttl_s:
                self._drop(agent, f"no heartbeat for {now - a['seen']:.1f} s")

    def _drop(self, agent: str, reason: str) -> None:
        a = self._agents.pop(agent, None)
        if a is not None:
            self._n += 1
            self.withdrawn.append({"agent": agent, "node_id": a["node_id"], "reason": reason, "replicas": [r["uid"] for r in a["replicas"]], "at": time.time()})

    def heartbeat(self, agent: str, node_id: str, replicas: list[dict[str, Any]]) -> str:
        self._expire()
        old = self._agents.get(agent)
        if old is None or [r["uid"] for r in old["replicas"]] != [r["uid"] for r in replicas]:
            self._n += 1
        self._agents[agent] = {"node_id": node_id, "replicas": list(replicas), "seen": time.monotonic()}
        return self.version

    def withdraw(self, agent: str, reason: str = "withdrawn") -> str:
        self._drop(agent, reason)
        return self.version

    def snapshot(self, since: str | None = None, namespace: str | None = None) -> tuple[str, list[dict[str, Any]], dict[str, str] | None] | None:
        """``(version, replicas, client_keys)``, or None if the version is still ``since``.
        ``client_keys`` is None unless ``namespace`` is the registry's."""
        self._expire()
        if since is not None and since == self.version:
            return None
        replicas = [r for a in self._agents.values() for r in a["replicas"]]
        return self.version, replicas, (dict(self._keys) if namespace == self.namespace else None)

    def agents(self) -> dict[str, dict[str, Any]]:
        self._expire()
        now = time.monotonic()
        return {k: {"node_id": a["node_id"], "replicas": len(a["replicas"]), "age_s": now - a["seen"]} for k, a in self._agents.items()}

    def node_id(self) -> str:
        import ray

        return str(ray.get_runtime_context().get_node_id())

    def history(self) -> list[dict[str, Any]]:
        return list(self.withdrawn)
