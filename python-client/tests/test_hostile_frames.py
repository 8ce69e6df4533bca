"""Frames a broken or hostile client might send: each gets a typed error and the bridge keeps serving."""

from __future__ import annotations

import json

import pytest
import zmq

from envscaler import BridgeClient, BridgeTimeout
from envscaler.protocol import PROTOCOL_VERSION, packb, unpackb

from helpers import SMALL_FRAME_LIMIT, VECTORS

BAD_FRAMES = json.loads((VECTORS / "bad-frames.json").read_text(encoding="utf-8"))


def _error_reply(client: BridgeClient, frames) -> dict:
    client.send_raw(frames)
    reply_frames = client.recv_raw(timeout=10)
    reply = unpackb(reply_frames[-1])
    assert reply["v"] == PROTOCOL_VERSION and reply["ok"] is False, reply
    return reply


def test_bad_frame_vectors_are_there():
    assert len(BAD_FRAMES) >= 15
    assert {v["code"] for v in BAD_FRAMES} >= {"bad_request", "unknown_op", "unsupported_version"}


@pytest.mark.parametrize("vector", BAD_FRAMES, ids=[v["name"] for v in BAD_FRAMES])
def test_bad_frame_vector(bridge, vector):
    with bridge.client(0, timeout=10) as c:
        reply = _error_reply(c, bytes.fromhex(vector["hex"]))
        assert reply["error"]["code"] == vector["code"], reply
        assert isinstance(reply["error"]["message"], str) and reply["error"]["message"]
        # the bridge is still there for this very socket
        assert c.hello()["server"] == "envscaler"


def test_error_reply_echoes_a_readable_id(client):
    reply = _error_reply(client, packb({"v": PROTOCOL_VERSION, "id": "my-id-7", "op": "hello", "colour": "red"}))
    assert reply["id"] == "my-id-7" and reply["error"]["code"] == "bad_request"
    assert "colour" in reply["error"]["message"]
    reply = _error_reply(client, b"\xc1")
    assert reply["id"] is None


@pytest.mark.parametrize(
    "name,msg",
    [
        ("op is an int", {"v": PROTOCOL_VERSION, "id": 1, "op": 7}),
        ("v is a string", {"v": "1", "id": 1, "op": "hello"}),
        ("session_id is an int", {"v": PROTOCOL_VERSION, "id": 1, "op": "step", "session_id": 5, "action": "x"}),
        ("steps is a map", {"v": PROTOCOL_VERSION, "id": 1, "op": "step_batch", "steps": {"a": 1}}),
        ("empty step_batch", {"v": PROTOCOL_VERSION, "id": 1, "op": "step_batch", "steps": []}),
        ("seed is a float", {"v": PROTOCOL_VERSION, "id": 1, "op": "reset", "scenario_id": "notes-1", "seed": 1.5}),
        ("negative id", {"v": PROTOCOL_VERSION, "id": -1, "op": "hello"}),
        ("action missing", {"v": PROTOCOL_VERSION, "id": 1, "op": "step", "session_id": "s-x"}),
        ("binary scenario id", {"v": PROTOCOL_VERSION, "id": 1, "op": "reset", "scenario_id": b"notes-1"}),
    ],
)
def test_wrong_types(client, name, msg):
    reply = _error_reply(client, packb(msg))
    expected = "unknown_op" if name == "op is an int" else "unsupported_version" if name == "v is a string" else "bad_request"
    assert reply["error"]["code"] == expected, (name, reply)
    assert client.hello()["protocol_version"] == PROTOCOL_VERSION


@pytest.mark.parametrize(
    "name,hexframe",
    [
        ("bin32 declaring 4 GB", "c6ffffffff00"),
        ("array16 declaring 65535 entries in 2 bytes", "dcffff0000"),
        ("map16 declaring 65535 pairs", "deffffa161"),
        ("str8 longer than the frame", "d9ffa161"),
        ("fixstr longer than the frame", "bf6162"),
        ("request map whose value is truncated", "83a17601a2696401a26f70a568656c6c"),
    ],
)
def test_huge_or_lying_lengths(client, name, hexframe):
    reply = _error_reply(client, bytes.fromhex(hexframe))
    assert reply["error"]["code"] == "bad_request", (name, reply)
    assert client.hello()["server"] == "envscaler"


def _nested(depth: int, leaf: bytes = b"\xc0") -> bytes:
    return b"\x91" * depth + leaf


def test_deep_nesting(client):
    # an action nested past the limit is refused as a frame, before any parsing
    limit = client.hello()["limits"]["max_depth"]
    assert limit == 64
    deep = _error_reply(client, _nested(100_000))
    assert deep["error"]["code"] == "bad_request"
    # a request map holding an action 70 lists deep: the map is depth 1, so 71 in all
    frame = packb({"v": PROTOCOL_VERSION, "id": 99, "op": "step", "session_id": "s-none"})
    frame = bytes([frame[0] + 1]) + frame[1:] + packb("action") + _nested(70)
    reply = _error_reply(client, frame)
    assert reply["error"]["code"] == "bad_request" and "deeper" in reply["error"]["message"]
    # within the limit the same request is read, and fails only on its (unknown) session
    frame = packb({"v": PROTOCOL_VERSION, "id": 100, "op": "step", "session_id": "s-none"})
    frame = bytes([frame[0] + 1]) + frame[1:] + packb("action") + _nested(10, b"\xa1x")
    reply = _error_reply(client, frame)
    assert reply["id"] == 100 and reply["error"]["code"] == "unknown_session"


def test_frame_count(client):
    hello = packb({"v": PROTOCOL_VERSION, "id": 1, "op": "hello"})
    # many frames in one message
    assert _error_reply(client, [hello, hello, hello])["error"]["code"] == "bad_request"
    # a non-empty first frame followed by more
    assert _error_reply(client, [b"junk", hello])["error"]["code"] == "bad_request"
    # an empty delimiter and then two frames
    assert _error_reply(client, [b"", hello, hello])["error"]["code"] == "bad_request"
    # an empty frame alone is not a request either
    assert _error_reply(client, [b""])["error"]["code"] == "bad_request"
    assert client.hello()["server"] == "envscaler"


def test_req_style_delimiter_is_accepted_and_mirrored(client):
    client.send_raw([b"", packb({"v": PROTOCOL_VERSION, "id": 5, "op": "hello"})])
    frames = client.recv_raw(timeout=10)
    assert len(frames) == 2 and frames[0] == b""
    reply = unpackb(frames[1])
    assert reply["ok"] is True and reply["id"] == 5 and reply["result"]["server"] == "envscaler"


def test_a_real_req_socket_works(bridge):
    ctx = zmq.Context.instance()
    req = ctx.socket(zmq.REQ)
    req.linger = 0
    req.connect(bridge.endpoints[1])
    try:
        for i in range(3):  # REQ is strictly one request at a time; the bridge keeps it in step
            req.send(packb({"v": PROTOCOL_VERSION, "id": i, "op": "hello"}))
            assert req.poll(10_000)
            reply = unpackb(req.recv())
            assert reply["ok"] is True and reply["id"] == i and reply["result"]["replica"] == 1
    finally:
        req.close()


def test_oversized_frame_disconnects_only_that_peer(bridge):
    with bridge.client(0, timeout=10) as probe:
        assert probe.hello()["limits"]["max_frame_bytes"] == SMALL_FRAME_LIMIT
    # just under the limit the frame is read (and refused for its unknown field, proving it was decoded)
    with bridge.client(0, timeout=10) as c:
        big = packb({"v": PROTOCOL_VERSION, "id": 1, "op": "hello", "padding": "x" * (SMALL_FRAME_LIMIT - 100)})
        assert len(big) <= SMALL_FRAME_LIMIT
        reply = _error_reply(c, big)
        assert reply["id"] == 1 and reply["error"]["code"] == "bad_request" and "padding" in reply["error"]["message"]
    with bridge.client(0, timeout=10) as bully, bridge.client(0, timeout=10) as bystander:
        assert bystander.hello()["server"] == "envscaler"
        bully.send_raw(packb({"v": PROTOCOL_VERSION, "id": 1, "op": "hello", "padding": "x" * (SMALL_FRAME_LIMIT + 10)}))
        # ZeroMQ drops the frame and the connection: no reply ever comes for it
        with pytest.raises(BridgeTimeout):
            bully.recv_raw(timeout=1.0)
        # a connected bystander and a brand-new client are both served
        assert bystander.hello()["server"] == "envscaler"
    with bridge.client(0, timeout=10) as fresh:
        assert fresh.hello()["server"] == "envscaler"
        assert fresh.list_scenarios(env_id="notes-v1")
