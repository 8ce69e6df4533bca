"""A simulated multi-node Ray cluster on this machine, every node on the loopback address.

``ray.cluster_utils.Cluster`` starts each raylet on the address Ray picks for this machine (the
address of its default route, e.g. eth0's), so a test or a laptop trial would send its traffic
(Ray's own, and every replica the fleet binds to the node's IP) out of loopback. Here every node,
and the driver that connects to them, is given ``node_ip_address="127.0.0.1"``; a fleet started on
it binds its replicas to 127.0.0.1, since a replica binds to the IP Ray reports for its node.
A real cluster needs none of this: each node keeps its own address (docs/ray.md).
"""

from __future__ import annotations

import os
from typing import Any

import ray

__all__ = ["LOOPBACK", "LocalCluster", "is_loopback_host"]

LOOPBACK = "127.0.0.1"


def is_loopback_host(host: str) -> bool:
    """True for an address in 127.0.0.0/8, ``::1`` or ``localhost``."""
    h = host.strip("[]").lower()
    return h.startswith("127.") or h in ("::1", "localhost")


class LocalCluster:
    """A head node plus ``worker_nodes`` raylets on 127.0.0.1, and the driver connected to them.

    ``with LocalCluster(2, worker_resources={"envnode": 1}) as c: ...``; ``c.add_node(...)`` and
    ``c.remove_node(node)`` change it while it runs. ``close()`` (or leaving the ``with``) shuts the
    driver and every node down.
    """

    def __init__(self, worker_nodes: int = 2, *, worker_cpus: int = 1, worker_resources: dict[str, float] | None = None, head_cpus: int = 1, namespace: str | None = None) -> None:
        from ray._private import ray_constants
        from ray.cluster_utils import Cluster

        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        # Ray turns a loopback address given to ray.init into "this machine's address" (the one its
        # default route uses) unless it is in single-host mode. That mode is read from this variable
        # when Ray is imported (so set it for every process Ray starts from here) and from this
        # module attribute when an address is resolved (so set it in this already-imported Ray).
        os.environ[ray_constants.ENABLE_RAY_CLUSTERS_ENV_VAR] = "0"
        ray_constants.ENABLE_RAY_CLUSTER = False
        self.cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": head_cpus, "include_dashboard": False, "node_ip_address": LOOPBACK})
        try:
            for n in [self.cluster.head_node]:
                if not is_loopback_host(str(n.node_ip_address)):
                    raise RuntimeError(f"the head node came up on {n.node_ip_address}, not loopback")
            self.workers = [self.add_node(num_cpus=worker_cpus, resources=dict(worker_resources or {})) for _ in range(worker_nodes)]
            # refuse rather than connect anywhere else, should a Ray version resolve the address otherwise
            from ray._private.services import canonicalize_bootstrap_address

            target = canonicalize_bootstrap_address(self.cluster.address) or ""
            if not is_loopback_host(target.rsplit(":", 1)[0]):
                raise RuntimeError(f"Ray resolved the local cluster's address {self.cluster.address} to {target}, which is not loopback")
            ray.init(address=self.cluster.address, namespace=namespace, log_to_driver=False, _node_ip_address=LOOPBACK)
            self.cluster.wait_for_nodes()
        except BaseException:
            self.close()
            raise

    @property
    def address(self) -> str:
        return str(self.cluster.address)

    @property
    def head_node(self) -> Any:
        return self.cluster.head_node

    def add_node(self, **node_args: Any) -> Any:
        """Adds a raylet on 127.0.0.1 (``node_args`` as for ``Cluster.add_node``)."""
        return self.cluster.add_node(**{**node_args, "node_ip_address": LOOPBACK})

    def remove_node(self, node: Any, allow_graceful: bool = True) -> None:
        self.cluster.remove_node(node, allow_graceful=allow_graceful)

    def wait_for_nodes(self) -> None:
        self.cluster.wait_for_nodes()

    def node_addresses(self) -> list[str]:
        """The address of every alive node, as Ray's control plane lists it."""
        return [str(n["NodeManagerAddress"]) for n in ray.nodes() if n.get("Alive")]

    def close(self) -> None:
        if ray.is_initialized():
            ray.shutdown()
        self.cluster.shutdown()

    def __enter__(self) -> LocalCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
