"""EnvFleet: bridge replicas on the nodes of a Ray cluster, one NodeAgent per selected node.

The driver side: it makes the fleet's CurveZMQ client key pair and the registry, places an
agent on each selected node (``NodeAffinitySchedulingStrategy(soft=False)``: an agent belongs to
its node and is never moved), and runs a reconciler thread that follows the cluster: agents for
nodes that joined, a new agent where one died on a live node, and the withdrawal of agents whose
node left. Placement groups are not used: a STRICT_SPREAD bundle of a lost node cannot be
placed again until a replacement node joins, which would leave the fleet waiting on it.
"""

from __future__ import annotations

import dataclasses
import threading
import time
import uuid
from collections.abc import Sequence
from typing import Any

import ray
import zmq
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from ..fleet_view import FleetView
from .node_agent import NodeAgent
from .registry import REGISTRY_NAME, FleetRegistry

__all__ = ["EnvFleet", "FleetHandle", "discover", "start_fleet"]


_VIEWS: dict[tuple[str, str, float, float], FleetView] = {}
_VIEWS_LOCK = threading.Lock()


@dataclasses.dataclass(frozen=True)
class FleetHandle:
    """What a Ray task or actor needs to use a fleet: picklable, and holds no keys (they come
    from the registry, in its namespace)."""

    namespace: str
    name: str = REGISTRY_NAME

    def registry(self) -> Any:
        try:
            return ray.get_actor(self.name, namespace=self.namespace)
        except ValueError:
            raise ValueError(f"no envscaler fleet registry {self.name!r} in Ray namespace {self.namespace!r}: start one with envscaler.ray.start_fleet()") from None

    def view(self, timeout: float = 60.0, refresh_interval: float = 1.0, shared: bool = True) -> FleetView:
        """The fleet as a FleetView. ``shared``: one view per process for the same fleet and
        settings, so every env of the process counts the same placements (load spreading) and
        async envs of one event loop share a socket per replica."""
        key = (self.namespace, self.name, float(timeout), float(refresh_interval))
        if shared:
            with _VIEWS_LOCK:
                if key in _VIEWS:
                    return _VIEWS[key]
        current = {"registry": self.registry()}
        mine = ray.get_runtime_context().namespace

        def source(since: Any) -> Any:
            try:
                return ray.get(current["registry"].snapshot.remote(since, mine), timeout=30)
            except ray.exceptions.ActorDiedError:
                # that fleet was shut down; a new one may be registered under the same name
                current["registry"] = self.registry()
                return ray.get(current["registry"].snapshot.remote(None, mine), timeout=30)

        view = FleetView(source, refresh_interval=refresh_interval, timeout=timeout, name=f"fleet {self.namespace}/{self.name}")
        if view.replicas and not view.client_keys:
            raise PermissionError(
                f"the fleet registry {self.name!r} is in namespace {self.namespace!r}, this process in {mine!r}: it hands out its client keys only in its own namespace (ray.init(namespace=...))"
            )
        if shared:
            with _VIEWS_LOCK:
                view = _VIEWS.setdefault(key, view)
        return view


def discover(namespace: str | None = None, name: str = REGISTRY_NAME, timeout: float = 60.0, refresh_interval: float = 1.0) -> FleetView:
    """The fleet registered in ``namespace`` (default: this process's namespace), as a FleetView."""
    if not ray.is_initialized():
        raise RuntimeError("envscaler.ray.discover needs Ray: call ray.init() first (or pass a fleet or endpoints)")
    ns = namespace or ray.get_runtime_context().namespace
    return FleetHandle(ns, name).view(timeout=timeout, refresh_interval=refresh_interval)


def _cpu_nodes() -> list[dict[str, Any]]:
    return [n for n in ray.nodes() if n.get("Alive") and n.get("Resources", {}).get("CPU", 0) > 0]


class EnvFleet:
    """Replicas of ``envscaler serve`` across the cluster. Make one with ``start_fleet``.

    ``nodes``: ``"all"`` (every alive node with CPUs, the default), the name of a custom resource
    (only nodes started with it, e.g. ``ray start --resources='{"envscaler": 1}'``), or an int
    (that many nodes, the ones with the most CPUs first). ``replicas_per_node`` serve processes
    per agent, each reserving ``cpus_per_replica`` CPUs in Ray's accounting (capped at what the
    node has, so an agent can always be placed).
    """

    def __init__(
        self,
        nodes: str | int = "all",
        replicas_per_node: int = 1,
        cpus_per_replica: float = 1.0,
        envs: Sequence[str] | None = None,
        workers: int = 0,
        extra_args: Sequence[str] = (),
        command: str | Sequence[str] | None = None,
        name: str = REGISTRY_NAME,
        heartbeat_s: float = 1.0,
        ttl_s: float = 3.0,
        reconcile_s: float = 2.0,
        startup_timeout: float = 120.0,
        host: str | None = None,
        detached: bool = False,
    ) -> None:
        if not ray.is_initialized():
            raise RuntimeError("start_fleet needs Ray: call ray.init() (with a namespace) first")
        self.nodes = nodes
        self.cpus_per_replica = float(cpus_per_replica)
        self.replicas_per_node = int(replicas_per_node)
        # the driver's own: the registry hands its keys only to callers from its namespace
        self.namespace = ray.get_runtime_context().namespace
        self.name = name
        self.reconcile_s = float(reconcile_s)
        self.startup_timeout = float(startup_timeout)
        self.detached = detached
        self.agent_config = {
            "replicas_per_node": self.replicas_per_node,
            "envs": [str(e) for e in envs] if envs else None,
            "workers": int(workers),
            "extra_args": [str(a) for a in extra_args],
            "command": command,
            "heartbeat_s": float(heartbeat_s),
            "startup_timeout": self.startup_timeout,
            "host": host,
        }
        public, secret = zmq.curve_keypair()
        self._client_public_key = public.decode("ascii")
        lifetime = {"lifetime": "detached"} if detached else {}
        self.registry = (
            ray.remote(FleetRegistry)
            .options(
                name=name,
                namespace=self.namespace,
                num_cpus=0,
                # on the driver's node, which lives as long as the job using the fleet (a soft
                # affinity was seen to land elsewhere, and then losing that node stalls every
                # client until Ray notices the death, ~15 s). A detached fleet outlives its
                # driver: its registry may go anywhere and is restarted if its node dies (the
                # agents' next heartbeats fill it again; the keys are in its creation arguments)
                scheduling_strategy=NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=detached),
                max_restarts=-1,
                max_task_retries=2,
                **lifetime,
            )
            .remote(self.namespace, {"client_public_key": self._client_public_key, "client_secret_key": secret.decode("ascii")}, ttl_s)
        )
        del secret
        self.agents: dict[str, dict[str, Any]] = {}  # node_id -> {"handle", "agent", "ready"}
        self.agents_started = 0
        self._cooldown: dict[str, float] = {}
        self.events: list[dict[str, Any]] = []  # what the reconciler did, for stats() and debugging
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._reconciler: threading.Thread | None = None

    # ------------------------------------------------------------------ placement

    def selected_nodes(self) -> list[dict[str, Any]]:
        """The alive nodes that should carry an agent now."""
        nodes = _cpu_nodes()
        if isinstance(self.nodes, str) and self.nodes != "all":
            nodes = [n for n in nodes if n["Resources"].get(self.nodes, 0) > 0]
        if isinstance(self.nodes, int) and not isinstance(self.nodes, bool):
            have = [n for n in nodes if n["NodeID"] in self.agents]
            rest = sorted((n for n in nodes if n["NodeID"] not in self.agents), key=lambda n: (-n["Resources"]["CPU"], n["NodeID"]))
            nodes = (have + rest)[: self.nodes]
        return nodes

    def _start_agent(self, node: dict[str, Any]) -> None:
        node_id = node["NodeID"]
        agent_id = f"{node_id[:8]}-{uuid.uuid4().hex[:6]}"
        cpus = min(self.cpus_per_replica * self.replicas_per_node, float(node["Resources"].get("CPU", 0)))
        lifetime = {"lifetime": "detached"} if self.detached else {}
        handle = (
            ray.remote(NodeAgent)
            .options(
                name=f"envscaler-agent-{agent_id}",
                namespace=self.namespace,
                num_cpus=cpus,
                max_restarts=0,  # the reconciler starts a fresh agent instead, on a node that is alive
                max_concurrency=4,  # ready() may block while stats() and logs() answer
                scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False),
                **lifetime,
            )
            .remote(agent_id, self.agent_config, self.registry, self._client_public_key)
        )
        self.agents[node_id] = {"handle": handle, "agent": agent_id, "ready": handle.ready.remote(self.startup_timeout), "cpus": cpus}
        self.agents_started += 1
        self.events.append({"at": time.time(), "event": "agent started", "node_id": node_id, "agent": agent_id})

    def _forget(self, node_id: str, reason: str) -> None:
        a = self.agents.pop(node_id, None)
        if a is None:
            return
        self.events.append({"at": time.time(), "event": "agent forgotten", "node_id": node_id, "agent": a["agent"], "reason": reason})
        self.registry.withdraw.remote(a["agent"], reason)
        try:
            ray.kill(a["handle"], no_restart=True)
        except Exception:
            pass

    def reconcile(self) -> dict[str, list[str]]:
        """One round: forget agents on nodes that left or whose actor died, start agents where missing."""
        with self._lock:
            wanted = {n["NodeID"]: n for n in self.selected_nodes()}
            alive = {n["NodeID"] for n in ray.nodes() if n.get("Alive")}
            forgotten, started = [], []
            for node_id in list(self.agents):
                if node_id not in alive:
                    self._forget(node_id, "its node left the cluster")
                    forgotten.append(node_id)
                elif node_id not in wanted:
                    self._forget(node_id, "its node is no longer selected")
                    forgotten.append(node_id)
            pings = {nid: a["handle"].ping.remote() for nid, a in self.agents.items()}
            for node_id, ref in pings.items():
                try:
                    ray.get(ref, timeout=10)
                except (ray.exceptions.GetTimeoutError, ray.exceptions.ActorUnavailableError):
                    pass  # busy, being placed, or briefly unreachable: next round
                except ray.exceptions.RayError:
                    self._forget(node_id, "its agent died")
                    forgotten.append(node_id)
                    # an agent dies first when its node dies, before Ray marks the node dead:
                    # wait a little before replacing it, so as not to place one on a dying node
                    self._cooldown[node_id] = time.monotonic() + max(5.0, 3 * self.reconcile_s)
            for node_id, node in wanted.items():
                if node_id not in self.agents and time.monotonic() >= self._cooldown.get(node_id, 0.0):
                    self._start_agent(node)
                    started.append(node_id)
            return {"started": started, "forgotten": forgotten}

    def _reconcile_loop(self) -> None:
        while not self._stop.wait(self.reconcile_s):
            try:
                self.reconcile()
            except Exception:
                pass

    def start(self, wait: bool = True) -> EnvFleet:
        self.reconcile()
        if not self.agents:
            raise RuntimeError(f"no node fits nodes={self.nodes!r} (alive nodes with CPUs: {len(_cpu_nodes())})")
        if wait:
            self.wait_ready()
        self._reconciler = threading.Thread(target=self._reconcile_loop, name="envscaler-fleet-reconciler", daemon=True)
        self._reconciler.start()
        return self

    def wait_ready(self, timeout: float | None = None) -> list[dict[str, Any]]:
        """Waits until every current agent's replicas answer and the registry lists them all."""
        timeout = self.startup_timeout if timeout is None else timeout
        with self._lock:
            refs = [a["ready"] for a in self.agents.values()]
        out: list[dict[str, Any]] = ray.get(refs, timeout=timeout)
        expected = {r["uid"] for d in out for r in d["replicas"]}
        deadline = time.monotonic() + timeout
        while True:
            snap = ray.get(self.registry.snapshot.remote(None, self.namespace))
            listed = {r["uid"] for r in snap[1]}
            if expected <= listed:
                return out
            if time.monotonic() > deadline:
                raise TimeoutError(f"the registry lists {len(listed & expected)} of {len(expected)} replicas after {timeout:g} s")
            time.sleep(0.05)

    # ------------------------------------------------------------------ use

    def handle(self) -> FleetHandle:
        """A picklable handle for Ray tasks and actors: ``handle.view()`` there."""
        return FleetHandle(self.namespace, self.name)

    def view(self, timeout: float = 60.0, refresh_interval: float = 1.0, shared: bool = True) -> FleetView:
        return self.handle().view(timeout=timeout, refresh_interval=refresh_interval, shared=shared)

    def endpoints(self) -> list[dict[str, Any]]:
        """The replicas the registry lists now (endpoint, node_id, uid, server public key, ...)."""
        return list(ray.get(self.registry.snapshot.remote(None, None))[1])

    def describe(self) -> list[dict[str, Any]]:
        with self._lock:
            handles = [a["handle"] for a in self.agents.values()]
        return [d for d in _gather([h.describe.remote() for h in handles]) if d is not None]

    def stats(self) -> dict[str, Any]:
        """Per node: sessions, requests/s (over the last heartbeat), restarts, and each replica's counters."""
        with self._lock:
            agents = list(self.agents.values())
        per_node = []
        for a, s in zip(agents, _gather([a["handle"].stats.remote() for a in agents])):
            if s is None:
                per_node.append({"agent": a["agent"], "alive": False})
                continue
            rates = [r["requests_per_s"] for r in s["replicas"] if r["requests_per_s"] is not None]
            per_node.append(
                {
                    **{k: s[k] for k in ("agent", "node_id", "host", "failures")},
                    "alive": True,
                    "sessions": sum(r["sessions"] for r in s["replicas"]),
                    "requests_per_s": sum(rates) if rates else None,
                    "restarts": sum(r["restarts"] for r in s["replicas"]),
                    "replicas": s["replicas"],
                }
            )
        return {
            "nodes": per_node,
            "sessions": sum(n.get("sessions", 0) for n in per_node),
            "replicas": sum(len(n.get("replicas", [])) for n in per_node),
            "agents_started": self.agents_started,
            "events": list(self.events),
            "withdrawn": ray.get(self.registry.history.remote()),
        }

    def logs(self, lines: int = 100) -> dict[str, dict[int, str]]:
        """The last ``lines`` of each replica's log, by node id then replica index."""
        with self._lock:
            items = list(self.agents.items())
        return {nid: (logs or {}) for (nid, _), logs in zip(items, _gather([a["handle"].logs.remote(None, lines) for _, a in items]))}

    def shutdown(self, timeout: float = 30.0) -> None:
        """Stops the reconciler, every replica (SIGTERM, then SIGKILL), the agents and the registry."""
        self._stop.set()
        if self._reconciler is not None:
            self._reconciler.join(timeout)
        with self._lock:
            agents = list(self.agents.values())
            self.agents.clear()
        _gather([a["handle"].shutdown.remote() for a in agents], timeout=timeout)
        for a in agents:
            try:
                ray.kill(a["handle"], no_restart=True)
            except Exception:
                pass
        try:
            ray.kill(self.registry, no_restart=True)
        except Exception:
            pass
        # ray.kill only asks: the name stays resolvable until the GCS marks the actor dead, and a
        # caller that starts a fleet of the same name right after would find the dying one
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                ray.get_actor(self.name, namespace=self.namespace)
            except ValueError:
                return
            time.sleep(0.05)
        raise TimeoutError(f"the fleet registry {self.name!r} was still listed {timeout:.0f} s after it was killed")

    def __enter__(self) -> EnvFleet:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()


def _gather(refs: list[Any], timeout: float = 30.0) -> list[Any]:
    """ray.get of each ref on its own: a dead agent gives None instead of failing the rest."""
    out = []
    deadline = time.monotonic() + timeout
    for ref in refs:
        try:
            out.append(ray.get(ref, timeout=max(0.1, deadline - time.monotonic())))
        except ray.exceptions.RayError:
            out.append(None)
    return out


def start_fleet(nodes: str | int = "all", replicas_per_node: int = 1, wait: bool = True, **kw: Any) -> EnvFleet:
    """Starts a fleet (see EnvFleet for the options) and, with ``wait``, returns once every
    replica answers over CurveZMQ and the registry lists it. ``fleet.shutdown()`` stops it."""
    fleet = EnvFleet(nodes=nodes, replicas_per_node=replicas_per_node, **kw)
    try:
        return fleet.start(wait=wait)
    except BaseException:
        fleet.shutdown()
        raise
