"""EnvScalerVectorEnv: N bridge sessions spread over the replicas, stepped with step_batch requests."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from gymnasium.utils import seeding
from gymnasium.vector import AutoresetMode, VectorEnv

from .bridge_client import BridgeClient, CurveKeys
from .episode_logic import LOST_SESSION, Episode, choose_scenario, episode_seed, lost_step, plain_action, step_tuple
from .fleet_view import as_fleet_view
from .protocol import BridgeError, error_for
from .reachability import check_reachable
from .spaces import AgentAction, AnyText, TextBatch

__all__ = ["STEP_BATCH_CHUNK", "EnvScalerVectorEnv"]

#: Sub-envs per ``step_batch`` request. A replica answers a batch once all its steps are done, so
#: one batch of 64 leaves it idle while this process reads the answer and sends the next round;
#: in chunks the replica steps chunk k+1 while this process reads chunk k (a lockstep round of 64
#: library steps in one batch vs chunks of 16, raw, interleaved: 1.4-2.6x the rate on a loaded
#: 2-core machine).
STEP_BATCH_CHUNK = 16


def _collect_all(pending: Sequence[tuple[BridgeClient, int]]) -> list[dict[str, Any] | BridgeError]:
    """Collects every submitted request (each replica worked on its own meanwhile), errors included."""
    out: list[dict[str, Any] | BridgeError] = []
    for client, rid in pending:
        try:
            out.append(client.collect(rid))
        except BridgeError as e:
            out.append(e)
    return out


class EnvScalerVectorEnv(VectorEnv):
    """``num_envs`` sub-envs, sub-env ``i`` on endpoint ``i % len(endpoints)`` (round-robin over replicas).

    - ``step(actions)`` sends one ``step_batch`` per ``STEP_BATCH_CHUNK`` (16) live sub-envs of
      each replica, all before waiting for any reply, so the replicas work concurrently (the step
      costs the slowest replica's time, not the sum) and each replica answers its first chunk
      while it steps the next.
    - Autoreset is ``AutoresetMode.NEXT_STEP``: a sub-env that ends on step t is reset on step
      t+1 (its action there is ignored), giving the reset observation, reward 0 and
      terminated/truncated False.
    - Observations are a numpy object array of strings; rewards float64; terminated/truncated bool.
    - ``info`` uses gymnasium's vector format: a dict whose keys hold arrays over the sub-envs
      plus a boolean mask ``_key`` of the sub-envs that have that key (nested dicts recurse). A
      step info is the bridge's step info plus ``observation``; an autoreset sub-env's is its
      reset info. Use ``gymnasium.wrappers.vector.DictInfoToList`` for a list of dicts.
    - A sub-env whose session is lost (replica restart, idle reaper) ends truncated with
      ``info["error"] = {"code", "message"}`` and is autoreset in a new session; other errors raise.
    - ``reset(seed=..., options={"scenario_ids": [...]})``: one scenario per sub-env (or
      ``"scenario_id"`` for all); otherwise drawn from ``scenario_ids`` with ``np_random``.
      ``options["reset_mask"]`` resets only some sub-envs.
    - ``endpoints`` may be a fleet instead (an ``envscaler.ray`` EnvFleet or FleetHandle, or a
      FleetView), or None inside Ray to use the namespace's fleet: then each episode is placed on
      the least loaded live replica and stays there, and an episode whose replica or node died
      ends truncated with ``session_lost`` (see fleet_vector_env.py).
    """

    def __new__(cls, endpoints: Any = None, *args: Any, **kwargs: Any) -> EnvScalerVectorEnv:
        if cls is EnvScalerVectorEnv and (endpoints is None or as_fleet_view(endpoints) is not None):
            from .fleet_vector_env import FleetVectorEnv

            return super().__new__(FleetVectorEnv)
        return super().__new__(cls)

    def __init__(
        self,
        endpoints: str | Sequence[str],
        num_envs: int,
        scenario_ids: Sequence[str] | None = None,
        curve: CurveKeys | None = None,
        timeout: float = 60.0,
    ) -> None:
        eps = [endpoints] if isinstance(endpoints, str) else list(endpoints)
        if not eps:
            raise ValueError("need at least one endpoint")
        if num_envs < 1:
            raise ValueError("num_envs must be >= 1")
        self.endpoints = eps
        for ep in eps:
            check_reachable(ep)  # fail now, naming the endpoint, rather than at the first request's timeout
        self.clients = [BridgeClient(ep, timeout=timeout, curve=curve) for ep in eps]
        self.num_envs = int(num_envs)
        # fail now, naming the limit, rather than at the first reset: sub-envs are spread evenly
        limits = [c.hello()["limits"] for c in self.clients]
        capacity = [min(int(lim["max_sessions"]), int(lim.get("max_sessions_per_client", lim["max_sessions"]))) for lim in limits]
        per_replica = -(-self.num_envs // len(eps))
        if per_replica > min(capacity):
            for c in self.clients:
                c.close()
            raise ValueError(
                f"num_envs={self.num_envs} over {len(eps)} replica(s) needs {per_replica} sessions per replica, "
                f"but a replica holds at most max_sessions={min(capacity)} for one client (serve --max-sessions / --max-sessions-per-client, or add replicas)"
            )
        self.replica_of = [i % len(eps) for i in range(self.num_envs)]
        self._setup(scenario_ids)

    def _setup(self, scenario_ids: Sequence[str] | None) -> None:
        """What every vector env here holds once ``num_envs`` is known (FleetVectorEnv too)."""
        self.single_observation_space = AnyText()
        self.single_action_space = AgentAction()
        self.observation_space = TextBatch(AnyText(), self.num_envs)
        self.action_space = TextBatch(AgentAction(), self.num_envs)
        self.metadata = {"autoreset_mode": AutoresetMode.NEXT_STEP, "render_modes": []}
        self._scenario_ids = list(scenario_ids) if scenario_ids is not None else None
        self.episodes = [Episode() for _ in range(self.num_envs)]  # sub-env i's state machine
        self._autoreset = np.zeros(self.num_envs, dtype=np.bool_)
        self._obs = np.full(self.num_envs, "", dtype=object)
        self.requests_sent: dict[str, int] = {}  # op -> count, for diagnostics and tests
        self._snapshot_moves: dict[int, bool] = {}  # replica -> serves export/import_snapshot (see fork)

    @property
    def session_ids(self) -> list[str | None]:
        return [e.session_id for e in self.episodes]

    @property
    def episode_ids(self) -> list[str | None]:
        return [e.episode_id for e in self.episodes]

    @property
    def current_scenarios(self) -> list[str | None]:
        return [e.scenario_id for e in self.episodes]

    @property
    def scenario_ids(self) -> list[str]:
        if self._scenario_ids is None:
            self._scenario_ids = [s["scenario_id"] for s in self._any_client().list_scenarios()]
        return self._scenario_ids

    # ------------------------------------------------------------------ requests (FleetVectorEnv overrides the hooks)

    def _any_client(self) -> BridgeClient:
        return self.clients[0]

    def _place(self, which: Sequence[int]) -> None:
        """Chooses the replica of each sub-env about to start an episode: fixed round-robin here."""

    def _collect(self, pending: Sequence[tuple[BridgeClient, int]]) -> list[dict[str, Any] | BridgeError]:
        return _collect_all(pending)

    def _submit(self, i_client: int, op: str, **fields: Any) -> tuple[BridgeClient, int]:
        self.requests_sent[op] = self.requests_sent.get(op, 0) + 1
        client = self.clients[i_client]
        return client, client.submit(op, **fields)

    def _reset_many(self, which: Sequence[int], scenarios: dict[int, str], seeds: dict[int, int]) -> dict[int, dict[str, Any]]:
        """Resets sub-envs ``which`` concurrently (reusing their sessions); returns their reset results."""

        def send(i: int) -> tuple[BridgeClient, int]:
            sid = self.episodes[i].session_id
            fields: dict[str, Any] = {"scenario_id": scenarios[i], "seed": seeds[i]}
            return self._submit(self.replica_of[i], "reset", **fields, **({} if sid is None else {"session_id": sid}))

        for i in which:
            self.episodes[i].check_open()
        self._place(which)
        replies = self._collect([send(i) for i in which])
        results: dict[int, dict[str, Any]] = {}
        retry = []
        for i, r in zip(which, replies):
            if isinstance(r, BridgeError):
                if not self.episodes[i].reopen(r):
                    raise r
                retry.append(i)  # the session is gone: open a new one
            else:
                results[i] = r
        if retry:
            self._place(retry)
            for i, r in zip(retry, self._collect([send(i) for i in retry])):
                if isinstance(r, BridgeError):
                    raise r
                results[i] = r
        return results

    def _begin(self, i: int, result: dict[str, Any], scenario: str, infos: dict[str, Any]) -> dict[str, Any]:
        """Sub-env ``i`` starts the episode of a reset ``result``; returns ``infos`` with its info added."""
        self._obs[i], info = self.episodes[i].begin(result, scenario)
        self._autoreset[i] = False
        return self._add_info(infos, info, i)

    def _draw(self, which: Sequence[int], options: dict[str, Any], seed: int | Sequence[int] | None) -> tuple[dict[int, str], dict[int, int]]:
        chosen = options.get("scenario_ids")
        if chosen is not None and len(chosen) != self.num_envs:
            raise ValueError(f"options['scenario_ids'] needs {self.num_envs} entries, got {len(chosen)}")
        one = options.get("scenario_id")
        scenarios: dict[int, str] = {}
        seeds: dict[int, int] = {}
        for i in which:
            if chosen is not None:
                scenarios[i] = str(chosen[i])
            elif one is not None:
                scenarios[i] = str(one)
            else:
                scenarios[i] = choose_scenario(self.np_random, self.scenario_ids)
            explicit = seed[i] if isinstance(seed, Sequence) else None
            seeds[i] = episode_seed(explicit, self.np_random)
        return scenarios, seeds

    def _add_info(self, vector_infos: dict[str, Any], env_info: dict[str, Any], env_num: int) -> dict[str, Any]:
        """gymnasium's ``VectorEnv._add_info`` (same arrays, dtypes and masks; tested against it),
        without the mask array it allocates for every key of every sub-env as the default of a
        ``dict.get`` and throws away (a third of a 64-env step's client time)."""
        n = self.num_envs
        for key, value in env_info.items():
            if key == "final_obs":
                array = vector_infos.get("final_obs")
                if array is None:
                    array = np.full(n, fill_value=None, dtype=object)
                array[env_num] = value
            elif isinstance(value, dict):
                array = self._add_info(vector_infos.get(key, {}), value, env_num)
            else:
                array = vector_infos.get(key)
                if array is None:
                    kind = type(value)
                    if kind in (int, float, bool) or issubclass(kind, np.number):
                        array = np.zeros(n, dtype=kind)
                    elif isinstance(value, np.ndarray):
                        array = np.zeros((n, *value.shape), dtype=value.dtype)
                    else:
                        array = np.full(n, fill_value=None, dtype=object)
                array[env_num] = value
            mask_key = f"_{key}"
            mask = vector_infos.get(mask_key)
            if mask is None:
                mask = np.zeros(n, dtype=np.bool_)
            mask[env_num] = True
            vector_infos[key], vector_infos[mask_key] = array, mask
        return vector_infos

    # ------------------------------------------------------------------ gymnasium API

    def reset(self, *, seed: int | Sequence[int] | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict[str, Any]]:
        if isinstance(seed, Sequence):
            if len(seed) != self.num_envs:
                raise ValueError(f"seed needs {self.num_envs} entries, got {len(seed)}")
            self._np_random, self._np_random_seed = seeding.np_random(int(seed[0]))
        elif seed is not None:
            self._np_random, self._np_random_seed = seeding.np_random(int(seed))
        options = dict(options or {})
        mask = options.get("reset_mask")
        which = [i for i in range(self.num_envs) if mask is None or bool(mask[i])]
        scenarios, seeds = self._draw(which, options, seed)
        results = self._reset_many(which, scenarios, seeds)
        infos: dict[str, Any] = {}
        for i in which:
            infos = self._begin(i, results[i], scenarios[i], infos)
        return self._obs.copy(), infos

    def step(self, actions: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        actions = list(actions)
        if len(actions) != self.num_envs:
            raise ValueError(f"need {self.num_envs} actions, got {len(actions)}")
        sessions = [e.session() for e in self.episodes]  # ResetNeeded / EnvClosed for misuse
        rewards = np.zeros(self.num_envs, dtype=np.float64)
        terminated = np.zeros(self.num_envs, dtype=np.bool_)
        truncated = np.zeros(self.num_envs, dtype=np.bool_)
        infos: dict[str, Any] = {}

        to_reset = [i for i in range(self.num_envs) if self._autoreset[i]]
        live = [i for i in range(self.num_envs) if not self._autoreset[i]]
        by_replica: dict[int, list[int]] = {}
        for i in live:
            by_replica.setdefault(self.replica_of[i], []).append(i)
        chunks = [(r, envs[k : k + STEP_BATCH_CHUNK]) for r, envs in sorted(by_replica.items()) for k in range(0, len(envs), STEP_BATCH_CHUNK)]

        # every batch goes out before any reply is awaited: the replicas step in parallel, and a
        # replica answers its first chunk while it works on the next
        batches = [(envs, self._submit(r, "step_batch", steps=[{"session_id": sessions[i], "action": plain_action(actions[i])} for i in envs])) for r, envs in chunks]
        try:
            scenarios, seeds = self._draw(to_reset, {}, None)
            reset_results = self._reset_many(to_reset, scenarios, seeds) if to_reset else {}
        except BaseException:
            for _, (client, rid) in batches:
                client.abandon(rid)  # nobody will collect them now
            raise
        replies = self._collect([p for _, p in batches])

        for (envs, _), answer in zip(batches, replies):
            if isinstance(answer, LOST_SESSION):  # the whole replica is gone: so is each episode on it
                reply: dict[str, Any] = {"results": [{"ok": False, "error": {"code": answer.code, "message": str(answer)}}] * len(envs)}
            elif isinstance(answer, BridgeError):
                raise answer
            else:
                reply = answer
            entries = reply.get("results", [])
            if len(entries) != len(envs):
                raise BridgeError(f"step_batch answered {len(entries)} of {len(envs)} steps", code="internal_error")
            for i, entry in zip(envs, entries):
                if entry.get("ok") is True:
                    step = step_tuple(entry["result"])
                else:
                    error = entry.get("error") or {}
                    code, message = str(error.get("code", "internal_error")), str(error.get("message", ""))
                    exc = error_for(code, message)
                    if not isinstance(exc, LOST_SESSION):
                        raise exc
                    step = lost_step(code, message)  # the episode is gone with its session: autoreset it next step
                self._obs[i], rewards[i], terminated[i], truncated[i], info = self.episodes[i].ended(step)
                infos = self._add_info(infos, info, i)
                self._autoreset[i] = bool(terminated[i] or truncated[i])

        for i, r in reset_results.items():
            infos = self._begin(i, r, scenarios[i], infos)
        return self._obs.copy(), rewards, terminated, truncated, infos

    def fork(self, source: int, targets: Sequence[int] | None = None) -> list[str | BridgeError]:
        """GRPO groups: sub-envs ``targets`` (default: all others) continue from sub-env ``source``'s
        episode as it is now: same state, random-number position, clock, step count and
        conversation, so the same actions give byte-identical observations, rewards and state hashes.

        The group is spread over the replicas: each target goes to its own replica (sub-env ``i``
        to replica ``i % len(endpoints)``, as at construction; a fleet deals the targets out over
        its live replicas in turn). The episode is exported once (``export_snapshot``) and imported
        once on each other replica that gets targets; the targets on the source's replica fork from
        a snapshot taken there. Every request of a round goes out before any reply is awaited.

        Returns one outcome per target, in order (``source`` left out): the new session id, or the
        ``BridgeError`` that target's fork got (a failed snapshot, export or import is the outcome of
        every target that needed it). A target whose fork failed keeps its previous episode as it
        was (session, observation, autoreset): retry or reset it. A target that forked has its
        previous session closed. Misuse raises before anything is sent: an index out of range, a
        target named twice, a closed vector env, a source with no episode (``ResetNeeded``).
        A bridge without ``export_snapshot`` (older than this client) gets the whole group on the
        source's replica, as before."""
        n = self.num_envs
        chosen = [i for i in range(n) if i != source] if targets is None else [int(t) for t in targets]
        for i in (source, *chosen):
            if not 0 <= int(i) < n:
                raise IndexError(f"sub-env index {i} is out of range for {n} sub-envs")
        if len(set(chosen)) != len(chosen):
            raise ValueError("a target is named twice")
        group = [i for i in chosen if i != source]
        sid = self.episodes[source].session()  # ResetNeeded / EnvClosed
        for i in group:
            self.episodes[i].check_open()
        if not group:
            return []
        home = self.replica_of[source]
        dest = self._fork_destinations(source, group)
        if any(d != home for d in dest.values()) and not (self._moves_snapshots(home) and all(self._moves_snapshots(d) for d in dest.values())):
            dest = dict.fromkeys(group, home)
        remote = sorted({d for d in dest.values() if d != home})
        outcome: dict[int, dict[str, Any] | BridgeError] = {}

        # round 1, on the source's session (in order, so both see the episode as it is now)
        first: list[tuple[BridgeClient, int]] = []
        if any(d == home for d in dest.values()):
            first.append(self._submit(home, "snapshot", session_id=sid))
        if remote:
            first.append(self._submit(home, "export_snapshot", session_id=sid))
        answers = self._collect(first)
        snap = answers.pop(0) if any(d == home for d in dest.values()) else None
        blob = answers.pop(0) if remote else None

        # round 2: the local forks, and one import on each other replica
        local = [i for i in group if dest[i] == home]
        sends: list[tuple[BridgeClient, int]] = []
        if isinstance(snap, BridgeError):
            outcome.update(dict.fromkeys(local, snap))
        elif snap is not None:
            sends += [self._submit(home, "fork", snapshot_id=snap["snapshot_id"]) for _ in local]
        if isinstance(blob, BridgeError):
            outcome.update({i: blob for i in group if dest[i] != home})
        elif blob is not None:
            sends += [self._submit(r, "import_snapshot", blob=blob["blob"]) for r in remote]
        replies = self._collect(sends)
        imported: dict[int, dict[str, Any] | BridgeError] = {}
        if snap is not None and not isinstance(snap, BridgeError):
            outcome.update(zip(local, replies[: len(local)]))
            replies = replies[len(local) :]
        if blob is not None and not isinstance(blob, BridgeError):
            imported = dict(zip(remote, replies))

        # round 3: the forks on the other replicas, from their imported snapshot
        moved = [i for i in group if dest[i] != home and i not in outcome]
        ready: list[tuple[int, dict[str, Any]]] = []
        for i in moved:
            held_here = imported[dest[i]]
            if isinstance(held_here, BridgeError):
                outcome[i] = held_here
            else:
                ready.append((i, held_here))
        forks = self._collect([self._submit(dest[i], "fork", snapshot_id=h["snapshot_id"]) for i, h in ready])
        outcome.update(zip([i for i, _ in ready], forks))

        # let go of the snapshots (nothing waits for these answers) and of the targets' old sessions
        held: list[tuple[int, dict[str, Any] | BridgeError | None]] = [(home, snap), *imported.items()]
        for at, h in held:
            if isinstance(h, dict):
                client, rid = self._submit(at, "drop_snapshot", snapshot_id=h["snapshot_id"])
                client.abandon(rid)
        results: list[str | BridgeError] = []
        for i in group:
            got = outcome[i]
            if isinstance(got, BridgeError):
                results.append(got)
                continue
            old_rep, old_sid = self.replica_of[i], self.episodes[i].session_id
            if old_sid is not None and old_rep >= 0 and not self.clients[old_rep].closed:
                client, rid = self._submit(old_rep, "close", session_id=old_sid)
                client.abandon(rid)
            self._moved(i, dest[i])
            self.episodes[i].started(str(got["session_id"]), got["info"])
            self._obs[i] = self._obs[source]
            self._autoreset[i] = self._autoreset[source]
            results.append(self.episodes[i].session())
        return results

    def _fork_destinations(self, source: int, group: Sequence[int]) -> dict[int, int]:
        """The replica each target of a fork group goes to: its own (round-robin by index) here."""
        return {i: i % len(self.clients) for i in group}

    def _moved(self, i: int, replica: int) -> None:
        """Sub-env ``i`` now has its episode on ``replica`` (a fleet also counts its placements)."""
        self.replica_of[i] = replica

    def _moves_snapshots(self, replica: int) -> bool:
        """Whether the replica serves export_snapshot/import_snapshot (asked once, with hello)."""
        if replica not in self._snapshot_moves:
            ops = self.clients[replica].hello().get("ops", [])
            self._snapshot_moves[replica] = "export_snapshot" in ops and "import_snapshot" in ops
        return self._snapshot_moves[replica]

    def state(self, index: int) -> dict[str, Any]:
        """Sub-env ``index``'s current env state."""
        return self.clients[self.replica_of[index]].state(self.episodes[index].session())

    def close_extras(self, **kwargs: Any) -> None:
        pending = []
        for i, episode in enumerate(self.episodes):
            sid = episode.close()
            client = self.clients[self.replica_of[i]] if self.replica_of[i] >= 0 else None
            if sid is not None and client is not None and not client.closed:
                try:
                    pending.append((client, client.submit("close", session_id=sid)))
                except Exception:
                    pass
        for client, rid in pending:
            try:
                client.collect(rid, timeout=min(5.0, client.timeout))
            except BridgeError:
                pass  # already closed, or the bridge is gone
        for c in self.clients:
            c.close()
