"""envscaler.ray: bridge replicas across a Ray cluster (``pip install "envscaler[ray]"``).

``start_fleet()`` puts a NodeAgent on each selected node; each agent runs that node's
``envscaler serve`` replicas, bound to the node's IP, CurveZMQ always on. A named registry actor
in the driver's namespace lists the live replicas (heartbeats; dead agents' replicas are
withdrawn), and a reconciler gives nodes that join an agent of their own. Envs use a fleet
through ``EnvScalerVectorEnv(fleet, n)``, ``AsyncEnvScalerEnv(fleet=...)``, or, inside any Ray
task or actor of the same namespace, with no arguments at all. See docs/ray.md.

The core package never imports this module (nor Ray).
"""

from .fleet import EnvFleet, FleetHandle, discover, start_fleet
from .local_cluster import LocalCluster
from .registry import REGISTRY_NAME

__all__ = ["REGISTRY_NAME", "EnvFleet", "FleetHandle", "LocalCluster", "discover", "start_fleet"]
