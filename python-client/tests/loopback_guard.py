"""Keeps the suite's traffic on loopback: a connect or bind to any other address fails the test.

Tests on these machines may talk only to 127.0.0.0/8 (or ::1). The guard wraps the two ways this
process opens connections, ``socket.socket`` (http clients, asyncio, Ray's Python side) and
``zmq.Socket`` (the bridge client), and raises ``NonLoopbackTraffic`` naming the address before
anything is sent. A wildcard bind (0.0.0.0, ::, ``tcp://*``) is allowed: it listens, it sends
nothing; connecting to it is not. Processes the tests start (the bridge, Ray's raylets) are
given loopback addresses by the tests themselves; test_ray_fleet.py checks what Ray reports.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable
from typing import Any

import zmq

__all__ = ["NonLoopbackTraffic", "check_endpoint", "check_host", "install", "refused_for_test"]

_WILDCARDS = {"0.0.0.0", "::", "*", ""}


class NonLoopbackTraffic(AssertionError):
    """A test tried to reach (or bind) an address outside the loopback range."""


def _is_loopback(host: str) -> bool:
    h = host.strip("[]").split("%", 1)[0]
    if h.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(h).is_loopback
    except ValueError:
        return False  # a host name: it could resolve anywhere


#: loopback hosts refused all the same: lets the guard's own test prove a wrapper is installed without
#: ever aiming at an address outside loopback, should the wrapper be missing
refused_for_test: set[str] = set()


def check_host(host: str, what: str, *, bind: bool = False) -> None:
    if host in refused_for_test:
        raise NonLoopbackTraffic(f"{what} {host!r}: refused for this test")
    if _is_loopback(host) or (bind and host.strip("[]") in _WILDCARDS):
        return
    raise NonLoopbackTraffic(f"{what} {host!r}: tests send traffic only to 127.0.0.1 (loopback)")


def check_endpoint(endpoint: str, what: str = "zmq endpoint", *, bind: bool = False) -> None:
    """``tcp://host:port`` must be loopback (or a wildcard bind); ipc:// and inproc:// stay on the host."""
    if not endpoint.startswith(("tcp://", "udp://", "ws://", "wss://")):
        return
    hostport = endpoint.split("://", 1)[1]
    # tcp://source;target: the target is what is reached
    hostport = hostport.rsplit(";", 1)[-1]
    host = hostport.rsplit(":", 1)[0] if hostport.count(":") == 1 or hostport.startswith("[") else hostport
    check_host(host, what, bind=bind)


def _guard_socket(original: Callable[..., Any], bind: bool) -> Callable[..., Any]:
    def guarded(self: socket.socket, address: Any, *args: Any) -> Any:
        if self.family in (socket.AF_INET, socket.AF_INET6) and isinstance(address, tuple):
            check_host(str(address[0]), "socket bind" if bind else "socket connect", bind=bind)
        return original(self, address, *args)

    return guarded


def _guard_sendto(original: Callable[..., Any]) -> Callable[..., Any]:
    def guarded(self: socket.socket, data: Any, *args: Any) -> Any:
        if self.family in (socket.AF_INET, socket.AF_INET6) and args and isinstance(args[-1], tuple):
            check_host(str(args[-1][0]), "socket sendto")
        return original(self, data, *args)

    return guarded


def _guard_zmq(original: Callable[..., Any], bind: bool) -> Callable[..., Any]:
    def guarded(self: zmq.Socket[Any], addr: str, *args: Any, **kwargs: Any) -> Any:
        check_endpoint(str(addr), "zmq bind" if bind else "zmq connect", bind=bind)
        return original(self, addr, *args, **kwargs)

    return guarded


_installed: list[bool] = []  # set once: install() wraps each method only once


def install() -> None:
    """Wraps the connect and bind methods once for the whole test session."""
    if _installed:
        return
    _installed.append(True)
    socket.socket.connect = _guard_socket(socket.socket.connect, bind=False)  # type: ignore[method-assign]
    socket.socket.connect_ex = _guard_socket(socket.socket.connect_ex, bind=False)  # type: ignore[method-assign]
    socket.socket.bind = _guard_socket(socket.socket.bind, bind=True)  # type: ignore[method-assign]
    socket.socket.sendto = _guard_sendto(socket.socket.sendto)  # type: ignore[method-assign]
    zmq.Socket.connect = _guard_zmq(zmq.Socket.connect, bind=False)  # type: ignore[method-assign]
    zmq.Socket.bind = _guard_zmq(zmq.Socket.bind, bind=True)  # type: ignore[method-assign]
