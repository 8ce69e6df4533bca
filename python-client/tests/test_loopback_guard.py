"""The suite's loopback guard (loopback_guard.py, installed by conftest): which addresses it refuses
(pure checks, nothing sent), and that its wrappers are installed on socket and zmq sockets, proven
with a loopback address refused for the test, so a missing wrapper still sends nothing off this host."""

from __future__ import annotations

import socket
import urllib.request
from collections.abc import Iterator

import pytest
import zmq
import zmq.asyncio

from loopback_guard import NonLoopbackTraffic, check_endpoint, check_host, refused_for_test


@pytest.fixture
def refuse_127_0_0_2() -> Iterator[str]:
    refused_for_test.add("127.0.0.2")
    yield "127.0.0.2"
    refused_for_test.clear()


@pytest.mark.parametrize("host", ["192.0.2.1", "10.0.0.5", "172.16.0.1", "192.168.1.2", "8.8.8.8", "example.com", "2001:db8::1", "128.0.0.1"])
def test_addresses_outside_loopback_are_refused(host):
    with pytest.raises(NonLoopbackTraffic, match="loopback"):
        check_host(host, "test")
    with pytest.raises(NonLoopbackTraffic):
        check_endpoint(f"tcp://{f'[{host}]' if ':' in host else host}:5555")


def test_loopback_passes_and_a_wildcard_may_be_bound_never_reached():
    for ep in ("tcp://127.0.0.1:5555", "tcp://127.3.4.5:1", "tcp://localhost:1", "tcp://[::1]:1", "ipc:///tmp/x", "inproc://x"):
        check_endpoint(ep)
    for ep in ("tcp://*:*", "tcp://0.0.0.0:0", "tcp://[::]:0"):
        check_endpoint(ep, bind=True)
        with pytest.raises(NonLoopbackTraffic):
            check_endpoint(ep)


def test_socket_and_zmq_calls_go_through_the_guard(refuse_127_0_0_2):
    host = refuse_127_0_0_2
    with socket.socket() as s, pytest.raises(NonLoopbackTraffic):
        s.connect((host, 9999))
    with socket.socket() as s, pytest.raises(NonLoopbackTraffic):
        s.connect_ex((host, 9999))
    with socket.socket() as s, pytest.raises(NonLoopbackTraffic):
        s.bind((host, 0))
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u, pytest.raises(NonLoopbackTraffic):
        u.sendto(b"x", (host, 9999))
    with pytest.raises(NonLoopbackTraffic):
        urllib.request.urlopen(f"http://{host}:9999/", timeout=1)
    for ctx in (zmq.Context.instance(), zmq.asyncio.Context.instance()):
        sock = ctx.socket(zmq.DEALER)
        try:
            with pytest.raises(NonLoopbackTraffic):
                sock.connect(f"tcp://{host}:5555")
            with pytest.raises(NonLoopbackTraffic):
                sock.bind(f"tcp://{host}:*")
        finally:
            sock.close(0)
