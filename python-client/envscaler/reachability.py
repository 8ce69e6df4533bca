"""Failing fast when no bridge is listening.

ZeroMQ connects lazily: a client of an endpoint nobody serves sends into the void and only learns
of it when its first request times out (60 s by default). Before an env opens its client it asks
the operating system instead, which knows at once whether anything listens on a TCP port or an
IPC socket path.
"""

from __future__ import annotations

import os
import socket
from urllib.parse import urlsplit

__all__ = ["BridgeNotRunning", "check_reachable"]


class BridgeNotRunning(ConnectionError):
    """Nothing accepts connections at the endpoint: the bridge is not running there (yet)."""


def _hint(endpoint: str) -> str:
    return f"is a bridge running at {endpoint}? Start one with `npx envscaler serve --endpoint {endpoint}` (or use envscaler.launch()), or pass the endpoint a running bridge printed"


def check_reachable(endpoint: str, timeout: float = 3.0) -> None:
    """Raises BridgeNotRunning when nothing listens at a ``tcp://`` or ``ipc://`` endpoint.

    Other transports, and hosts that merely answer slowly, are left to the request timeout: only a
    definite "nobody is there" (connection refused, no such socket file) fails here.
    """
    if endpoint.startswith("ipc://"):
        path = endpoint[len("ipc://") :]
        if path and not path.startswith("@") and not os.path.exists(path):  # "@…" is Linux's abstract namespace
            raise BridgeNotRunning(f"cannot reach the bridge: the socket {path} does not exist; {_hint(endpoint)}")
        return
    if not endpoint.startswith("tcp://"):
        return
    parts = urlsplit(endpoint)
    try:
        host, port = parts.hostname, parts.port
    except ValueError:
        return  # a port like "*" is for binding; let ZeroMQ report it
    if not host or port is None or host == "*":
        return
    try:
        with socket.create_connection((host, port), timeout=timeout):
            pass
    except ConnectionRefusedError:
        raise BridgeNotRunning(f"cannot reach the bridge: connection to {endpoint} refused; {_hint(endpoint)}") from None
    except socket.gaierror as e:
        raise BridgeNotRunning(f"cannot reach the bridge: unknown host in {endpoint} ({e.strerror}); {_hint(endpoint)}") from None
    except OSError:
        return  # a timeout or a firewall: the request timeout gives the verdict
