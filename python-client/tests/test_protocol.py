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


def test_packb_checked_skips_only_the_walk(monkeypatch):
    # checked=True is for parts the caller encoded already: the same bytes, and no second walk
    import envscaler.protocol as protocol

    value = {"v": 2, "id": 1, "op": "step_batch", "steps": [{"session_id": "s", "action": {"name": "t", "arguments": {"a": [1, 2.5, None]}}}]}
    assert packb(value, checked=True) == packb(value) == msgpack.packb(value, use_bin_type=True)
    with pytest.raises(CodecError):
        packb({1: "x"})  # unchecked: refused as before
    walks: list = []
    monkeypatch.setattr(protocol, "_check_outgoing", walks.append)
    packb(value, checked=True)
    assert walks == []
    packb(value)
    assert walks == [value]


def test_codec_refuses_to_send_non_string_keys():
    with pytest.raises(CodecError):
        packb({1: "x"})
    with pytest.raises(CodecError):
        packb({"a": [{"b": {2: 3}}]})


# ---------------------------------------------------------------------------------------------
# unpackb's fast path (msgpack's C decoder alone) must refuse exactly what the checked decoder
# (every map pair and list item checked in Python) refuses, and give the same value otherwise.

_TIMESTAMP_ENCODINGS = [
    "d6ff00000001",  # fixext4
    "d7ff0000000000000001",  # fixext8
    "c70cff" + "00" * 12,  # ext8, 12 bytes
    "c704ff00000001",  # ext8, 4 bytes
    "c8000cff" + "00" * 12,  # ext16
    "c90000000cff" + "00" * 12,  # ext32
]


@pytest.mark.parametrize("ts", _TIMESTAMP_ENCODINGS)
def test_a_timestamp_is_refused_in_every_encoding_and_place(ts):
    ts_bytes = bytes.fromhex(ts)
    assert isinstance(msgpack.unpackb(ts_bytes), msgpack.Timestamp)  # msgpack itself would accept it
    for frame in (
        ts_bytes,
        b"\x81\xa1a" + ts_bytes,  # a map value
        b"\x91" + ts_bytes,  # a list item
        b"\x81\xa1a\x92\x01" + ts_bytes,  # deeper
    ):
        with pytest.raises(CodecError, match="timestamp"):
            unpackb(frame)


def test_a_0xff_outside_a_timestamp_keeps_the_fast_decode(monkeypatch):
    # -1, a 32-bit seed, a float: 0xff bytes that are no timestamp's type byte decode without the
    # checked path (a reset's seed would otherwise send 1 reply in 60 there, a fork group's all 64)
    import envscaler.protocol as protocol

    frame = msgpack.packb({"seed": 0xFF00FFFF, "n": -1, "f": -1.0000000000000002, "s": "\u00ff"})
    assert b"\xff" in frame
    monkeypatch.setattr(protocol, "_unpackb_checked", lambda data: pytest.fail("took the checked decode"))
    assert unpackb(frame) == msgpack.unpackb(frame)


@pytest.mark.parametrize("ts", _TIMESTAMP_ENCODINGS)
def test_a_timestamp_after_other_0xff_bytes_is_still_refused(ts):
    # a timestamp behind 0xff bytes that are not one (and behind more than the look-ahead checks one by one)
    for ints in (1, 40):
        frame = b"\x92" + msgpack.packb([0xFF00FFFF] * ints) + bytes.fromhex(ts)
        with pytest.raises(CodecError, match="timestamp"):
            unpackb(frame)


@pytest.mark.parametrize(
    "key_hex",
    ["01", "c0", "c3", "cb3ff0000000000000", "9101", "80", "c400", "c40161", "c5000161", "c600000000", "c60000000161"],
    ids=["int", "nil", "bool", "float", "array", "map", "empty bin8", "bin8", "bin16", "empty bin32", "bin32"],
)
def test_a_non_string_map_key_is_refused_however_it_is_encoded(key_hex):
    for frame in (bytes.fromhex("81" + key_hex + "01"), bytes.fromhex("81a161" + "81" + key_hex + "01"), bytes.fromhex("91" + "81" + key_hex + "01")):
        with pytest.raises(CodecError):
            unpackb(frame)


def test_frames_that_look_suspicious_but_are_valid_decode_the_same():
    # 0xff and bin headers occur in valid frames: -1, lengths such as 197 (0xc5), bytes values
    values = [
        {"n": -1, "m": -255, "f": float("nan"), "g": -1.0000000000000002},
        {"s": "x" * 197, "t": "y" * 196, "u": "z" * 198},
        {"b": b"", "c": b"\x00" * 300, "d": [b"\xff", b""], "e": b"\xc4\x00"},
        {"k" * 0xC4: 0, "": {"": []}},
        {"text": "Ĳ ŀ Ɔ ǿ ő ł — ünï"},
    ]
    for value in values:
        data = packb(value)
        assert packb(unpackb(data)) == packb(protocol._unpackb_checked(data)) == data  # as frames: nan != nan


def test_the_fast_decode_never_accepts_what_the_checked_one_refuses():
    # random frames, then every one of them with bytes flipped: both decoders agree on each
    import random

    rng = random.Random(2026)

    def value(depth: int) -> object:
        kind = rng.randrange(9 if depth < 4 else 6)
        if kind == 0:
            return rng.choice([0, -1, 1, 127, 128, -32, -33, 255, 256, 65535, -(2**31), 2**40, -(2**63)])
        if kind == 1:
            return rng.choice([0.5, -1.0, 1e300, float("inf")])
        if kind == 2:
            return "".join(rng.choice("abĲőł\u00ff") for _ in range(rng.choice([0, 1, 5, 31, 32, 197, 300])))
        if kind == 3:
            return bytes(rng.randrange(256) for _ in range(rng.choice([0, 1, 3, 300])))
        if kind == 4:
            return rng.choice([None, True, False])
        if kind == 5:
            return rng.choice(["x", ""])
        if kind in (6, 7):
            return {rng.choice(["a", "", "key", "ĳ" * 40]) + str(i): value(depth + 1) for i in range(rng.randrange(5))}
        return [value(depth + 1) for _ in range(rng.randrange(5))]

    def outcome(decode, data):
        try:
            return ("ok", packb(decode(data)))  # compared as frames: nan != nan as a value
        except CodecError:
            return ("refused",)

    agreed = refused = 0
    for _ in range(300):
        data = packb(value(0))
        assert outcome(unpackb, data) == outcome(protocol._unpackb_checked, data) == ("ok", data)
        for _ in range(20):
            mutated = bytearray(data)
            for _ in range(rng.randrange(1, 4)):
                mutated[rng.randrange(len(mutated))] = rng.choice([0xFF, 0xC4, 0xC5, 0xC6, 0xD6, 0xC7, 0x00, 0x01, 0x81, 0x91, rng.randrange(256)])
            fast, checked = outcome(unpackb, bytes(mutated)), outcome(protocol._unpackb_checked, bytes(mutated))
            assert fast == checked, bytes(mutated).hex()
            agreed += 1
            refused += fast[0] == "refused"
    assert agreed > 5000 and refused > 500  # the mutations did reach the refusals


def test_unpackb_takes_bytes_like_frames():
    data = packb({"a": [1, "b"]})
    assert unpackb(bytearray(data)) == unpackb(memoryview(data)) == {"a": [1, "b"]}


def test_codec_refuses_to_send_what_the_protocol_forbids_at_any_depth():
    class Key(str):
        pass

    for bad in (
        {"a": ({1: 2},)},
        {"a": [[msgpack.Timestamp(1, 0)]]},
        {"a": (msgpack.ExtType(1, b""),)},
        [{"x": {(1, 2): 3}}],
        {True: 1},
        {None: 1},
        {b"k": 1},
    ):
        with pytest.raises(CodecError):
            packb(bad)
    assert packb({Key("k"): (1, [2.5, None])}) == packb({"k": [1, [2.5, None]]})  # a str subclass is a string
