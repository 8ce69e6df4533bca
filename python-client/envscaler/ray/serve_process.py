"""ServeProcess: one ``envscaler serve --replicas 1`` process owned by a node agent (no Ray here).

Why one serve process per replica rather than one ``serve --replicas R``: each gets its own log,
its own restart by the agent, and its own entry in the registry, so losing one never withdraws
the others.

Orphans: the agent may be killed with SIGKILL (or its node removed), and then no Python code of
ours runs. The child therefore asks the kernel for SIGKILL when its parent dies
(``PR_SET_PDEATHSIG``, set between fork and exec), and the serve process's own replica child
stops when its IPC channel to serve closes (bridge/fronts/zmq/replica-main.ts). Ray's
``kill_child_processes_on_worker_exit`` covers the graceful exits on top.

Secrets: serve writes its connection file (endpoint, server public key, and a client key pair it
allows) with mode 0600. We put it on tmpfs (/dev/shm) in a 0700 directory, read it once it
appears and unlink it at once, so the client secret key never reaches a disk; the agent keeps
that pair in memory for its own health checks. Trainers get the fleet's key pair instead
(``--curve-allow`` holds only its public key).
"""

from __future__ import annotations

import ctypes
import json
import os
import shlex
import signal
import subprocess
import tempfile
import time
import uuid
from collections.abc import Sequence
from typing import Any

from ..bridge_client import BridgeClient
from ..launch import _answers_hello, _children
from ..protocol import BridgeError

__all__ = ["ServeProcess", "secret_dir"]

_PR_SET_PDEATHSIG = 1


def secret_dir(prefix: str) -> str:
    """A 0700 directory on tmpfs when there is one (never written to a disk), else in TMPDIR."""
    base = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
    return tempfile.mkdtemp(prefix=prefix, dir=base)  # mkdtemp makes it 0700


def _die_with_parent(parent: int) -> None:
    """preexec_fn: SIGKILL this child when the thread that forked it (the agent's watchdog) dies."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        os._exit(70)
    if os.getppid() != parent:  # the parent died between fork and prctl: nobody would kill us
        os._exit(71)


class ServeProcess:
    """Replica ``index`` of an agent: starts, checks and stops one serve process."""

    def __init__(
        self,
        index: int,
        command: Sequence[str],
        host: str,
        envs: Sequence[str] | None,
        allow_file: str,
        log_path: str,
        secrets: str,
        workers: int = 0,
        extra_args: Sequence[str] = (),
    ) -> None:
        self.index = index
        self.command = list(command)
        self.host = host
        self.envs = list(envs) if envs else None
        self.allow_file = allow_file
        self.log_path = log_path
        self.secrets = secrets
        self.workers = workers
        self.extra_args = [str(a) for a in extra_args]
        self.process: subprocess.Popen[bytes] | None = None
        self.uid: str | None = None
        self.endpoint: str | None = None
        self.server_public_key: str | None = None
        self.own_keys: dict[str, str] | None = None  # serve's built-in allowed client pair (health checks)
        self.generation = 0  # serve processes started in this slot
        self.instances: list[str] = []  # replica instances seen (the serve restarts its own child)
        self.replica_restarts = 0  # restarts of the replica by this serve process, as the replica reports them
        self.started_at = 0.0
        self.last_stats: dict[str, Any] = {}
        self._client: BridgeClient | None = None
        self._prev: tuple[float, int] | None = None
        self.rate: float | None = None  # requests/s between the last two stats polls (the watchdog's)

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    def pids(self) -> list[int]:
        """The serve process and the replica process it runs."""
        if not self.process or self.process.poll() is not None:
            return []
        return [self.process.pid, *_children(self.process.pid)]

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(self, timeout: float = 120.0, port: int | str = "*") -> dict[str, Any]:
        """Starts the serve process and waits until it answers ``hello`` over CurveZMQ."""
        self.generation += 1
        conn = os.path.join(self.secrets, f"replica-{self.index}-{self.generation}.json")
        args = [
            *self.command,
            "serve",
            "--endpoint",
            f"tcp://{self.host}:{port}",
            "--replicas",
            "1",
            "--workers",
            str(self.workers),
            "--connection-file",
            conn,
            "--curve",
            "--curve-allow",
            self.allow_file,
        ]
        if self.envs:
            args += ["--envs", *self.envs]
        args += self.extra_args
        parent = os.getpid()
        with open(self.log_path, "ab") as log:
            log.write(f"\n=== envscaler.ray: starting replica {self.index} generation {self.generation}: {shlex.join(args)}\n".encode())
            log.flush()
            # preexec_fn runs one prctl call in the child before exec; the fork-safety risk it
            # carries (locks held by other threads) does not apply to that single syscall
            self.process = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, preexec_fn=lambda: _die_with_parent(parent))  # noqa: PLW1509
        self.started_at = time.monotonic()
        deadline = self.started_at + timeout
        info: dict[str, Any] | None = None
        while info is None:
            if self.process.poll() is not None:
                raise RuntimeError(f"replica {self.index} exited with code {self.process.returncode} before serving; log: {self.log_path}\n{self.log_tail(20)}")
            if time.monotonic() > deadline:
                self.kill()
                raise RuntimeError(f"replica {self.index} wrote no connection file within {timeout:g} s; log: {self.log_path}")
            if os.path.exists(conn):
                try:
                    with open(conn, encoding="utf-8") as f:
                        info = json.load(f)  # written atomically (rename)
                except (OSError, ValueError):
                    info = None
            if info is None:
                time.sleep(0.05)
        try:
            os.unlink(conn)  # it holds a client secret key: keep it only in memory
        except OSError:
            pass
        self.endpoint = str(info["endpoint"] if "endpoint" in info else info["endpoints"][0])
        curve = info.get("curve") or {}
        self.server_public_key = curve.get("server_public_key")
        self.own_keys = dict(curve) if curve else None
        while not _answers_hello(self.endpoint, self.own_keys, timeout=2.0):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.kill()
                raise RuntimeError(f"replica {self.index} at {self.endpoint} did not answer hello; log: {self.log_path}")
        self.uid = uuid.uuid4().hex[:16]
        self.instances = []
        self.replica_restarts = 0
        self._prev, self.rate, self.last_stats = None, None, {}
        self._close_client()
        return self.entry()

    def entry(self) -> dict[str, Any]:
        return {
            "uid": self.uid,
            "endpoint": self.endpoint,
            "server_public_key": self.server_public_key,
            "replica": self.index,
            "generation": self.generation,
            "pid": self.pid,
            "sessions": int(self.last_stats.get("sessions", 0)),
        }

    def stats(self, timeout: float = 2.0) -> dict[str, Any]:
        """The bridge's ``stats`` reply (sessions, requests, errors, in_flight, instance, ...)."""
        if self._client is None:
            assert self.endpoint is not None
            self._client = BridgeClient(self.endpoint, timeout=timeout, curve=self.own_keys)
        try:
            s = self._client.stats(timeout=timeout)
        except BridgeError:
            self._close_client()  # a fresh socket next time: do not queue behind a lost request
            raise
        now = time.monotonic()
        req = int(s.get("requests", 0))
        if self._prev is not None and now > self._prev[0] and req >= self._prev[1]:
            self.rate = (req - self._prev[1]) / (now - self._prev[0])
        self._prev = (now, req)
        self.last_stats = s
        # monotonic: a restarted serve process starts counting again, but start() zeroes it then
        self.replica_restarts = max(self.replica_restarts, int(s.get("restarts", 0)))
        inst = str(s.get("instance", ""))
        if inst and inst not in self.instances:
            self.instances.append(inst)
        return s

    def log_tail(self, n: int = 100) -> str:
        try:
            with open(self.log_path, "rb") as f:
                return b"\n".join(f.read().splitlines()[-n:]).decode("utf-8", "replace")
        except OSError:
            return ""

    def _close_client(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def kill(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self._close_client()

    def stop(self, timeout: float = 15.0) -> None:
        """SIGTERM (serve stops its replica cleanly), SIGKILL after ``timeout``."""
        self._close_client()
        p = self.process
        if p is None or p.poll() is not None:
            return
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
