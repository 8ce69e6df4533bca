"""EnvScalerVectorEnv: N bridge sessions spread over the replicas, stepped with one batch each."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np
from gymnasium.utils import seeding
from gymnasium.vector import AutoresetMode, VectorEnv

from .bridge_client import BridgeClient, CurveKeys
from .episode_logic import (
    LOST_SESSION,
    Episode,
    StepTuple,
    check_mode,
    check_seed,
    choose_scenario,
    close_session_quietly,
    episode_seed,
    error_observation,
    lost_step,
    plain_action,
    refused_step,
    select_scenarios,
    step_tuple,
)
from .fleet_view import as_fleet_view
from .protocol import BridgeError, BridgeTimeout, CodecError, SessionLost, ShuttingDown, error_for, packb
from .reachability import BridgeNotRunning, check_reachable
from .spaces import AgentAction, AnyText, TextBatch

__all__ = ["EnvScalerVectorEnv"]


#: A request that failed before its reply: not sent (a replica that takes nothing), or sent and
#: never collected. The vector env answers it per sub-env instead of raising.
Pending = tuple[BridgeClient, int] | BridgeError

#: A whole request that failed with one of these went to a replica that died, restarted, stopped
#: answering or is shutting down: every episode it held is lost (``session_lost``).
REPLICA_GONE = (*LOST_SESSION, BridgeTimeout, ShuttingDown)

#: A step entry refused with one of these codes did not run: the episode goes on unchanged and
#: the sub-env gets an error observation (``refused_step``). Any other code ends the sub-env's
#: episode truncated with that error (``lost_step``), and it is autoreset.
REFUSED_CODES = frozenset({"too_large", "bad_request", "overloaded", "recording_unavailable"})

#: Room a step_batch frame keeps for its envelope and each entry's session id and keys. @unit bytes
_FRAME_SLACK = 1024
_ENTRY_OVERHEAD = 256
#: A frame this small fits any bridge's limit: below it no replica is asked for its limit. @unit bytes
_ALWAYS_FITS = 64 << 10
#: The protocol's default max_frame_bytes, assumed for a replica that did not say. @unit bytes
_DEFAULT_FRAME_BYTES = 8 << 20
#: How long the vector env waits for a replica's hello (features, limits). @unit seconds
_HELLO_TIMEOUT_S = 5.0


def _collect_all(pending: Sequence[Pending]) -> list[dict[str, Any] | BridgeError]:
    """Collects every submitted request (each replica worked on its own meanwhile), errors included.

    One deadline for all of them (the longest client timeout from now): a replica that stopped
    answering costs one timeout, not one per replica."""
    out: list[dict[str, Any] | BridgeError] = []
    waits = [p[0].timeout for p in pending if not isinstance(p, BridgeError)]
    deadline = time.monotonic() + (max(waits) if waits else 0.0)
    for p in pending:
        if isinstance(p, BridgeError):
            out.append(p)
            continue
        client, rid = p
        try:
            out.append(client.collect(rid, timeout=max(0.001, deadline - time.monotonic())))
        except BridgeError as e:
            out.append(e)
        except BridgeNotRunning as e:  # nothing listens there any more
            out.append(SessionLost(str(e)))
    return out


class EnvScalerVectorEnv(VectorEnv):
    """``num_envs`` sub-envs, sub-env ``i`` on endpoint ``i % len(endpoints)`` (round-robin over replicas).

    - ``step(actions)`` sends ONE ``step_batch`` to each replica that has live sub-envs, all before
      waiting for any reply, so the replicas work concurrently; the step costs the slowest
      replica's time, not the sum.
    - Autoreset is ``AutoresetMode.NEXT_STEP``: a sub-env that ends on step t is reset on step
      t+1 (its action there is ignored), giving the reset observation, reward 0 and
      terminated/truncated False.
    - Observations are a numpy object array of strings; rewards float64; terminated/truncated bool.
    - ``info`` uses gymnasium's vector format: a dict whose keys hold arrays over the sub-envs
      plus a boolean mask ``_key`` of the sub-envs that have that key (nested dicts recurse). A
      step info is the bridge's step info plus ``observation``; an autoreset sub-env's is its
      reset info. Use ``gymnasium.wrappers.vector.DictInfoToList`` for a list of dicts.
    - **Every sub-env gets its own outcome; one sub-env's failure never raises for the others.**
      ``step`` and ``reset`` raise only for misuse of the vector env itself, before anything is
      sent: a wrong number of actions (or seeds, or scenario ids), a seed outside
      0 <= seed < 2^32, a step before the first reset, a closed env. Otherwise, per sub-env ``i``:

      * *a refused action* (over the bridge's ``max_action_bytes``, or too big for a frame
        (``hello``'s ``max_frame_bytes``: found before sending, so the other sub-envs' batch
        still goes out), not encodable, or refused by the replica: ``too_large``,
        ``bad_request``, ``overloaded``, ``recording_unavailable``) did not run: the episode goes
        on unchanged; the step gives an error observation the agent can read
        (``{"error": {"type": code, "message"}}``), reward 0, not terminated nor truncated, and
        ``infos["error"]["code"][i]``. ``None`` is an action like any other unreadable one (the
        bridge answers ``invalid_action`` and counts the step).
      * *a lost episode* (the replica died, restarted, stopped answering within ``timeout``, is
        shutting down; the session was closed or reaped; any other error code) ends truncated,
        reward 0, with ``infos["error"]["code"][i]`` (``session_lost`` for a lost replica), and
        is autoreset in a new session at the next step.
      * *a failed reset* (an unknown scenario id, an env fault at reset, the replica gone) gives
        an error observation and ``infos["error"]["code"][i]`` for that sub-env; it keeps no
        episode (``state(i)`` raises ResetNeeded) and is reset again at the next ``step`` (its
        action there is ignored), drawing a scenario from ``scenario_ids``.
    - ``reset(seed=..., options={"scenario_ids": [...]})``: one scenario per sub-env (or
      ``"scenario_id"`` for all); otherwise drawn from ``scenario_ids`` with ``np_random``.
      ``options["reset_mask"]`` resets only some sub-envs. A sub-env whose episode is still
      running is ended and scored by its reset in the same request (its result in
      ``infos["previous_episode"]``).
    - ``mode="task"|"conversation"`` draws only scenarios of that mode (see
      ``episode_logic.select_scenarios``).
    - ``finish(mask)`` ends and scores the running episodes of the sub-envs in ``mask`` now; they
      are autoreset at the next step.
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
        mode: str | None = None,
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
        limits = [c.hello_info()["limits"] for c in self.clients]
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
        self._setup(scenario_ids, mode)

    def _setup(self, scenario_ids: Sequence[str] | None, mode: str | None = None) -> None:
        """What every vector env here holds once ``num_envs`` is known (FleetVectorEnv too)."""
        self.single_observation_space = AnyText()
        self.single_action_space = AgentAction()
        self.observation_space = TextBatch(AnyText(), self.num_envs)
        self.action_space = TextBatch(AgentAction(), self.num_envs)
        self.metadata = {"autoreset_mode": AutoresetMode.NEXT_STEP, "render_modes": []}
        self.mode = check_mode(mode)
        self._given_scenarios = list(scenario_ids) if scenario_ids is not None else None
        self._scenario_ids = self._given_scenarios if mode is None else None
        self.episodes = [Episode() for _ in range(self.num_envs)]  # sub-env i's state machine
        self._autoreset = np.zeros(self.num_envs, dtype=np.bool_)
        self._obs = np.full(self.num_envs, "", dtype=object)
        self.requests_sent: dict[str, int] = {}  # op -> count, for diagnostics and tests
        self._hello_failed: set[BridgeClient] = set()  # replicas that did not answer hello

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
            self._scenario_ids = select_scenarios(self._any_client().list_scenarios(), self._given_scenarios, self.mode)
        return self._scenario_ids

    # ------------------------------------------------------------------ requests (FleetVectorEnv overrides the hooks)

    def _any_client(self) -> BridgeClient:
        return self.clients[0]

    def _place(self, which: Sequence[int]) -> None:
        """Chooses the replica of each sub-env about to start an episode: fixed round-robin here."""

    def _collect(self, pending: Sequence[Pending]) -> list[dict[str, Any] | BridgeError]:
        return _collect_all(pending)

    def _submit(self, i_client: int, op: str, **fields: Any) -> tuple[BridgeClient, int]:
        self.requests_sent[op] = self.requests_sent.get(op, 0) + 1
        client = self.clients[i_client]
        return client, client.submit(op, **fields)

    def _reset_many(self, which: Sequence[int], scenarios: dict[int, str], seeds: dict[int, int]) -> dict[int, dict[str, Any] | BridgeError]:
        """Resets sub-envs ``which`` concurrently (reusing their sessions); returns each one's
        reset result or its error (never raises for one sub-env). A running episode is ended and
        scored by its reset (``finish_previous``) where the replica has that feature."""

        def send(i: int) -> Pending:
            sid = self.episodes[i].session_id
            fields: dict[str, Any] = {"scenario_id": scenarios[i], "seed": seeds[i]}
            if sid is not None:
                fields["session_id"] = sid
                if self.episodes[i].live and self._supports(self.replica_of[i], "reset_finish_previous"):
                    fields["finish_previous"] = True
            return self._try_submit(self.replica_of[i], "reset", **fields)

        for i in which:
            self.episodes[i].check_open()
        self._place(which)
        replies = self._collect([send(i) for i in which])
        results: dict[int, dict[str, Any] | BridgeError] = {}
        retry = []
        for i, r in zip(which, replies):
            if isinstance(r, BridgeError) and self.episodes[i].reopen(r):
                retry.append(i)  # the session is gone: open a new one
            else:
                results[i] = r
        if retry:
            self._place(retry)
            for i, r in zip(retry, self._collect([send(i) for i in retry])):
                results[i] = r
        return results

    def _hello(self, i_client: int) -> dict[str, Any] | None:
        """The replica's ``hello`` (features, limits): asked once per client, briefly; None when
        the replica did not answer (it is not asked again: its requests will say what is wrong)."""
        client = self.clients[i_client]
        if client.last_hello is not None:
            return client.last_hello
        if client.closed or client in self._hello_failed:
            return None
        try:
            return client.hello(timeout=min(client.timeout, _HELLO_TIMEOUT_S))
        except (BridgeError, BridgeNotRunning):
            self._hello_failed.add(client)
            return None

    def _supports(self, i_client: int, feature: str) -> bool:
        hello = self._hello(i_client)
        return hello is not None and feature in (hello.get("features") or ())

    def _frame_limit(self, i_client: int, need: int) -> int:
        """The most bytes one request frame to this replica may hold (``hello``'s
        ``max_frame_bytes``); not asked for when ``need`` bytes fit any frame limit."""
        if need <= _ALWAYS_FITS and self.clients[i_client].last_hello is None:
            return _ALWAYS_FITS + _FRAME_SLACK
        hello = self._hello(i_client)
        try:
            return int(hello["limits"]["max_frame_bytes"]) if hello is not None else _DEFAULT_FRAME_BYTES
        except (KeyError, TypeError, ValueError):
            return _DEFAULT_FRAME_BYTES

    def _try_submit(self, i_client: int, op: str, **fields: Any) -> Pending:
        """``_submit``, with a request that cannot be sent (the replica takes nothing) as its error."""
        try:
            return self._submit(i_client, op, **fields)
        except BridgeError as e:
            return e
        except (BridgeNotRunning, RuntimeError) as e:  # nothing listens there; a closed client
            return SessionLost(str(e))

    def _reset_failed(self, i: int, error: BridgeError, infos: dict[str, Any]) -> dict[str, Any]:
        """Sub-env ``i``'s reset failed: it holds no episode and is reset again at the next step."""
        self.episodes[i].failed()
        self._obs[i] = error_observation(error.code, error.message)
        self._autoreset[i] = True
        return self._add_info(infos, {"error": {"code": error.code, "message": error.message}}, i)

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

    # ------------------------------------------------------------------ gymnasium API

    def reset(self, *, seed: int | Sequence[int] | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict[str, Any]]:
        for e in self.episodes:
            e.check_open()
        if isinstance(seed, Sequence):
            if len(seed) != self.num_envs:
                raise ValueError(f"seed needs {self.num_envs} entries, got {len(seed)}")
            for k, x in enumerate(seed):
                check_seed(x, f"seed[{k}]")
            self._np_random, self._np_random_seed = seeding.np_random(int(seed[0]))
        elif seed is not None:
            check_seed(seed)
            self._np_random, self._np_random_seed = seeding.np_random(int(seed))
        options = dict(options or {})
        mask = options.get("reset_mask")
        which = [i for i in range(self.num_envs) if mask is None or bool(mask[i])]
        scenarios, seeds = self._draw(which, options, seed)
        results = self._reset_many(which, scenarios, seeds)
        infos: dict[str, Any] = {}
        for i in which:
            r = results[i]
            infos = self._reset_failed(i, r, infos) if isinstance(r, BridgeError) else self._begin(i, r, scenarios[i], infos)
        return self._obs.copy(), infos

    def _encode_actions(self, live: Sequence[int], actions: Sequence[Any]) -> tuple[dict[int, Any], dict[int, int], dict[int, BridgeError]]:
        """Each live sub-env's action as sent, its encoded size, or why it cannot be sent (refused
        here, so that the other sub-envs' batch still goes out)."""
        wire: dict[int, Any] = {}
        size: dict[int, int] = {}
        refused: dict[int, BridgeError] = {}
        for i in live:
            action = plain_action(actions[i])
            if action is None and not self._supports(self.replica_of[i], "null_action"):
                refused[i] = error_for("bad_request", "the action is None (this bridge refuses a null action)")
                continue
            if isinstance(action, str):  # the common case, sized without encoding it twice
                n = (len(action) if action.isascii() else 4 * len(action)) + 16  # an upper bound for UTF-8
            else:
                try:
                    n = len(packb(action))
                except CodecError as e:
                    refused[i] = error_for("bad_request", f"the action cannot be sent: {e}")
                    continue
            limit = self._frame_limit(self.replica_of[i], n + _ENTRY_OVERHEAD) - _FRAME_SLACK
            if n > limit:
                refused[i] = error_for("too_large", f"the action is {n} bytes encoded, over what one request frame holds ({limit} of max_frame_bytes {limit + _FRAME_SLACK}); it was not sent")
                continue
            wire[i], size[i] = action, n
        return wire, size, refused

    def _batches(self, live: Sequence[int], size: dict[int, int]) -> list[tuple[int, list[int]]]:
        """The step_batch requests of ``live``: one per replica, split where a frame would be too big."""
        by_replica: dict[int, list[int]] = {}
        for i in live:
            by_replica.setdefault(self.replica_of[i], []).append(i)
        out: list[tuple[int, list[int]]] = []
        for r, envs in sorted(by_replica.items()):
            limit = self._frame_limit(r, sum(size[i] + _ENTRY_OVERHEAD for i in envs)) - _FRAME_SLACK
            chunk: list[int] = []
            total = 0
            for i in envs:
                n = size[i] + _ENTRY_OVERHEAD
                if chunk and total + n > limit:
                    out.append((r, chunk))
                    chunk, total = [], 0
                chunk.append(i)
                total += n
            out.append((r, chunk))
        return out

    def step(self, actions: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        actions = list(actions)
        if len(actions) != self.num_envs:
            raise ValueError(f"need {self.num_envs} actions, got {len(actions)}")
        to_reset = [i for i in range(self.num_envs) if self._autoreset[i]]
        live = [i for i in range(self.num_envs) if not self._autoreset[i]]
        for e in self.episodes:
            e.check_open()  # EnvClosed
        sessions = {i: self.episodes[i].session() for i in live}  # ResetNeeded: a step before the first reset
        rewards = np.zeros(self.num_envs, dtype=np.float64)
        terminated = np.zeros(self.num_envs, dtype=np.bool_)
        truncated = np.zeros(self.num_envs, dtype=np.bool_)
        infos: dict[str, Any] = {}

        wire, size, refused = self._encode_actions(live, actions)
        sendable = [i for i in live if i in wire]
        # every batch goes out before any reply is awaited: the replicas step in parallel
        batches = [(envs, self._try_submit(r, "step_batch", steps=[{"session_id": sessions[i], "action": wire[i]} for i in envs])) for r, envs in self._batches(sendable, size)]
        try:
            scenarios, seeds = self._draw(to_reset, {}, None)
            reset_results = self._reset_many(to_reset, scenarios, seeds) if to_reset else {}
        except BaseException:
            for _, p in batches:
                if not isinstance(p, BridgeError):
                    p[0].abandon(p[1])  # nobody will collect them now
            raise
        replies = self._collect([p for _, p in batches])

        outcome: dict[int, StepTuple] = {i: refused_step(e.code, e.message) for i, e in refused.items()}
        for (envs, _), reply in zip(batches, replies):
            entries = [] if isinstance(reply, BridgeError) else list(reply.get("results", []))
            failed = reply if isinstance(reply, BridgeError) else None
            if failed is None and len(entries) != len(envs):
                failed = error_for("internal_error", f"step_batch answered {len(entries)} of {len(envs)} steps")
            if failed is not None:
                for i in envs:
                    outcome[i] = self._batch_failed(i, failed)
                continue
            for i, entry in zip(envs, entries):
                if entry.get("ok") is True:
                    outcome[i] = step_tuple(entry["result"])
                else:
                    error = entry.get("error") or {}
                    outcome[i] = self._step_failed(str(error.get("code", "internal_error")), str(error.get("message", "")))
        for i in live:
            self._obs[i], rewards[i], terminated[i], truncated[i], info = self.episodes[i].ended(outcome[i])
            infos = self._add_info(infos, info, i)
            self._autoreset[i] = bool(terminated[i] or truncated[i])

        for i, r in reset_results.items():
            infos = self._reset_failed(i, r, infos) if isinstance(r, BridgeError) else self._begin(i, r, scenarios[i], infos)
        return self._obs.copy(), rewards, terminated, truncated, infos

    @staticmethod
    def _step_failed(code: str, message: str) -> StepTuple:
        """One step entry's error as that sub-env's outcome."""
        if code in REFUSED_CODES:
            return refused_step(code, message)  # not run: the episode goes on
        return lost_step(code, message)  # its episode is over (lost with its session, or broken): autoreset it

    def _batch_failed(self, i: int, error: BridgeError) -> StepTuple:
        """The outcome of sub-env ``i`` when its whole step_batch failed."""
        if isinstance(error, REPLICA_GONE):
            # the replica died, restarted or stopped answering mid-step: every episode on it is
            # lost; a session that may still be there is closed without waiting for an answer
            sid = self.episodes[i].session_id
            client = self.clients[self.replica_of[i]]
            if isinstance(error, BridgeTimeout) and sid is not None and not client.closed:
                try:
                    client.abandon(client.submit("close", session_id=sid))
                except (BridgeError, RuntimeError):
                    pass
            self.episodes[i].forget()
            return lost_step("session_lost", f"{error.code}: {error.message}" if error.code != "session_lost" else error.message)
        return self._step_failed(error.code, error.message)

    def finish(self, mask: Sequence[bool] | np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Ends and scores now the running episodes of the sub-envs in ``mask`` (default: all), as
        ``EnvScalerEnv.finish`` does (``end_reason: "client"``). Returns ``step``'s 5 arrays for
        them (the others: their last observation, reward 0, False, no info); the finished sub-envs
        are autoreset at the next ``step``. A sub-env whose finish fails gets its error as its
        outcome (``infos["error"]``), never an exception."""
        if mask is not None and len(mask) != self.num_envs:
            raise ValueError(f"mask needs {self.num_envs} entries, got {len(mask)}")
        for e in self.episodes:
            e.check_open()
        which = [i for i in range(self.num_envs) if (mask is None or bool(mask[i])) and self.episodes[i].live and not self._autoreset[i]]
        rewards = np.zeros(self.num_envs, dtype=np.float64)
        terminated = np.zeros(self.num_envs, dtype=np.bool_)
        truncated = np.zeros(self.num_envs, dtype=np.bool_)
        infos: dict[str, Any] = {}
        replies = self._collect([self._try_submit(self.replica_of[i], "finish", session_id=self.episodes[i].session()) for i in which])
        for i, r in zip(which, replies):
            step = self._batch_failed(i, r) if isinstance(r, BridgeError) else step_tuple(r)
            self._obs[i], rewards[i], terminated[i], truncated[i], info = step
            self.episodes[i].live = False
            self._autoreset[i] = True
            infos = self._add_info(infos, info, i)
        return self._obs.copy(), rewards, terminated, truncated, infos

    def fork(self, source: int, targets: Sequence[int] | None = None) -> list[str]:
        """GRPO groups: sub-envs ``targets`` (default: all others) continue from sub-env ``source``'s
        episode as it is now (one snapshot, then one fork per target, on ``source``'s replica: a
        snapshot lives where it was taken). Their previous sessions are closed. Returns the new
        session ids; the next ``step`` steps every sub-env as usual."""
        sid = self.episodes[source].session()
        targets = [i for i in (range(self.num_envs) if targets is None else targets) if i != source]
        replica = self.replica_of[source]
        client = self.clients[replica]
        snap = client.snapshot(sid)["snapshot_id"]
        try:
            replies = _collect_all([self._submit(replica, "fork", snapshot_id=snap) for _ in targets])
        finally:
            client.drop_snapshot(snap)
        old = [(self.replica_of[i], self.session_ids[i]) for i in targets]
        failed = next((r for r in replies if isinstance(r, BridgeError)), None)
        if failed is not None:
            for r in replies:  # nothing half-done: forks that did open are closed again
                if not isinstance(r, BridgeError):
                    close_session_quietly(client, r["session_id"])
            raise failed
        for i, r in zip(targets, replies):
            assert not isinstance(r, BridgeError)  # raised above
            self.episodes[i].started(str(r["session_id"]), r["info"])
            self.replica_of[i] = replica
            self._obs[i] = self._obs[source]
            self._autoreset[i] = self._autoreset[source]
        for rep, old_sid in old:
            if old_sid is not None:
                close_session_quietly(self.clients[rep], old_sid)
        return [self.episodes[i].session() for i in targets]

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
