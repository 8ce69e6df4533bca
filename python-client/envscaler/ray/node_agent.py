"""NodeAgent: the Ray actor on one node that owns that node's bridge replicas.

It runs R ServeProcesses bound to the node's IP, watches them (process exit, and the bridge's
``stats`` answering), restarts a dead one with backoff under a new uid, and heartbeats the live
ones to the registry. Every child is started from the agent's own watchdog thread, which lives
as long as the agent: PR_SET_PDEATHSIG is tied to the thread that forked, so a child started
from one of Ray's short-lived task threads could be killed when that thread ends.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import time
from typing import Any

import ray

from ..launch import resolve_command
from ..protocol import BridgeError
from .serve_process import ServeProcess, secret_dir

__all__ = ["NodeAgent"]


class NodeAgent:
    def __init__(self, agent_id: str, config: dict[str, Any], registry: Any, client_public_key: str) -> None:
        self.agent_id = agent_id
        self.config = config
        self.registry = registry
        self.node_id = ray.get_runtime_context().get_node_id()
        self.host = config.get("host") or ray.util.get_node_ip_address()
        self.workdir = tempfile.mkdtemp(prefix=f"envscaler-agent-{agent_id}-")
        self.secrets = secret_dir(f"envscaler-agent-{agent_id}-")
        allow = os.path.join(self.secrets, "allow")
        with open(allow, "w", encoding="ascii") as f:
            f.write(client_public_key + "\n")  # a public key: no secret in this file
        command = resolve_command(config.get("command"))
        extra = list(config.get("extra_args") or [])
        if "--no-record" not in extra and "--record-dir" not in extra:
            extra += ["--record-dir", os.path.join(self.workdir, "trajectories")]
        self.replicas = [
            ServeProcess(i, command, self.host, config.get("envs"), allow, os.path.join(self.workdir, f"replica-{i}.log"), self.secrets, workers=int(config.get("workers", 0)), extra_args=extra)
            for i in range(int(config["replicas_per_node"]))
        ]
        self.restarts = [0] * len(self.replicas)  # serve processes the agent restarted, per replica
        self.failures: list[str] = []
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._children_stopped = threading.Event()
        self._watchdog = threading.Thread(target=self._run, name="envscaler-agent-watchdog", daemon=True)
        self._watchdog.start()

    # ------------------------------------------------------------------ the watchdog thread

    def _run(self) -> None:
        try:
            self._tend()
        finally:
            # this thread forked the children: if it ended now, PR_SET_PDEATHSIG would SIGKILL
            # serve before shutdown() stops it gracefully, orphaning serve's replica process
            self._children_stopped.wait()

    def _tend(self) -> None:
        interval = float(self.config.get("heartbeat_s", 1.0))
        timeout = float(self.config.get("startup_timeout", 120))
        backoff = [0.0] * len(self.replicas)
        next_try = [0.0] * len(self.replicas)
        misses = [0] * len(self.replicas)
        with self._lock:
            for r in self.replicas:
                if self._stop.is_set():
                    return
                try:
                    r.start(timeout)
                except Exception as e:
                    self.failures.append(f"replica {r.index}: {e}")
        self._ready.set()
        self._publish()
        while not self._stop.wait(interval):
            for i, r in enumerate(self.replicas):
                # under the lock: shutdown() stops the replicas while no restart is half done
                with self._lock:
                    if self._stop.is_set():
                        return
                    if r.alive():
                        try:
                            r.stats(timeout=min(2.0, interval * 2))
                            misses[i] = 0
                            continue
                        except BridgeError:
                            misses[i] += 1
                            if misses[i] < 3:
                                continue
                            r.kill()  # alive but deaf three times running: treat it as dead
                    # dead (or just killed): withdraw it now, restart it with backoff
                    now = time.monotonic()
                    if r.uid is not None:
                        r.uid = None
                        self._publish()
                        # exponential backoff for a replica that keeps dying; one that lived a minute starts over
                        backoff[i] = 0.2 if now - r.started_at > 60 else min(10.0, backoff[i] * 2 or 0.2)
                        next_try[i] = now + backoff[i]
                    if now < next_try[i]:
                        continue
                    try:
                        self.restarts[i] += 1
                        r.start(timeout)
                        misses[i] = 0
                    except Exception as e:
                        self.failures.append(f"replica {i} restart: {e}")
                        next_try[i] = time.monotonic() + backoff[i]
            self._publish()

    def _publish(self) -> None:
        entries = [dict(r.entry(), node_id=self.node_id, agent=self.agent_id) for r in self.replicas if r.uid is not None and r.alive()]
        try:
            self.registry.heartbeat.remote(self.agent_id, self.node_id, entries)
        except Exception:
            pass

    # ------------------------------------------------------------------ actor methods

    def ready(self, timeout: float = 120.0) -> dict[str, Any]:
        """Waits until every replica started once; returns this node's summary (raises on failure)."""
        if not self._ready.wait(timeout):
            raise TimeoutError(f"agent {self.agent_id}: replicas not up within {timeout:g} s")
        if self.failures:
            raise RuntimeError(f"agent {self.agent_id} on {self.host}: " + "; ".join(self.failures))
        return self.describe()

    def ping(self) -> str:
        return str(self.node_id)

    def describe(self) -> dict[str, Any]:
        return {
            "agent": self.agent_id,
            "node_id": self.node_id,
            "host": self.host,
            "pid": os.getpid(),
            "workdir": self.workdir,
            "secrets": self.secrets,
            "watchdog_alive": self._watchdog.is_alive(),
            "replicas": [dict(r.entry(), pids=r.pids(), alive=r.alive(), log=r.log_path) for r in self.replicas],
        }

    def stats(self) -> dict[str, Any]:
        """Per replica: the bridge's counters (as of the last heartbeat), requests/s over the last heartbeat interval, restarts."""
        out = []
        for i, r in enumerate(self.replicas):
            # the watchdog polls every heartbeat: its last reply is at most that old
            s = dict(r.last_stats) if r.alive() else {}
            req = int(s.get("requests", 0))
            out.append(
                {
                    "replica": i,
                    "uid": r.uid,
                    "endpoint": r.endpoint,
                    "alive": r.alive(),
                    "sessions": int(s.get("sessions", 0)),
                    "requests": req,
                    "requests_per_s": r.rate if r.alive() else None,
                    "errors": int(s.get("errors", 0)),
                    "in_flight": int(s.get("in_flight", 0)),
                    "lost": int(s.get("lost", 0)),
                    # the agent restarted the serve process, plus the serve restarted its replica process:
                    # that count is the replica's own (its slot's earlier instances), since a replica
                    # killed before the watchdog's first poll of it is an instance we never saw
                    "restarts": self.restarts[i] + max(r.replica_restarts, len(r.instances) - 1),
                    "generation": r.generation,
                }
            )
        return {"agent": self.agent_id, "node_id": self.node_id, "host": self.host, "replicas": out, "failures": list(self.failures)}

    def logs(self, replica: int | None = None, lines: int = 100) -> dict[int, str]:
        return {r.index: r.log_tail(lines) for r in self.replicas if replica is None or r.index == replica}

    def shutdown(self, timeout: float = 15.0) -> None:
        """Withdraws the endpoints, stops every replica (SIGTERM, then SIGKILL), then the watchdog.

        In that order: the children die by PR_SET_PDEATHSIG when the watchdog thread that
        started them ends, so ending it first would SIGKILL serve and orphan its replica."""
        self._stop.set()
        try:
            ray.get(self.registry.withdraw.remote(self.agent_id, "shut down"), timeout=5)
        except Exception:
            pass
        with self._lock:
            for r in self.replicas:
                r.stop(timeout)
        self._children_stopped.set()
        self._watchdog.join(timeout)
        shutil.rmtree(self.secrets, ignore_errors=True)
        shutil.rmtree(self.workdir, ignore_errors=True)
