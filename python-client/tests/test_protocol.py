"""The codec against the golden vectors, and the error-code table against docs/protocol.md."""

from __future__ import annotations

import json
import re

import msgpack
import pytest

from envscaler import protocol
from envscaler.episode_logic import step_tuple
from envscaler.protocol import BridgeError, BridgeTimeout, CodecError, error_for, packb, unpackb

from helpers import PROTOCOL_DOC, REPO, VECTORS


def _bytes_of(obj: dict) -> object:
    """The vector files write bytes (msgpack bin) as {"$bytes": "<hex>"}: read back as bytes."""
    return bytes.fromhex(obj["$bytes"]) if set(obj) == {"$bytes"} else obj


MESSAGES = json.loads((VECTORS / "messages.json").read_text(encoding="utf-8"), object_hook=_bytes_of)


def test_vectors_are_there():
    assert len(MESSAGES) >= 10
    assert {m["kind"] for m in MESSAGES} == {"request", "reply"}


@pytest.mark.parametrize("vector", MESSAGES, ids=[m["name"] for m in MESSAGES])
def test_golden_vector_roundtrip(vector):
    data = bytes.fromhex(vector["msgpack_hex"])
    assert unpackb(data) == vector["value"]
    assert packb(vector["value"]) == data


@pytest.mark.parametrize("vector", [m for m in MESSAGES if "expanded" in m], ids=[m["name"] for m in MESSAGES if "expanded" in m])
def test_a_step_reply_carries_each_tool_output_once_and_the_client_expands_it(vector):
    from envscaler.protocol import expand_reply

    wire = unpackb(bytes.fromhex(vector["msgpack_hex"]))
    result = wire["result"]
    steps = [e["result"] for e in result["results"] if e["ok"]] if vector["op"] == "step_batch" else [result]
    for st in steps:
        assert "content" not in st["observation"]
        assert all("result" not in c for c in st["info"]["tool_calls"])
    assert expand_reply(wire)["result"] == vector["expanded"]


def test_an_integral_reward_arrives_as_an_int_and_reads_as_a_float():
    # §2: an integral reward may be encoded as a msgpack int; readers accept it as a float
    reply = next(m for m in MESSAGES if m["name"] == "step result")
    result = unpackb(bytes.fromhex(reply["msgpack_hex"]))["result"]
    assert type(result["reward"]) is int  # the golden vector does carry an int on the wire
    for wire in (result, {**result, "reward": 1}):
        _, reward, *_ = step_tuple(unpackb(packb(wire)))
        assert type(reward) is float and reward == wire["reward"]


def test_codec_rejects_extension_types_both_ways():
    with pytest.raises(CodecError):
        unpackb(bytes.fromhex("d40100"))  # fixext1
    ts = msgpack.packb(msgpack.Timestamp(1, 0))  # decoded by msgpack itself, not via ext_hook
    with pytest.raises(CodecError):
        unpackb(ts)
    with pytest.raises(CodecError):
        unpackb(msgpack.packb({"a": [msgpack.Timestamp(1, 0)]}))
    with pytest.raises(CodecError):
        packb({"x": object()})
    with pytest.raises(CodecError):
        packb({"x": msgpack.ExtType(1, b"x")})


def test_codec_rejects_non_string_keys_and_garbage():
    with pytest.raises(CodecError):
        unpackb(bytes.fromhex("810102"))  # {1: 2}
    with pytest.raises(CodecError):
        unpackb(b"\xc1")
    with pytest.raises(CodecError):
        unpackb(bytes.fromhex("83a17601a2696401a26f70a568656c6c6fc0"))  # trailing bytes
    assert unpackb(packb({"s": "ünï", "b": b"\x00\x01"})) == {"s": "ünï", "b": b"\x00\x01"}


def _doc_codes() -> list[str]:
    text = PROTOCOL_DOC.read_text(encoding="utf-8")
    section = text[text.index("## 5. Error codes") : text.index("## 6.")]
    codes: list[str] = []
    for line in section.splitlines():
        if line.startswith("| `"):
            codes += re.findall(r"`([a-z_]+)`", line.split("|")[1])
    return codes


def test_error_codes_match_the_doc_and_the_bridge():
    doc = _doc_codes()
    assert len(doc) == 25
    assert list(protocol.ERROR_CODES) == doc
    ts = (REPO / "protocol" / "error-codes.ts").read_text(encoding="utf-8")
    ts_codes = re.findall(r'^\s+"([a-z_]+)",$', ts[ts.index("ERROR_CODES") : ts.index("] as const")], re.M)
    assert ts_codes == doc


@pytest.mark.parametrize("code", protocol.ERROR_CODES)
def test_every_code_maps_to_its_own_exception_class(code):
    e = error_for(code, "details here")
    assert isinstance(e, BridgeError)
    assert type(e) is not BridgeError, "each §5 code has its own class"
    assert e.code == code and e.message == "details here"
    assert code in str(e) and "details here" in str(e)
    # the class is exported under its CamelCase name, and distinct per code
    assert getattr(protocol, type(e).__name__) is type(e)


def test_unreachable_codes_map_to_the_documented_classes():
    # codes a client cannot provoke on a healthy bridge: checked by mapping only
    expected = {
        "overloaded": protocol.Overloaded,
        "engine_unavailable": protocol.EngineUnavailable,
        "internal_error": protocol.InternalError,
        "shutting_down": protocol.ShuttingDown,
        "user_simulator_failed": protocol.UserSimulatorFailed,
        "env_load_failed": protocol.EnvLoadFailed,
        "env_oom": protocol.EnvOOM,
        "env_crashed": protocol.EnvCrashed,
        "env_output_invalid": protocol.EnvOutputInvalid,
        "env_timeout": protocol.EnvTimeout,
    }
    for code, cls in expected.items():
        assert type(error_for(code, "m")) is cls
    for code in ("env_timeout", "env_oom", "env_crashed", "env_output_invalid"):
        assert isinstance(error_for(code), protocol.EnvFault)
    assert len({type(error_for(c)) for c in protocol.ERROR_CODES}) == len(protocol.ERROR_CODES)


def test_unknown_code_and_timeout():
    e = error_for("brand_new_code", "from a newer bridge")
    assert type(e) is BridgeError and e.code == "brand_new_code"
    t = BridgeTimeout("slow")
    assert isinstance(t, BridgeError) and isinstance(t, TimeoutError) and t.code == "timeout"


def test_errors_pickle_with_their_class():
    import pickle

    e = pickle.loads(pickle.dumps(error_for("session_lost", "gone")))
    assert type(e) is protocol.SessionLost and e.message == "gone"


def test_codec_refuses_to_send_non_string_keys():
    with pytest.raises(CodecError):
        packb({1: "x"})
    with pytest.raises(CodecError):
        packb({"a": [{"b": {2: 3}}]})
