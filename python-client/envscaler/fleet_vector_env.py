"""FleetVectorEnv: EnvScalerVectorEnv over a fleet whose replicas come and go (envscaler.ray).

``EnvScalerVectorEnv(fleet, num_envs)`` makes one of these. What differs from a fixed list:
- each episode is placed at its reset on the live replica with the fewest sessions this process
  has there (FleetView.pick), and all its steps go to that replica; a sub-env keeps its session
  (and replica) across episodes unless another replica is less loaded;
- a step whose replica left the fleet (its process or node died, so the registry withdrew it)
  ends that sub-env truncated with ``info["error"]["code"] == "session_lost"`` as soon as the
  registry says so, not after the request timeout; every other sub-env steps on, and the lost
  one is autoreset on a live replica;
- replicas that joined since the last refresh get new episodes;
- ``shutting_down`` from a replica (its serve is stopping) ends the episode as ``session_lost``
  too: it cannot go on there;
- ``fork`` deals a group's targets out over the live replicas in turn (the snapshot exported once
  and imported once per other replica), and a fork's outcome on a replica that left is
  ``session_lost`` for its targets, which keep their previous episodes.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy as np

from .bridge_client import BridgeClient
from .fleet_view import FleetView, as_fleet_view, discover_if_ray, lost_error
from .protocol import BridgeError, BridgeTimeout, SessionLost, ShuttingDown
from .reachability import BridgeNotRunning
from .vector_env import EnvScalerVectorEnv, Pending, check_finish_previous

__all__ = ["FleetVectorEnv"]


def _collect_kept(client: BridgeClient, rid: int, timeout: float) -> dict[str, Any]:
    # keep=True: a slice that times out leaves the request pending for the next slice
    return client.collect(rid, timeout, keep=True)


class FleetVectorEnv(EnvScalerVectorEnv):
    def __init__(
        self,
        endpoints: Any = None,
        num_envs: int = 1,
        scenario_ids: Sequence[str] | None = None,
        curve: Any = None,
        timeout: float = 60.0,
        mode: str | None = None,
        finish_previous: bool | str = "later",
    ) -> None:
        check_finish_previous(finish_previous)
        view = as_fleet_view(endpoints) if endpoints is not None else discover_if_ray(timeout)
        if view is None:
            raise ValueError("no fleet: pass endpoints, an envscaler.ray fleet, or call from inside Ray with a fleet running")
        if curve is not None:
            raise ValueError("a fleet hands out its own CurveZMQ keys; do not pass curve=")
        if num_envs < 1:
            raise ValueError("num_envs must be >= 1")
        self.fleet: FleetView = view
        self.timeout = float(timeout)
        self.clients: list[BridgeClient] = []  # grows as replicas join; a withdrawn one is closed, never reused
        self._uids: list[str] = []
        self._index: dict[str, int] = {}
        self.num_envs = int(num_envs)
        self.replica_of = [-1] * self.num_envs
        self._setup(scenario_ids, mode, finish_previous)
        self.lost_episodes = 0  # episodes ended with session_lost because their replica left

    @property
    def endpoints(self) -> list[str]:
        return [self.fleet.replicas[u]["endpoint"] for u in self._uids if self.fleet.alive(u)]

    @endpoints.setter
    def endpoints(self, _: Any) -> None:  # the base class assigns it; here it is derived
        pass

    def replica_uid(self, index: int) -> str | None:
        """The uid of the replica sub-env ``index`` is on (None before its first reset)."""
        r = self.replica_of[index]
        return self._uids[r] if r >= 0 else None

    # ------------------------------------------------------------------ hooks of EnvScalerVectorEnv

    def _client_index(self, uid: str) -> int:
        if uid not in self._index:
            self._index[uid] = len(self.clients)
            self._uids.append(uid)
            self.clients.append(BridgeClient(self.fleet.replicas[uid]["endpoint"], timeout=self.timeout, curve=self.fleet.curve_for(uid)))
        return self._index[uid]

    def _any_client(self) -> BridgeClient:
        self.fleet.refresh()
        return self.clients[self._client_index(self.fleet.pick())]

    def _forget_withdrawn(self) -> None:
        for r, uid in enumerate(self._uids):
            if not self.fleet.alive(uid) and not self.clients[r].closed:
                self.clients[r].close()
                self.fleet.placed.pop(uid, None)

    def _place(self, which: Sequence[int]) -> None:
        self.fleet.refresh()
        self._forget_withdrawn()
        for i in which:
            cur = self.replica_uid(i)
            if cur is not None and self.fleet.alive(cur):
                self.fleet.placed[cur] -= 1
            best = self.fleet.pick()
            sid = self.episodes[i].session_id
            keep = cur is not None and sid is not None and self.fleet.alive(cur) and self.fleet.placed[cur] <= self.fleet.placed[best]
            uid = cur if keep else best
            assert uid is not None
            if not keep and cur is not None and sid is not None and self.fleet.alive(cur):
                # moving to a less loaded replica: let the old session go without waiting for the answer
                old = self.clients[self._index[cur]]
                old.abandon(old.submit("close", session_id=sid))
            if not keep:
                self.episodes[i].forget()
            self.fleet.placed[uid] += 1
            self.replica_of[i] = self._client_index(uid)

    def _fork_destinations(self, source: int, group: Sequence[int]) -> dict[int, int]:
        # the fleet's live replicas in turn, starting after the source's (which keeps the source)
        self.fleet.refresh()
        self._forget_withdrawn()
        live = [self._client_index(u) for u in sorted(self.fleet.replicas) if self.fleet.alive(u)]
        home = self.replica_of[source]
        if home not in live:
            return dict.fromkeys(group, home)  # its replica is gone: each fork gets session_lost
        start = live.index(home) + 1
        return {i: live[(start + k) % len(live)] for k, i in enumerate(group)}

    def _moved(self, i: int, replica: int) -> None:
        old = self.replica_uid(i)
        if old is not None and self.fleet.alive(old) and self.fleet.placed[old] > 0:
            self.fleet.placed[old] -= 1
        self.fleet.placed[self._uids[replica]] += 1
        super()._moved(i, replica)

    def _submit(self, i_client: int, op: str, **fields: Any) -> tuple[BridgeClient, int]:
        if not self.fleet.alive(self._uids[i_client]):
            return self.clients[i_client], -1  # never sent: _collect answers it with session_lost
        return super()._submit(i_client, op, **fields)

    def _collect(self, pending: Sequence[Pending]) -> list[dict[str, Any] | BridgeError]:
        out: list[dict[str, Any] | BridgeError] = []
        for p in pending:
            if isinstance(p, BridgeError):
                out.append(p)
                continue
            client, rid = p
            uid = self._uids[self.clients.index(client)]
            if rid < 0 or client.closed or not self.fleet.alive(uid):
                client.abandon(rid)
                out.append(lost_error(self.fleet.replicas.get(uid), uid))
                continue
            try:
                reply = self.fleet.wait(uid, functools.partial(_collect_kept, client, rid), timeout=self.timeout)
                for entry in reply.get("results", ()):
                    error = entry.get("error") if isinstance(entry, dict) else None
                    if error and error.get("code") == "shutting_down":  # its replica is going away: so is the episode
                        error["code"] = "session_lost"
                out.append(reply)
            except SessionLost as e:
                client.abandon(rid)
                out.append(lost_error(self.fleet.replicas.get(uid), uid) if not self.fleet.alive(uid) else e)
            except (ShuttingDown, BridgeTimeout, BridgeNotRunning) as e:
                # its replica is going away, or stopped answering within the timeout: each episode
                # on it is lost (the step reports session_lost per sub-env, never raises)
                client.abandon(rid)
                out.append(SessionLost(str(e)))
            except BridgeError as e:
                out.append(e)
        self._forget_withdrawn()
        return out

    def _reset_many(self, which: Sequence[int], scenarios: dict[int, str], seeds: dict[int, int]) -> dict[int, dict[str, Any] | BridgeError]:
        # a replica that dies during a reset loses that reset: place it again on a live one (up to
        # 3 tries); what still fails is that sub-env's outcome
        results: dict[int, dict[str, Any] | BridgeError] = {}
        todo = list(which)
        for attempt in range(3):
            results.update(super()._reset_many(todo, scenarios, seeds))
            todo = [i for i in todo if isinstance(results[i], SessionLost)]
            if not todo or attempt == 2:
                break
            self.fleet.refresh(force=True)
            for i in todo:
                if not self.fleet.alive(self.replica_uid(i) or ""):
                    self.episodes[i].forget()
        return results

    def step(self, actions: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        self.fleet.refresh()
        obs, rewards, terminated, truncated, infos = super().step(actions)
        errors = infos.get("error", {})
        if "code" in errors:
            self.lost_episodes += int(np.sum(errors.get("_code", np.zeros(0, dtype=bool)) & (errors["code"] == "session_lost")))
        return obs, rewards, terminated, truncated, infos

    def close_extras(self, **kwargs: Any) -> None:
        for i in range(self.num_envs):
            uid = self.replica_uid(i)
            if uid is not None and self.fleet.placed[uid] > 0:
                self.fleet.placed[uid] -= 1
        for r, uid in enumerate(self._uids):
            if not self.fleet.alive(uid):
                self.clients[r].close()
        super().close_extras(**kwargs)
