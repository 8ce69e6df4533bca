"""launch() and connect(): start a bridge (`envscaler serve`) or join one from its connection file.

The bridge writes its connection file only once every replica serves, but "serves" is the
bridge's word for "bound its socket"; launch() also waits until each endpoint answers ``hello``
over the wire, so the first real request of the caller never races the startup.

Lifetime: the bridge never outlives the Python process that launched it. Leaving the ``with``
block (normally, by an exception, or by KeyboardInterrupt) stops it with SIGTERM. When this
process ends without running that code (SIGTERM's default action, SIGKILL, os._exit, the OOM
killer), serve notices by itself: it is started with ``--parent-pid`` (this process) and polls
it (cli/parent-watch.ts), then stops as on SIGTERM: replicas close their episodes and recordings,
and serve removes this launch's temporary folder (``--remove-if-orphaned``), since nobody else
is left to. A parent-death signal (PR_SET_PDEATHSIG, as the Ray agent uses) is not used here: it
fires when the *thread* that forked ends, and launch() may be called from any thread.

serve runs in a session of its own, so a Ctrl-C in the terminal reaches only Python: the
``with`` block ends and stops the bridge, after whatever the trainer does on KeyboardInterrupt.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from .async_bridge_client import AsyncBridgeClient
from .bridge_client import BridgeClient
from .protocol import BridgeError
from .reachability import BridgeNotRunning

__all__ = ["Bridge", "connect", "launch", "resolve_command", "watch_of"]

# python-client/envscaler/launch.py -> the TypeScript project's root, when installed from the repo
_REPO_ROOT = Path(__file__).resolve().parent.parent.parent


def resolve_command(command: str | Sequence[str] | None = None) -> list[str]:
    """The command line that runs the bridge CLI, in this order of preference:

    ``command`` (a string is split like a shell would), the ``ENVSCALER_CLI`` environment variable
    (a command line), ``envscaler`` on PATH, then ``node <repo>/dist/cli/main.js`` when this
    package is installed from the repository next to a built bridge (``pip install -e``), then a
    built bridge in the current directory (a copied install run from the repository's root).
    """
    if command:
        return shlex.split(command) if isinstance(command, str) else [str(c) for c in command]
    env = os.environ.get("ENVSCALER_CLI", "").strip()
    if env:
        return shlex.split(env)
    exe = shutil.which("envscaler")
    if exe:
        return [exe]
    node = shutil.which("node")
    for main in (_REPO_ROOT / "dist" / "cli" / "main.js", Path.cwd() / "dist" / "cli" / "main.js"):
        if main.is_file() and node:
            return [node, str(main)]
    raise FileNotFoundError(
        "cannot find the envscaler CLI: pass command=, set ENVSCALER_CLI (e.g. 'node /path/dist/cli/main.js'), put `envscaler` on PATH, or build the bridge (npm run build) next to this package"
    )


def _children(pid: int) -> list[int]:
    """Pids whose parent is ``pid``, from /proc (no psutil needed)."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read().decode("ascii", "replace")
        except OSError:
            continue
        # the command name (field 2) is in parentheses and may contain anything: split after it
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) > 1 and fields[1] == str(pid):
            out.append(int(entry))
    return sorted(out)


class Bridge:
    """A bridge to talk to: its endpoints, the parsed connection file and (if launched) its process."""

    def __init__(
        self,
        connection: dict[str, Any],
        process: subprocess.Popen[bytes] | None = None,
        connection_file: str | None = None,
        log_path: str | None = None,
    ) -> None:
        self.connection = connection
        self.endpoints: list[str] = list(connection["endpoints"])
        self.curve: dict[str, str] | None = connection.get("curve") or None
        self.process = process
        self.connection_file = connection_file
        self.log_path = log_path

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else self.connection.get("pid")

    def client(self, replica: int = 0, timeout: float = 60.0) -> BridgeClient:
        """A BridgeClient for replica ``replica``, with the CurveZMQ keys if the bridge needs them
        (and, for a launched bridge, the watch on its process: see :meth:`exited`)."""
        return BridgeClient(self.endpoints[replica], timeout=timeout, curve=self.curve, gone=self.exited if self.process else None)

    def async_client(self, replica: int = 0, timeout: float = 60.0) -> AsyncBridgeClient:
        """:meth:`client` for asyncio: an AsyncBridgeClient for replica ``replica``, with the CurveZMQ
        keys and, for a launched bridge, the watch on its process (a request raises
        ``BridgeExited`` within about ``WATCH_EVERY_S`` of its exit, not after ``timeout``). Make it
        inside the event loop that will use it."""
        return AsyncBridgeClient(self.endpoints[replica], timeout=timeout, curve=self.curve, gone=self.exited if self.process else None)

    def exited(self) -> str | None:
        """Why this launched bridge can answer no more ("bridge exited (exit code N)", with where its
        log is), or None while its process runs (and always None for a bridge only connected to:
        its process is not ours to watch)."""
        if self.process is None:
            return None
        code = self.process.poll()
        if code is None:
            return None
        where = f"; its log: {self.log_path}" if self.log_path and os.path.exists(self.log_path) else ""
        return f"bridge exited (exit code {code}){where}"

    def replica_pids(self) -> list[int]:
        """The pids of the replica processes (children of the serve process), lowest first."""
        pid = self.pid
        return _children(pid) if pid else []

    def log_tail(self, n: int = 40) -> str:
        if not self.log_path or not os.path.exists(self.log_path):
            return ""
        with open(self.log_path, "rb") as f:
            return b"\n".join(f.read().splitlines()[-n:]).decode("utf-8", "replace")

    def __repr__(self) -> str:
        return f"Bridge(endpoints={self.endpoints!r}, curve={bool(self.curve)}, pid={self.pid})"


def watch_of(bridge: Any) -> Callable[[], str | None] | None:
    """A launched :class:`Bridge`'s ``exited`` check (its clients fail at once when its process has
    exited); None for endpoints, which have no process to watch."""
    exited = getattr(bridge, "exited", None)
    return exited if callable(exited) and getattr(bridge, "process", None) is not None else None


def connect(connection_file: str | os.PathLike[str]) -> Bridge:
    """Reads a connection file written by ``envscaler serve --connection-file``."""
    with open(connection_file, encoding="utf-8") as f:
        info = json.load(f)
    if not isinstance(info, dict) or not isinstance(info.get("endpoints"), list) or not info["endpoints"]:
        raise ValueError(f"{connection_file} is not an envscaler connection file")
    return Bridge(info, connection_file=os.fspath(connection_file))


def _answers_hello(endpoint: str, curve: dict[str, str] | None, timeout: float) -> bool:
    with BridgeClient(endpoint, timeout=timeout, curve=curve) as c:
        try:
            c.hello(client="envscaler.launch")
            return True
        except (BridgeError, BridgeNotRunning):  # not bound yet: the caller asks again
            return False


def _stop(process: subprocess.Popen[bytes], timeout: float) -> None:
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)  # the bridge stops its replicas and removes its file
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


#: notices launch() has printed in this process (each is said once)
_NOTICES_GIVEN: set[str] = set()


def _record_args(record_dir: str | os.PathLike[str] | None, extra: Sequence[str]) -> list[str]:
    """serve's recording flags for ``launch``: off unless asked (bounded by default)."""
    if any(a in ("--record", "--no-record", "--record-dir") or a.startswith("--record-dir=") for a in extra):
        return []  # the caller chose
    if record_dir is not None:
        return ["--record", "--record-dir", os.path.abspath(os.fspath(record_dir))]
    return ["--no-record"]


def _notice_unrecorded() -> None:
    """Said once per process, and only once a bridge serves: a bridge that failed to start recorded nothing to speak of."""
    if "unrecorded" not in _NOTICES_GIVEN:
        _NOTICES_GIVEN.add("unrecorded")
        print("envscaler.launch: episodes are not recorded (pass record_dir= to keep trajectories)", file=sys.stderr)


@contextlib.contextmanager
def launch(
    envs: str | os.PathLike[str] | Sequence[str | os.PathLike[str]] | None = None,
    replicas: int = 1,
    workers: int = 0,
    warm_sessions: int = 0,
    endpoint: str = "tcp://127.0.0.1:*",
    curve: bool = False,
    extra_args: Sequence[str] = (),
    startup_timeout: float = 120,
    command: str | Sequence[str] | None = None,
    stop_timeout: float = 20,
    record_dir: str | os.PathLike[str] | None = None,
) -> Iterator[Bridge]:
    """Runs ``envscaler serve`` for the duration of a ``with`` block and yields its Bridge.

    ``envs``: bundle folders, folders of bundles, or bundled env ids (``"library"`` or
    ``"library-v1"``); default: all the bridge's bundled envs. A path that exists is a folder;
    anything else must name a bundled env, or the bridge does not start and the error says
    where it looked and which ids there are.
    ``workers``: engine threads per replica (``serve --workers``); 0, the default, runs each
    replica's sandboxes on its serving thread (no thread hop per request).
    ``warm_sessions``: episodes per replica to ready sandboxes for before serving (``serve
    --warm-sessions``): set it to the episodes a trainer starts at once, so that first burst of
    resets is as fast as later ones.
    ``record_dir``: record every episode there (``serve --record-dir``). None, the default:
    nothing is recorded (``serve --no-record``; a notice on stderr says so, once per process),
    since a trainer's million episodes at ~23 KB each would fill its working directory.
    ``extra_args`` go to ``serve`` as they are (e.g. ``["--idle-timeout", "5"]``; a
    ``--record``/``--no-record``/``--record-dir`` there decides instead of ``record_dir``).
    On exit the bridge gets SIGTERM, and SIGKILL if it has not stopped after ``stop_timeout``;
    if this process dies without exiting the block, the bridge stops by itself (module docstring).
    """
    cmd = resolve_command(command)
    workdir = tempfile.mkdtemp(prefix="envscaler-bridge-")
    conn_file = os.path.join(workdir, "connection.json")
    log_path = os.path.join(workdir, "serve.log")
    args = [*cmd, "serve", "--endpoint", endpoint, "--replicas", str(int(replicas)), "--workers", str(int(workers)), "--connection-file", conn_file]
    # ties the bridge's life to this process's, however it ends (module docstring)
    args += ["--parent-pid", str(os.getpid()), "--remove-if-orphaned", workdir]
    if envs is not None:
        entries = [envs] if isinstance(envs, (str, os.PathLike)) else list(envs)
        # an existing path is a folder (made absolute); anything else is a bundled env id serve resolves
        args += ["--envs", *[os.path.abspath(e) if os.path.exists(e) else os.fspath(e) for e in entries]]
    if curve:
        args.append("--curve")
    if warm_sessions:
        args += ["--warm-sessions", str(int(warm_sessions))]
    record_args = _record_args(record_dir, [str(a) for a in extra_args])
    args += record_args
    args += [str(a) for a in extra_args]

    log = open(log_path, "wb")  # noqa: SIM115 (it outlives this block: the bridge writes it until _stop below)
    try:
        process = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    except BaseException:
        log.close()
        shutil.rmtree(workdir, ignore_errors=True)
        raise
    bridge: Bridge | None = None
    try:
        deadline = time.monotonic() + startup_timeout

        def fail(why: str) -> None:
            tail = Bridge({"endpoints": ["-"]}, log_path=log_path).log_tail()
            # the CLI's own one-line reason (an unknown env id, a missing folder) leads the message
            reason = next((line for line in reversed(tail.splitlines()) if line.startswith("envscaler: ")), None)
            head = f"{reason}\n" if reason else ""
            # the reason is said once, at the head, not again in the tail
            tail = "\n".join(line for line in tail.splitlines() if line != reason)
            raise RuntimeError(f"{head}the bridge did not start ({why}): {shlex.join(args)}\n--- log tail ---\n{tail}")

        info: dict[str, Any] | None = None
        while info is None:
            if process.poll() is not None:
                fail(f"exited with code {process.returncode}")
            if time.monotonic() > deadline:
                fail(f"no connection file after {startup_timeout:g} s")
            if os.path.exists(conn_file):
                try:
                    with open(conn_file, encoding="utf-8") as f:
                        info = json.load(f)  # written atomically (rename), so complete when present
                except (OSError, ValueError):
                    info = None
            if info is None:
                time.sleep(0.05)
        bridge = Bridge(info, process=process, connection_file=conn_file, log_path=log_path)
        for ep in bridge.endpoints:
            while not _answers_hello(ep, bridge.curve, timeout=min(2.0, max(0.1, deadline - time.monotonic()))):
                if process.poll() is not None:
                    fail(f"exited with code {process.returncode}")
                if time.monotonic() > deadline:
                    fail(f"{ep} did not answer hello within {startup_timeout:g} s")
        if record_args == ["--no-record"]:
            _notice_unrecorded()
        yield bridge
    finally:
        _stop(process, stop_timeout)
        log.close()
        shutil.rmtree(workdir, ignore_errors=True)
