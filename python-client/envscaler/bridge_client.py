"""BridgeClient: a blocking client of one bridge replica (docs/protocol.md §1-§4).

One DEALER socket, so several requests may be in flight (``submit`` then ``collect``) and replies
are matched by ``id``. A reply nobody waits for any more (its request timed out) is dropped by id,
so a timeout never leaves the socket out of step with the bridge, unlike a REQ socket.
"""

from __future__ import annotations

import itertools
import json
import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

import zmq

from .opening_cache import FEATURE as OPENINGS_FEATURE
from .opening_cache import OpeningCache
from .protocol import (
    PROTOCOL_VERSION,
    BridgeError,
    BridgeExited,
    BridgeTimeout,
    CodecError,
    InternalError,
    error_for,
    expand_reply,
    packb,
    unpackb,
)
from .reachability import BridgeNotRunning, check_reachable

__all__ = ["BridgeClient", "CurveKeys", "apply_curve", "connect_dealer"]

#: The CurveZMQ keys a client needs, as the connection file holds them (Z85 strings).
CurveKeys = Mapping[str, str]


def apply_curve(socket: zmq.Socket[Any], curve: CurveKeys | None) -> None:
    """Makes ``socket`` a CurveZMQ client of the server whose key is in ``curve``."""
    if not curve:
        return
    try:
        server, public, secret = curve["server_public_key"], curve["client_public_key"], curve["client_secret_key"]
    except KeyError as e:
        raise ValueError(f"curve keys need server_public_key, client_public_key and client_secret_key (missing {e})") from None
    socket.curve_serverkey = server.encode("ascii") if isinstance(server, str) else server
    socket.curve_publickey = public.encode("ascii") if isinstance(public, str) else public
    socket.curve_secretkey = secret.encode("ascii") if isinstance(secret, str) else secret


S = TypeVar("S", bound="zmq.Socket[Any]")

#: How long a client that has had no reply yet waits before it checks whether anything listens at
#: its endpoint (a DEALER's connect never fails, so a bridge that is not running would otherwise
#: show only as the request's timeout, a minute later). @unit seconds
PROBE_AFTER_S = 1.0


#: How often a client given a ``gone`` check (a launched bridge's process) asks it while a reply is
#: late: a bridge that exited fails the call within this, not after the whole timeout. @unit seconds
WATCH_EVERY_S = 0.5


def connect_dealer(socket: S, endpoint: str, curve: CurveKeys | None) -> S:
    """Connects a new DEALER socket (a blocking or an asyncio one) to ``endpoint``; closes it if that fails."""
    socket.linger = 0  # close() never blocks on replies or requests nobody will read
    try:
        apply_curve(socket, curve)
        socket.connect(endpoint)
    except BaseException:
        socket.close(linger=0)
        raise
    return socket


def _last_frame(frames: Sequence[bytes]) -> bytes:
    # a reply to a REQ-style request carries the empty delimiter in front; the body is last
    return frames[-1] if frames else b""


class BridgeClient:
    """A blocking client of one replica.

    ``timeout`` (seconds) bounds every request unless the call gives its own. ``curve`` holds the
    connection file's ``curve`` keys when the bridge requires CurveZMQ. Thread-safe: one lock
    serialises socket use (ZeroMQ sockets are not thread-safe).

    ``gone``: says why the bridge can no longer answer (``Bridge.exited()`` of a launched bridge:
    "bridge exited (exit code N)"), or None while it runs. Asked every ``WATCH_EVERY_S`` while a
    reply is late; when it answers, the call raises :class:`~envscaler.BridgeExited` at once
    instead of waiting out ``timeout``. Without it (only an endpoint) a dead bridge shows as the
    timeout, whose message then says whether anything still listens at the endpoint.
    """

    def __init__(
        self,
        endpoint: str,
        timeout: float = 60.0,
        curve: CurveKeys | None = None,
        context: zmq.Context[zmq.Socket[bytes]] | None = None,
        retries: int = 0,
        gone: Callable[[], str | None] | None = None,
    ) -> None:
        self.endpoint = endpoint
        self.gone = gone
        self.timeout = float(timeout)
        self.retries = int(retries)
        self._ctx = context or zmq.Context.instance()
        socket = self._ctx.socket(zmq.DEALER)
        # a fixed identity survives reconnects, so the bridge recognises a retried request (same
        # id, same identity) and answers it without running it again (docs/protocol.md §3)
        socket.setsockopt(zmq.IDENTITY, b"py-" + os.urandom(12))
        # a DEALER with no live connection blocks in send (after a refused CurveZMQ handshake the
        # pipe is gone): bound that wait by the timeout too, instead of hanging forever
        socket.setsockopt(zmq.SNDTIMEO, max(1, int(self.timeout * 1000)))
        self._socket = connect_dealer(socket, endpoint, curve)
        self.closed = False
        self._ids = itertools.count(1)
        self._lock = threading.RLock()
        # ids sent and not yet collected -> the reply once it arrived (None while waiting)
        self._pending: dict[int, dict[str, Any] | None] = {}
        self.discarded = 0  # replies that arrived for nobody (late, after a timeout)
        self._heard = False  # a reply came from the endpoint (from then on a silence is a timeout, not a probe)
        self._rcvtimeo = -1  # the socket's RCVTIMEO now (ms): set only when a wait needs another
        self._hello: dict[str, Any] | None = None  # the last hello's result (features, limits)
        self._openings = OpeningCache()  # reset openings kept, named in later resets (feature reset_known_opening)
        self._name_openings = False  # the bridge's hello lists that feature

    # ------------------------------------------------------------------ context manager

    def __enter__(self) -> BridgeClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"BridgeClient({self.endpoint!r})"

    # ------------------------------------------------------------------ requests

    def submit(self, op: str, *, checked: bool = False, **fields: Any) -> int:
        """Sends one request without waiting; returns its id for ``collect``.

        ``checked=True``: the caller has encoded every field value with ``protocol.packb`` already
        (or knows it to be a str), so the codec's walk over the request is skipped (the vector env
        encodes each action to size it; walking a batch of them again cost ~1 µs per sub-env)."""
        with self._lock:
            self._check_open()
            self._check_gone()  # a send to an exited bridge could block for the whole timeout
            rid = next(self._ids)
            if op == "reset" and self._name_openings:
                fields = self._openings.outgoing(fields)
            frame = packb({"v": PROTOCOL_VERSION, "id": rid, "op": op, **fields}, checked=checked)
            self._pending[rid] = None
            try:
                self._socket.send(frame)
            except zmq.Again:
                self._pending.pop(rid, None)
                raise self._unsendable(op) from None
            except BaseException:
                self._pending.pop(rid, None)
                raise
            return rid

    def collect(self, rid: int, timeout: float | None = None, keep: bool = False) -> dict[str, Any]:
        """Waits for the reply to request ``rid``; returns its ``result`` or raises its error.

        ``keep=True``: a timeout leaves the request pending, so it can be collected again later
        (a fleet client waits in slices, checking between them that the replica still exists)."""
        reply = self._wait(rid, self.timeout if timeout is None else timeout, keep)
        if reply.get("ok") is True:
            result = reply.get("result")
            return result if isinstance(result, dict) else {}
        error = reply.get("error") or {}
        raise error_for(str(error.get("code", "internal_error")), str(error.get("message", "")))

    def abandon(self, rid: int) -> None:
        """Stops waiting for request ``rid``: its reply, if it comes, is discarded."""
        with self._lock:
            self._pending.pop(rid, None)

    def request(self, op: str, *, timeout: float | None = None, retries: int | None = None, **fields: Any) -> dict[str, Any]:
        """Sends ``{"v": 1, "id": n, "op": op, **fields}`` and returns the reply's ``result``.

        After a timeout the same request (same id) is sent again up to ``retries`` times (default:
        the client's); the bridge answers a repeat with the first reply and never runs it twice.
        Raises the BridgeError subclass of the reply's code, or BridgeTimeout.
        """
        tries = (self.retries if retries is None else int(retries)) + 1
        rid = self.submit(op, **fields)
        for attempt in range(tries):
            try:
                return self.collect(rid, timeout, keep=attempt < tries - 1)
            except BridgeTimeout:
                if attempt == tries - 1:
                    raise
                with self._lock:
                    try:
                        self._socket.send(packb({"v": PROTOCOL_VERSION, "id": rid, "op": op, **fields}))
                    except zmq.Again:
                        raise self._unsendable(op) from None
        raise AssertionError("unreachable")

    def _unsendable(self, op: str) -> BridgeTimeout:
        return BridgeTimeout(f"could not send {op} to {self.endpoint} within {self.timeout:g} s: no connection takes it (the bridge is not running, or it refused this client's CurveZMQ key)")

    def _wait(self, rid: int, timeout: float, keep: bool = False) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        with self._lock:
            if rid not in self._pending:
                raise ValueError(f"request {rid} was never submitted or was already collected")
            probe_at = None if self._heard else time.monotonic() + PROBE_AFTER_S
            try:
                while self._pending.get(rid) is None:
                    now = time.monotonic()
                    until = deadline if probe_at is None else min(deadline, probe_at)
                    if self.gone is not None:
                        until = min(until, now + WATCH_EVERY_S)
                    if until - now > 0 and self._receive(until - now):
                        continue
                    self._check_gone()
                    now = time.monotonic()
                    if probe_at is not None and probe_at <= now < deadline:
                        probe_at = None
                        self._probe()  # nothing there: BridgeNotRunning, naming the endpoint
                        continue
                    if now >= deadline:
                        raise BridgeTimeout(f"no reply from {self.endpoint} within {timeout:g} s ({self._silence_hint()})")
                reply = self._pending[rid]
                assert reply is not None
                self._pending.pop(rid, None)
                return reply
            except BridgeTimeout:
                if not keep:
                    self._pending.pop(rid, None)
                raise
            except BaseException:
                # given up on: a late reply to this id is discarded from now on
                self._pending.pop(rid, None)
                raise

    def _check_gone(self) -> None:
        why = self.gone() if self.gone is not None else None
        if why:
            raise BridgeExited(f"{why}: no reply will come from {self.endpoint}")

    def _probe(self) -> None:
        try:
            check_reachable(self.endpoint)
        except BridgeNotRunning:
            self._check_gone()  # a launched bridge that exited says so, not "start one with serve"
            raise

    def _silence_hint(self) -> str:
        """Why a reply may not have come, for the timeout's message."""
        try:
            check_reachable(self.endpoint, timeout=1.0)
        except BridgeNotRunning:
            return f"nothing accepts connections at {self.endpoint} any more: the bridge has most likely exited"
        return "the bridge may be gone, or be busy for longer than that; is it still running?"

    def _receive(self, wait: float) -> bool:
        """Receives one message, waiting up to ``wait`` seconds; False if none came.

        A blocking receive bounded by RCVTIMEO, not a poll and then a non-blocking receive: one
        call into libzmq per reply instead of a Poller built per wait and a ``zmq.Again`` raised
        to end each read (both cost more than the codec on a small step)."""
        ms = max(1, int(wait * 1000) + 1)
        if ms != self._rcvtimeo:
            self._socket.setsockopt(zmq.RCVTIMEO, ms)
            self._rcvtimeo = ms
        try:
            frames = self._socket.recv_multipart()
        except zmq.Again:
            return False
        try:
            reply = self._openings.incoming(expand_reply(unpackb(_last_frame(frames))))
        except CodecError:
            self.discarded += 1
            return True
        rid = reply.get("id") if isinstance(reply, dict) else None
        self._heard = True
        if type(rid) is int and rid in self._pending and self._pending[rid] is None:
            self._pending[rid] = reply
        else:
            self.discarded += 1
        return True

    # ------------------------------------------------------------------ raw frames (tests of hostile input)

    def send_raw(self, frames: bytes | Iterable[bytes]) -> None:
        """Sends frames exactly as given (one message); for tests of what the bridge tolerates."""
        with self._lock:
            self._check_open()
            parts = [frames] if isinstance(frames, (bytes, bytearray, memoryview)) else list(frames)
            self._socket.send_multipart(parts)

    def recv_raw(self, timeout: float | None = None) -> list[bytes]:
        """Receives the next message's frames, whatever they are; BridgeTimeout if none comes."""
        with self._lock:
            self._check_open()
            t = self.timeout if timeout is None else timeout
            if not self._socket.poll(max(0, int(t * 1000)), zmq.POLLIN):
                raise BridgeTimeout(f"no message from {self.endpoint} within {t:g} s")
            frames: list[bytes] = self._socket.recv_multipart()
            return frames

    # ------------------------------------------------------------------ operations (§4)

    def hello(self, client: str | None = "envscaler-python", **kw: Any) -> dict[str, Any]:
        fields: dict[str, Any] = {"client": client} if client is not None else {}
        self._hello = self.request("hello", **fields, **kw)
        self._name_openings = OPENINGS_FEATURE in (self._hello.get("features") or ())
        return self._hello

    @property
    def last_hello(self) -> dict[str, Any] | None:
        """The last ``hello`` result this client received (None before any)."""
        return self._hello

    def hello_info(self) -> dict[str, Any]:
        """The bridge's ``hello`` result, asked once per client (limits and features do not change
        while it runs)."""
        return self._hello if self._hello is not None else self.hello()

    def supports(self, feature: str) -> bool:
        """Whether the bridge lists ``feature`` in ``hello``'s ``features`` (docs/protocol.md §8)."""
        return feature in (self.hello_info().get("features") or ())

    def list_envs(self, **kw: Any) -> list[dict[str, Any]]:
        return list(self.request("list_envs", **kw)["envs"])

    def list_scenarios(self, env_id: str | None = None, **kw: Any) -> list[dict[str, Any]]:
        fields: dict[str, Any] = {"env_id": env_id} if env_id is not None else {}
        return list(self.request("list_scenarios", **fields, **kw)["scenarios"])

    def reset(self, scenario_id: str, seed: int | None = None, session_id: str | None = None, finish_previous: bool | str = False, **kw: Any) -> dict[str, Any]:
        """Starts an episode (in a new session, or in ``session_id``); returns session_id, observation, info.

        ``finish_previous=True`` (with ``session_id``; a bridge with the ``reset_finish_previous``
        feature): the session's running episode is ended and scored in this same request, and its
        result is ``info["previous_episode"]``. ``finish_previous="later"`` (feature
        ``reset_finish_previous_later``): ended now, scored after the reply;
        ``info["previous_episode"]`` says ``pending`` and ``episode_result`` gives the score."""
        return self.request("reset", **_reset_fields(scenario_id, seed, session_id, finish_previous), **kw)

    def episode_result(self, episode_id: str, **kw: Any) -> dict[str, Any]:
        """The score of an episode a reset ended with ``finish_previous="later"`` (waits for it):
        the keys of ``info["previous_episode"]`` with ``finish_previous=True``."""
        return self.request("episode_result", episode_id=episode_id, **kw)

    def step(self, session_id: str, action: Any, **kw: Any) -> dict[str, Any]:
        return self.request("step", session_id=session_id, action=action, **kw)

    def step_batch(self, steps: Iterable[tuple[str, Any]], **kw: Any) -> list[dict[str, Any] | BridgeError]:
        """One action in each of many sessions; per entry the step result or its BridgeError."""
        return parse_batch(self.request("step_batch", steps=batch_fields(steps), **kw))

    def finish(self, session_id: str, **kw: Any) -> dict[str, Any]:
        return self.request("finish", session_id=session_id, **kw)

    def state(self, session_id: str, **kw: Any) -> dict[str, Any]:
        """The session's env state, parsed from the reply's ``state_json``."""
        state: dict[str, Any] = json.loads(self.request("state", session_id=session_id, **kw)["state_json"])
        return state

    def close_session(self, session_id: str, **kw: Any) -> bool:
        return bool(self.request("close", session_id=session_id, **kw).get("closed"))

    def snapshot(self, session_id: str, **kw: Any) -> dict[str, Any]:
        """Freezes the session's episode: ``{"snapshot_id", "step", "bytes", "state_hash"}``."""
        return self.request("snapshot", session_id=session_id, **kw)

    def fork(self, session_id: str | None = None, snapshot_id: str | None = None, **kw: Any) -> dict[str, Any]:
        """A new session continuing from a session or a snapshot: ``{"session_id", "info"}``."""
        return self.request("fork", **_fork_fields(session_id, snapshot_id), **kw)

    def restore(self, session_id: str, snapshot_id: str, **kw: Any) -> dict[str, Any]:
        """Puts the session back to the snapshot's point: ``{"info"}``."""
        return self.request("restore", session_id=session_id, snapshot_id=snapshot_id, **kw)

    def drop_snapshot(self, snapshot_id: str, **kw: Any) -> bool:
        return bool(self.request("drop_snapshot", snapshot_id=snapshot_id, **kw)["dropped"])

    def export_snapshot(self, session_id: str | None = None, snapshot_id: str | None = None, **kw: Any) -> dict[str, Any]:
        """A session's episode as it is now, or a held snapshot, as bytes another replica of the
        same bridge can import: ``{"blob", "bytes", "scenario_id", "step", "state_hash"}``."""
        return self.request("export_snapshot", **_fork_fields(session_id, snapshot_id), **kw)

    def import_snapshot(self, blob: bytes, **kw: Any) -> dict[str, Any]:
        """Holds an exported snapshot here: ``{"snapshot_id", "scenario_id", "step", "bytes", "state_hash"}``
        (fork or restore from it; drop it when done). ``SnapshotIncompatible`` for a blob of another
        bridge version or env bundle; ``TooLarge`` over a snapshot limit."""
        return self.request("import_snapshot", blob=bytes(blob), **kw)

    def stats(self, **kw: Any) -> dict[str, Any]:
        return self.request("stats", **kw)

    # ------------------------------------------------------------------ lifetime

    def _check_open(self) -> None:
        if self.closed:
            raise RuntimeError("the BridgeClient is closed")

    def close(self) -> None:
        """Closes the socket (idempotent). Pending requests are abandoned."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
            self._pending.clear()
            self._socket.close(linger=0)

    def __del__(self) -> None:  # best effort: a forgotten client must not keep a socket open
        try:
            if not self.closed:
                self._socket.close(linger=0)
        except Exception:
            pass


# ---------------------------------------------------------------------- helpers shared with the async client


def _reset_fields(scenario_id: str, seed: int | None, session_id: str | None, finish_previous: bool | str = False) -> dict[str, Any]:
    fields: dict[str, Any] = {"scenario_id": scenario_id}
    if seed is not None:
        fields["seed"] = int(seed)
    if session_id is not None:
        fields["session_id"] = session_id
        if finish_previous:  # sent only when asked: a bridge without the feature refuses the field
            fields["finish_previous"] = finish_previous
    return fields


def _fork_fields(session_id: str | None, snapshot_id: str | None) -> dict[str, Any]:
    if (session_id is None) == (snapshot_id is None):
        raise ValueError("give exactly one of session_id and snapshot_id")
    return {"session_id": session_id} if session_id is not None else {"snapshot_id": snapshot_id}


def batch_fields(steps: Iterable[tuple[str, Any]]) -> list[dict[str, Any]]:
    return [{"session_id": sid, "action": action} for sid, action in steps]


def parse_batch(result: Mapping[str, Any]) -> list[dict[str, Any] | BridgeError]:
    out: list[dict[str, Any] | BridgeError] = []
    for entry in result.get("results", []):
        if isinstance(entry, dict) and entry.get("ok") is True:
            out.append(entry.get("result") or {})
        else:
            error = (entry.get("error") if isinstance(entry, dict) else None) or {}
            if not error:
                out.append(InternalError(f"malformed step_batch entry {entry!r}"))
            else:
                out.append(error_for(str(error.get("code", "internal_error")), str(error.get("message", ""))))
    return out
