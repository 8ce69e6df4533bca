"""EnvScalerVectorEnv: N bridge sessions spread over the replicas, stepped with step_batch requests."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
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
    episode_seed,
    error_observation,
    lost_step,
    plain_action,
    refused_step,
    select_scenarios,
    step_tuple,
)
from .fleet_view import as_fleet_view
from .previous_episode import scored
from .protocol import BridgeError, BridgeTimeout, CodecError, SessionLost, ShuttingDown, error_for, packb
from .reachability import BridgeNotRunning, check_reachable
from .spaces import AgentAction, AnyText, TextBatch

__all__ = ["STEP_BATCH_CHUNK", "EnvScalerVectorEnv"]

#: Sub-envs per ``step_batch`` request. A replica answers a batch once all its steps are done, so
#: one batch of 64 leaves it idle while this process reads the answer and sends the next round;
#: in chunks the replica steps chunk k+1 while this process reads chunk k (a lockstep round of 64
#: library steps in one batch vs chunks of 16, raw, interleaved: 1.4-2.6x the rate on a loaded
#: 2-core machine).
STEP_BATCH_CHUNK = 16


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


@dataclass
class _Ended:
    """An episode a reset of a live sub-env ended: where, which, and its score once known."""

    replica: int  # the client index of the replica that served the reset (it keeps the score)
    episode_id: str
    result: dict[str, Any] | None  # None: scored "later", not fetched yet


def check_finish_previous(value: bool | str) -> bool | str:
    """The vector env's ``finish_previous``: "later" or True."""
    if value is not True and value != "later":
        raise ValueError(f'finish_previous must be "later" (the default: scored after the reset replies, fetched by previous_results()) or True (scored in the reset, in its infos); got {value!r}')
    return value


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
      running is ended by its reset in the same request, and ``infos["previous_episode"]`` says
      which episode that was (``episode_id``, ``finished``, ``step``, ``state_hash``). How it is
      scored is ``finish_previous``:

      * ``"later"`` (the default): the reset does not wait for that scoring. The replica scores
        the ended episodes after replying, on a scorer thread of its own (each costs ~2 ms of
        checks; scored in line, a reset of 64 live sub-envs on one replica waits for all of them
        before answering), and ``infos["previous_episode"]["pending"][i]`` is True.
        ``vec.previous_results()`` fetches their scores when wanted, in one concurrent round (see
        there). The default because a vector env's rewards come on terminal steps: a reset of live
        sub-envs cuts episodes short, and few trainers use those scores at the reset itself; and
        it is what ``EnvScalerEnv`` does.
      * ``True``: each reset scores its ended episode before replying, and the reset's infos
        carry the result (``infos["previous_episode"]["reward"][i]``, ``["end_reason"][i]``,
        ...), as before this option: for a trainer that needs those rewards in the reset's infos.
        ``previous_results()`` returns them too, without a request.

      A replica without ``reset_finish_previous_later`` scores in the reset either way.
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
        finish_previous: bool | str = "later",
    ) -> None:
        check_finish_previous(finish_previous)
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
        self._setup(scenario_ids, mode, finish_previous)

    def _setup(self, scenario_ids: Sequence[str] | None, mode: str | None = None, finish_previous: bool | str = "later") -> None:
        """What every vector env here holds once ``num_envs`` is known (FleetVectorEnv too)."""
        #: how a reset of a live sub-env scores the episode it ends: "later" or True (class doc)
        self.finish_previous = check_finish_previous(finish_previous)
        self._ended: dict[int, _Ended] = {}  # sub-env -> the episode its last reset of a live episode ended
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
        self._snapshot_moves: dict[int, bool] = {}  # replica -> serves export/import_snapshot (see fork)
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
        reset result or its error (never raises for one sub-env). A running episode is ended by
        its reset (``finish_previous``: "later" or True, see ``_finish_previous_on``) where the
        replica has that feature."""

        def send(i: int) -> Pending:
            sid = self.episodes[i].session_id
            fields: dict[str, Any] = {"scenario_id": scenarios[i], "seed": seeds[i]}
            if sid is not None:
                fields["session_id"] = sid
                finish = self._finish_previous_on(self.replica_of[i]) if self.episodes[i].live else False
                if finish:
                    fields["finish_previous"] = finish
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

    def _finish_previous_on(self, i_client: int) -> bool | str:
        """What a reset of a live episode on this replica sends as ``finish_previous``: "later" where
        asked for and the replica has ``reset_finish_previous_later``, else True where it has
        ``reset_finish_previous``, else nothing (an old bridge: the episode ends unscored)."""
        if self.finish_previous == "later" and self._supports(i_client, "reset_finish_previous_later"):
            return "later"
        return self._supports(i_client, "reset_finish_previous")

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

    def _reset_failed(self, i: int, error: BridgeError) -> dict[str, Any]:
        """Sub-env ``i``'s reset failed: it holds no episode and is reset again at the next step.
        Returns its info."""
        self.episodes[i].failed()
        self._obs[i] = error_observation(error.code, error.message)
        self._autoreset[i] = True
        return {"error": {"code": error.code, "message": error.message}}

    def _begin(self, i: int, result: dict[str, Any], scenario: str) -> dict[str, Any]:
        """Sub-env ``i`` starts the episode of a reset ``result``; returns its info."""
        self._obs[i], info = self.episodes[i].begin(result, scenario)
        self._autoreset[i] = False
        previous = info.get("previous_episode")
        if isinstance(previous, dict) and "reward" in previous:
            # a float, as step rewards are: a reward of 0 arrives as an int (§2), and the infos'
            # array takes its first value's type (an int array cut 0.33 to 0)
            previous = info["previous_episode"] = scored(previous)
        if isinstance(previous, dict) and previous.get("episode_id") is not None:
            # the episode this reset ended: its score is fetched by previous_results() ("later"),
            # or is here already (finish_previous=True, or an episode the bridge had ended itself)
            self._ended[i] = _Ended(self.replica_of[i], str(previous["episode_id"]), None if previous.get("pending") else dict(previous))
        return info

    def _reset_infos(self, results: dict[int, dict[str, Any] | BridgeError], scenarios: dict[int, str]) -> list[tuple[int, dict[str, Any]]]:
        """Each reset sub-env's ``(index, info)``, its episode begun (or its reset failed)."""
        return [(i, self._reset_failed(i, r) if isinstance(r, BridgeError) else self._begin(i, r, scenarios[i])) for i, r in results.items()]

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
                    array = self._info_array(value)
                array[env_num] = value
            mask_key = f"_{key}"
            mask = vector_infos.get(mask_key)
            if mask is None:
                mask = np.zeros(n, dtype=np.bool_)
            mask[env_num] = True
            vector_infos[key], vector_infos[mask_key] = array, mask
        return vector_infos

    def _info_array(self, value: Any) -> np.ndarray:
        """The array gymnasium makes for an info key whose first value is ``value``."""
        kind = type(value)
        if kind in (int, float, bool) or issubclass(kind, np.number):
            return np.zeros(self.num_envs, dtype=kind)
        if isinstance(value, np.ndarray):
            return np.zeros((self.num_envs, *value.shape), dtype=value.dtype)
        return np.full(self.num_envs, fill_value=None, dtype=object)

    def _add_infos(self, vector_infos: dict[str, Any], rows: Sequence[tuple[int, dict[str, Any]]]) -> dict[str, Any]:
        """``_add_info`` of every ``(env_num, info)`` in ``rows``, in order, with the same result
        (arrays, dtypes, masks, key order; tested against gymnasium's), built a key at a time: one
        look-up and one mask write per key instead of per key and sub-env (a 64-env step adds ~9
        keys per sub-env, a reset ~15)."""
        columns: dict[str, list[tuple[int, Any]]] = {}
        for env_num, info in rows:
            for key, value in info.items():
                column = columns.get(key)
                if column is None:
                    columns[key] = column = []
                column.append((env_num, value))
        if any(type(key) is not str or key.startswith("_") for key in columns):
            # a key that looks like another key's mask: only the one-by-one order gives gymnasium's result
            for env_num, info in rows:
                vector_infos = self._add_info(vector_infos, info, env_num)
            return vector_infos
        n = self.num_envs
        for key, column in columns.items():
            dicts = [isinstance(v, dict) for _, v in column]
            if key == "final_obs" or not any(dicts):
                array = vector_infos.get(key)
                if array is None:
                    array = np.full(n, fill_value=None, dtype=object) if key == "final_obs" else self._info_array(column[0][1])
                for env_num, value in column:
                    array[env_num] = value
            elif all(dicts):
                array = self._add_infos(vector_infos.get(key, {}), column)
            else:  # a key that is a dict for some sub-envs only: one by one, as gymnasium does
                for env_num, value in column:
                    vector_infos = self._add_info(vector_infos, {key: value}, env_num)
                continue
            mask_key = f"_{key}"
            mask = vector_infos.get(mask_key)
            if mask is None:
                mask = np.zeros(n, dtype=np.bool_)
            mask[[env_num for env_num, _ in column]] = True
            vector_infos[key], vector_infos[mask_key] = array, mask
        return vector_infos

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
        infos = self._add_infos({}, self._reset_infos({i: results[i] for i in which}, scenarios))
        return self._obs.copy(), infos

    def _encode_actions(self, live: Sequence[int], actions: Sequence[Any]) -> tuple[dict[int, Any], dict[int, int], dict[int, BridgeError]]:
        """Each live sub-env's action as sent, its encoded size, or why it cannot be sent (refused
        here, so that the other sub-envs' batch still goes out)."""
        wire: dict[int, Any] = {}
        size: dict[int, int] = {}
        refused: dict[int, BridgeError] = {}
        small_limit: dict[int, int] = {}  # per replica, the frame limit of a small action (asked once per call)
        for i in live:
            action = plain_action(actions[i])
            if action is None:
                small_limit.clear()  # _supports may ask the replica's hello, which can change its frame limit
                if not self._supports(self.replica_of[i], "null_action"):
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
            r = self.replica_of[i]
            if n + _ENTRY_OVERHEAD <= _ALWAYS_FITS:  # the common case: the same answer for every small action
                limit = small_limit.get(r, -1)
                if limit < 0:
                    limit = small_limit[r] = self._frame_limit(r, n + _ENTRY_OVERHEAD) - _FRAME_SLACK
            else:
                limit = self._frame_limit(r, n + _ENTRY_OVERHEAD) - _FRAME_SLACK
                small_limit.clear()  # that may have asked a replica's hello, which can change the answer
            if n > limit:
                refused[i] = error_for("too_large", f"the action is {n} bytes encoded, over what one request frame holds ({limit} of max_frame_bytes {limit + _FRAME_SLACK}); it was not sent")
                continue
            wire[i], size[i] = action, n
        return wire, size, refused

    def _batches(self, live: Sequence[int], size: dict[int, int]) -> list[tuple[int, list[int]]]:
        """The step_batch requests of ``live``: per replica, chunks of at most STEP_BATCH_CHUNK
        sub-envs, split sooner where a frame would be too big."""
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
                if chunk and (total + n > limit or len(chunk) >= STEP_BATCH_CHUNK):
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

        wire, size, refused = self._encode_actions(live, actions)
        sendable = [i for i in live if i in wire]
        # every batch goes out before any reply is awaited: the replicas step in parallel, and a
        # replica answers its first chunk while it works on the next (STEP_BATCH_CHUNK)
        batches = [(envs, self._try_submit(r, "step_batch", checked=True, steps=[{"session_id": sessions[i], "action": wire[i]} for i in envs])) for r, envs in self._batches(sendable, size)]
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
        rows: list[tuple[int, dict[str, Any]]] = []
        for i in live:
            self._obs[i], rewards[i], terminated[i], truncated[i], info = self.episodes[i].ended(outcome[i])
            rows.append((i, info))
            self._autoreset[i] = bool(terminated[i] or truncated[i])
        rows += self._reset_infos(reset_results, scenarios)
        return self._obs.copy(), rewards, terminated, truncated, self._add_infos({}, rows)

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

    def previous_results(self, indices: Sequence[int] | None = None) -> dict[int, dict[str, Any] | BridgeError]:
        """The scores of the episodes that resets of live sub-envs ended (``infos["previous_episode"]``).

        For each sub-env in ``indices`` (default: every sub-env that has one), the episode its last
        such reset ended: the dict a ``finish_previous=True`` reset carries (``episode_id``,
        ``finished``, ``reward``, ``end_reason``, ``reward_info``, ``step``, ``state_hash``, ...), or
        the ``BridgeError`` its fetch got. Sub-envs with no such episode are left out of the dict.
        Scores not yet fetched are asked in one round: one ``episode_result`` per episode, to the
        replica that ended it, all sent before any reply is awaited (each waits until its episode
        is scored). A fetched score is kept: asking again costs no request; a failed fetch is asked
        again next time. One sub-env's error never loses the others' scores. The entry of a
        sub-env stays until a later reset of that sub-env ends another live episode (autoresets
        after a terminal step end none). Raises only for misuse, before anything is sent: an index
        out of range, an index named twice, a closed env."""
        n = self.num_envs
        if indices is None:
            which = sorted(self._ended)
        else:
            which = [int(i) for i in indices]
            for i in which:
                if not 0 <= i < n:
                    raise IndexError(f"sub-env index {i} is out of range for {n} sub-envs")
            if len(set(which)) != len(which):
                raise ValueError("a sub-env is named twice")
            which = [i for i in which if i in self._ended]
        for e in self.episodes:
            e.check_open()  # EnvClosed
        ask = [i for i in which if self._ended[i].result is None]
        replies = self._collect([self._try_submit(self._ended[i].replica, "episode_result", episode_id=self._ended[i].episode_id) for i in ask])
        fetched = dict(zip(ask, replies))
        out: dict[int, dict[str, Any] | BridgeError] = {}
        for i in which:
            got = fetched.get(i)
            if isinstance(got, BridgeError):
                out[i] = got  # asked again next time
                continue
            if got is not None:
                self._ended[i].result = scored(got)
            result = self._ended[i].result
            assert result is not None
            out[i] = dict(result)
        return out

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

        # round 2: the local forks, and one import on each other replica. The imports are collected
        # first and each replica's forks sent as soon as its import is in, so the other replicas fork
        # while the source's replica is still forking its share (not after it)
        local = [i for i in group if dest[i] == home]
        local_sent: list[tuple[BridgeClient, int]] = []
        if isinstance(snap, BridgeError):
            outcome.update(dict.fromkeys(local, snap))
        elif snap is not None:
            local_sent = [self._submit(home, "fork", snapshot_id=snap["snapshot_id"]) for _ in local]
        imported: dict[int, dict[str, Any] | BridgeError] = {}
        if isinstance(blob, BridgeError):
            outcome.update({i: blob for i in group if dest[i] != home})
        elif blob is not None:
            imported = dict(zip(remote, self._collect([self._submit(r, "import_snapshot", blob=blob["blob"]) for r in remote])))

        # round 3: the forks on the other replicas, from their imported snapshot
        moved = [i for i in group if dest[i] != home and i not in outcome]
        ready: list[tuple[int, dict[str, Any]]] = []
        for i in moved:
            held_here = imported[dest[i]]
            if isinstance(held_here, BridgeError):
                outcome[i] = held_here
            else:
                ready.append((i, held_here))
        remote_sent = [self._submit(dest[i], "fork", snapshot_id=h["snapshot_id"]) for i, h in ready]
        replies = self._collect([*local_sent, *remote_sent])
        if local_sent:
            outcome.update(zip(local, replies[: len(local)]))
        outcome.update(zip([i for i, _ in ready], replies[len(local_sent) :]))

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
