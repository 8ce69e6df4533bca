"""The wire protocol of docs/protocol.md: codec, version and one exception class per error code.

The bridge is the authority on what is valid; this module only makes sure the client never sends
or accepts anything the protocol forbids (extension types, non-string map keys), so a mistake
shows up here, next to the code that made it, rather than as a ``bad_request`` from far away.
"""

from __future__ import annotations

from typing import Any

import msgpack

__all__ = [
    "ERROR_CODES",
    "PROTOCOL_VERSION",
    "BadRequest",
    "BridgeError",
    "BridgeExited",
    "BridgeTimeout",
    "CodecError",
    "EngineUnavailable",
    "EnvCrashed",
    "EnvFault",
    "EnvLoadFailed",
    "EnvOOM",
    "EnvOutputInvalid",
    "EnvTimeout",
    "EpisodeDone",
    "InternalError",
    "Overloaded",
    "RecordingUnavailable",
    "ScenarioQuarantined",
    "SessionClosed",
    "SessionLost",
    "ShuttingDown",
    "SnapshotIncompatible",
    "TooLarge",
    "TooManySessions",
    "UnknownEnv",
    "UnknownOp",
    "UnknownScenario",
    "UnknownSession",
    "UnknownSnapshot",
    "UnsupportedVersion",
    "UserSimulatorFailed",
    "error_for",
    "expand_reply",
    "packb",
    "tool_observation_text",
    "unpackb",
]

PROTOCOL_VERSION = 2


def tool_observation_text(results: list[dict[str, Any]]) -> str:
    """A tool step's observation text: the one result's text, or the results' texts as a JSON-style list."""
    if len(results) == 1:
        return str(results[0]["content"])
    return "[" + ",".join(str(r["content"]) for r in results) + "]"


def expand_reply(reply: Any) -> Any:
    """Puts back the ``observation.content`` a step reply leaves out on the wire (docs/protocol.md, protocol 2).

    Each tool output crosses once, in ``tool_results``; the text is derived from them by
    :func:`tool_observation_text` (protocol/step-wire.ts is the same rule). Applies to step, finish
    and step_batch results; any other reply passes through unchanged.
    """
    result = reply.get("result") if isinstance(reply, dict) else None
    if isinstance(result, dict):
        _expand_result(result)
        entries = result.get("results")
        if isinstance(entries, list):
            for entry in entries:
                if isinstance(entry, dict) and entry.get("ok") is True and isinstance(entry.get("result"), dict):
                    _expand_result(entry["result"])
    return reply


def _expand_result(result: dict[str, Any]) -> None:
    obs = result.get("observation")
    if isinstance(obs, dict) and "content" not in obs and isinstance(obs.get("tool_results"), list) and obs["tool_results"]:
        obs["content"] = tool_observation_text(obs["tool_results"])


# --------------------------------------------------------------------------------------------
# codec


class CodecError(ValueError):
    """A value that the protocol cannot carry (or a frame that is not a valid protocol frame)."""


def _reject_ext(code: int, data: bytes) -> Any:
    # §2: no extension types, in either direction
    raise CodecError(f"msgpack extension type {code} is not allowed by the protocol")


def _check_value(value: Any) -> Any:
    # msgpack decodes the timestamp extension (-1) itself instead of calling ext_hook
    if isinstance(value, msgpack.Timestamp):
        raise CodecError("msgpack timestamp extension is not allowed by the protocol")
    return value


def _pairs(pairs: list[tuple[Any, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if not isinstance(key, str):
            raise CodecError(f"map key {key!r} is not a string")
        out[key] = _check_value(value)
    return out


def _list(items: list[Any]) -> list[Any]:
    for item in items:
        _check_value(item)
    return items


#: Values that need no look inside (exact types: a subclass takes the slower isinstance checks).
_SCALARS = frozenset((str, int, float, bool, type(None), bytes))


def _check_outgoing(value: Any) -> None:
    # msgpack would happily pack ExtType/Timestamp and int keys; the protocol forbids them (§2).
    # Runs on every request: scalars are skipped by exact type before any isinstance check.
    stack = [value]
    while stack:
        v = stack.pop()
        t = type(v)
        if t is dict or (t not in _SCALARS and isinstance(v, dict)):
            for k, item in v.items():
                if type(k) is not str and not isinstance(k, str):
                    raise CodecError(f"map key {k!r} is not a string")
                if type(item) not in _SCALARS:
                    stack.append(item)
        elif t in _SCALARS:
            continue
        elif isinstance(v, (msgpack.ExtType, msgpack.Timestamp)):  # before tuple: ExtType is a namedtuple
            raise CodecError(f"{type(v).__name__} is not allowed by the protocol")
        elif isinstance(v, (list, tuple)):
            stack.extend(item for item in v if type(item) not in _SCALARS)


def packb(value: Any, checked: bool = False) -> bytes:
    """Encodes one frame: the modern str/bin distinction, doubles for floats, no extension types.

    ``checked=True``: the caller has already checked every value in it (``_check_outgoing``, or
    :func:`packb` of each part), so the walk over it is not done again."""
    if not checked:
        _check_outgoing(value)
    try:
        frame: bytes = msgpack.packb(value, use_bin_type=True, strict_types=False, datetime=False)
        return frame
    except (TypeError, ValueError, OverflowError) as e:
        raise CodecError(f"not encodable as a protocol frame: {e}") from e


def _may_hide_a_bad_value(data: bytes) -> bool:
    """Whether ``data`` might hold what the fast decode lets through: a timestamp (extension type
    -1, which msgpack decodes itself instead of calling ext_hook) or an empty bytes key (a bin
    header 0xc4-0xc6 and a zero length). A timestamp's type byte 0xff (a byte valid UTF-8 never
    has) follows an extension header at a fixed distance (fixext 0xd4-0xd8 right before it, ext8
    0xc7 two bytes before, ext16 0xc8 three, ext32 0xc9 five), so a 0xff elsewhere (in an integer:
    -1, a seed, an id) does not send the frame to the slow decode; a frame with many 0xff bytes
    (binary data) does, without looking further. Single-byte searches only: CPython searches
    two-byte needles far slower than memchr."""
    at = data.find(b"\xff")
    seen = 0
    while at >= 0:
        seen += 1
        if seen > _MAX_FF_LOOKS:
            return True
        if (at >= 1 and 0xD4 <= data[at - 1] <= 0xD8) or (at >= 2 and data[at - 2] == 0xC7) or (at >= 3 and data[at - 3] == 0xC8) or (at >= 5 and data[at - 5] == 0xC9):
            return True
        at = data.find(b"\xff", at + 1)
    for header in (b"\xc4", b"\xc5", b"\xc6"):
        at = data.find(header)
        while at >= 0:
            if data[at + 1 : at + 2] == b"\x00":
                return True
            at = data.find(header, at + 1)
    return False


#: 0xff bytes looked at one by one before a frame is decoded the checked way without looking further.
_MAX_FF_LOOKS = 16


def unpackb(data: bytes) -> Any:
    """Decodes one frame strictly: exactly one value, string map keys, no extension types.

    Most frames are decoded by msgpack's C code alone: ``ext_hook`` refuses extension types,
    ``strict_map_key`` map keys other than str and bytes, and ``max_bin_len=0`` any non-empty
    bytes value (so any bytes key). What that leaves (a timestamp, an empty bytes key) cannot
    occur in a frame that :func:`_may_hide_a_bad_value` clears. A frame it does not clear,
    or that the fast decode refuses (bytes values, bad keys, garbage), is decoded again with every
    map pair and list item checked in Python, which also names what is wrong. The golden vectors
    and test_protocol.py cover both paths.
    """
    if type(data) is not bytes:
        data = bytes(data)  # `in` below must search bytes, not compare a memoryview's items
    if not _may_hide_a_bad_value(data):
        try:
            return msgpack.unpackb(data, raw=False, ext_hook=_reject_ext, strict_map_key=True, max_bin_len=0)
        except CodecError:
            raise
        except Exception:
            pass  # bytes, a non-string key, or garbage: the checked decode accepts or names it
    return _unpackb_checked(data)


def _unpackb_checked(data: bytes) -> Any:
    """:func:`unpackb` with every map pair and list item checked in Python."""
    try:
        value = msgpack.unpackb(
            data,
            raw=False,
            ext_hook=_reject_ext,
            object_pairs_hook=_pairs,
            list_hook=_list,
            strict_map_key=False,  # _pairs gives the clearer error
        )
    except CodecError:
        raise
    except Exception as e:  # ExtraData, FormatError, StackError, UnicodeDecodeError, ...
        raise CodecError(f"not a valid msgpack frame: {e}") from e
    return _check_value(value)


# --------------------------------------------------------------------------------------------
# errors (§5, a closed list)


class BridgeError(Exception):
    """An ``ok: false`` reply from the bridge. ``code`` is the protocol's error code."""

    code: str = "internal_error"

    def __init__(self, message: str = "", code: str | None = None) -> None:
        if code is not None:
            self.code = code
        self.message = message
        super().__init__(f"{self.code}: {message}" if message else self.code)

    def __reduce__(self) -> Any:  # picklable across processes (e.g. multiprocessing workers)
        return (_rebuild_error, (self.code, self.message))


def _rebuild_error(code: str, message: str) -> BridgeError:
    return error_for(code, message)


class BridgeTimeout(BridgeError, TimeoutError):
    """No reply within the client's timeout. Not a protocol code: the bridge never sends it."""

    code = "timeout"


class BridgeExited(BridgeError):
    """The bridge process this client was given (an ``envscaler.launch()`` Bridge) has exited, so no
    reply will come. Not a protocol code: the client sees it, the bridge never sends it."""

    code = "bridge_exited"


class BadRequest(BridgeError):
    code = "bad_request"


class UnsupportedVersion(BridgeError):
    code = "unsupported_version"


class UnknownOp(BridgeError):
    code = "unknown_op"


class UnknownEnv(BridgeError):
    code = "unknown_env"


class UnknownScenario(BridgeError):
    code = "unknown_scenario"


class ScenarioQuarantined(BridgeError):
    """The scenario's env kept hanging the engine; its resets are refused (the message says why)."""

    code = "scenario_quarantined"


class UnknownSession(BridgeError):
    code = "unknown_session"


class SessionClosed(BridgeError):
    code = "session_closed"


class SessionLost(BridgeError):
    code = "session_lost"


class EpisodeDone(BridgeError):
    code = "episode_done"


class TooManySessions(BridgeError):
    code = "too_many_sessions"


class UnknownSnapshot(BridgeError):
    code = "unknown_snapshot"


class SnapshotIncompatible(BridgeError):
    """``import_snapshot`` of a blob from another snapshot format, bridge version or env bundle; the message says which."""

    code = "snapshot_incompatible"


class TooLarge(BridgeError):
    """A request over a size or count limit; the message names the limit."""

    code = "too_large"


class Overloaded(BridgeError):
    code = "overloaded"


class EnvLoadFailed(BridgeError):
    code = "env_load_failed"


class EnvFault(BridgeError):
    """An env misbehaved during ``reset`` (during ``step`` it is a terminal step instead)."""

    code = "env_fault"


class EnvTimeout(EnvFault):
    code = "env_timeout"


class EnvOOM(EnvFault):
    code = "env_oom"


class EnvCrashed(EnvFault):
    code = "env_crashed"


class EnvOutputInvalid(EnvFault):
    code = "env_output_invalid"


class UserSimulatorFailed(BridgeError):
    code = "user_simulator_failed"


class RecordingUnavailable(BridgeError):
    """The replica cannot record; the request did not run."""

    code = "recording_unavailable"


class EngineUnavailable(BridgeError):
    code = "engine_unavailable"


class ShuttingDown(BridgeError):
    code = "shutting_down"


class InternalError(BridgeError):
    code = "internal_error"


_BY_CODE: dict[str, type[BridgeError]] = {
    cls.code: cls
    for cls in (
        BadRequest,
        UnsupportedVersion,
        UnknownOp,
        UnknownEnv,
        UnknownScenario,
        ScenarioQuarantined,
        UnknownSession,
        SessionClosed,
        SessionLost,
        EpisodeDone,
        UnknownSnapshot,
        SnapshotIncompatible,
        TooManySessions,
        TooLarge,
        Overloaded,
        EnvLoadFailed,
        EnvTimeout,
        EnvOOM,
        EnvCrashed,
        EnvOutputInvalid,
        UserSimulatorFailed,
        RecordingUnavailable,
        EngineUnavailable,
        ShuttingDown,
        InternalError,
    )
}

#: The closed list of §5, in the order of the table.
ERROR_CODES: tuple[str, ...] = tuple(_BY_CODE)


def error_for(code: str, message: str = "") -> BridgeError:
    """The exception for an error reply. An unknown code (a newer bridge) is a plain BridgeError."""
    cls = _BY_CODE.get(code)
    if cls is None:
        return BridgeError(message, code=str(code))
    return cls(message)
