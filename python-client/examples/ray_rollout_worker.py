"""A rollout worker on a Ray cluster opening envs on an envscaler fleet (docs/ray.md).

This is the shape of ROLL's EnvironmentWorker or verl's AgentLoopWorker: an actor somewhere in
the cluster that runs episodes. It is given nothing but the namespace it lives in; the fleet's
endpoints and CurveZMQ keys come from the registry. The "policy" here just plays each
scenario's first tool call and then replies, standing in for the model.

    python python-client/examples/ray_rollout_worker.py [--address auto] [--envs DIR]

Without --address it starts a one-node Ray cluster of its own on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import asyncio

import ray

import envscaler
from envscaler.ray import LocalCluster, start_fleet
from envscaler.ray.local_cluster import LOOPBACK

NAMESPACE = "envscaler-example"


@ray.remote(num_cpus=0)
class RolloutWorker:
    """Holds a vector env on the fleet for its whole life, like an env-manager thread would."""

    def __init__(self, num_envs: int) -> None:
        # no endpoints: inside Ray, the fleet of this namespace is found through its registry
        self.vec = envscaler.EnvScalerVectorEnv(None, num_envs)

    def rollout(self, steps: int, seed: int) -> dict:
        _, infos = self.vec.reset(seed=seed)
        tools = infos["tools"]
        total, lost = 0.0, 0
        for t in range(steps):
            # call the first tool of each sub-env's env with no arguments, then say we are done
            actions = [{"name": tools[i][0]["function"]["name"], "arguments": {}} if t % 2 == 0 else "Done." for i in range(self.vec.num_envs)]
            _obs, rewards, _terminated, _truncated, infos = self.vec.step(actions)
            total += float(rewards.sum())
            errors = infos.get("error", {})
            lost += int(sum(1 for i, has in enumerate(errors.get("_code", [])) if has and errors["code"][i] == "session_lost"))
        return {"reward": total, "session_lost": lost, "replicas": sorted({self.vec.replica_uid(i) for i in range(self.vec.num_envs)})}


@ray.remote(num_cpus=0)
def async_rollouts(handle, n: int) -> list[float]:
    """The asyncio shape (an agent loop per episode), given a picklable FleetHandle."""

    async def one(seed: int) -> float:
        env = envscaler.AsyncEnvScalerEnv(fleet=handle)
        try:
            _obs, info = await env.reset(seed=seed)
            await env.step({"name": info["tools"][0]["function"]["name"], "arguments": {}})
            return (await env.step("Done."))[1]
        finally:
            await env.close()

    async def main() -> list[float]:
        return list(await asyncio.gather(*(one(s) for s in range(n))))

    return asyncio.run(main())


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--address", default=None, help="an existing cluster (e.g. auto); default: start a local one")
    p.add_argument("--envs", nargs="*", default=None, help="bundle folders, present on every node (default: the bundled envs)")
    p.add_argument("--workers", type=int, default=2)
    args = p.parse_args()
    # a cluster of its own runs on 127.0.0.1 (envscaler.ray.LocalCluster: the example's traffic
    # stays on loopback); on a real cluster each node's replicas bind to that node's address
    local = LocalCluster(0, head_cpus=2, namespace=NAMESPACE) if args.address is None else None
    if local is None:
        ray.init(address=args.address, namespace=NAMESPACE)
    fleet = start_fleet(nodes="all", replicas_per_node=1, cpus_per_replica=0.5, envs=args.envs, extra_args=["--no-record"], host=LOOPBACK if local else None)
    try:
        print("replicas:", [(r["endpoint"], r["node_id"][:8]) for r in fleet.endpoints()])
        workers = [RolloutWorker.remote(4) for _ in range(args.workers)]
        for out in ray.get([w.rollout.remote(6, seed) for seed, w in enumerate(workers)]):
            print("rollout worker:", out)
        print("async rewards:", ray.get(async_rollouts.remote(fleet.handle(), 4)))
        for node in fleet.stats()["nodes"]:
            print("node", node["node_id"][:8], "sessions", node["sessions"], "requests/s", node["requests_per_s"], "restarts", node["restarts"])
    finally:
        fleet.shutdown()
        if local is not None:
            local.close()
        else:
            ray.shutdown()


if __name__ == "__main__":
    main()
