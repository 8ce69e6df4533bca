"""The reset openings one client keeps (docs/protocol.md §4 ``reset``, feature ``reset_known_opening``).

A scenario's opening (``introduction``, ``rules``, ``tools``: ~8 KB of the ~8.7 KB reset reply of
library-1) is the same in every episode of it, and the reply's ``env_hash`` and ``scenario_hash``
name it. A client that kept it names it in ``known_opening`` and the bridge leaves it out; the
client puts it back, so ``info`` reads the same either way. Decoding those 8 KB was ~40 µs of a
reset's ~130 µs in the client.
"""

from __future__ import annotations

from typing import Any, NamedTuple

#: Openings one client keeps. Past it new ones are not kept (their resets carry them in full); none
#: is ever dropped, so a reply that left one out always finds it here.
MAX_OPENINGS = 4096

FEATURE = "reset_known_opening"


class _Opening(NamedTuple):
    introduction: Any
    rules: list[Any]
    tools: list[Any]


class OpeningCache:
    """Keeps the openings of the reset replies a client received; fills them back into later ones."""

    def __init__(self) -> None:
        self._openings: dict[tuple[str, str], _Opening] = {}
        self._named: dict[str, tuple[str, str]] = {}  # scenario_id -> the (env_hash, scenario_hash) its last reply had

    def outgoing(self, fields: dict[str, Any]) -> dict[str, Any]:
        """A reset request's fields, naming the scenario's opening when this client keeps it."""
        key = self._named.get(fields.get("scenario_id"))  # type: ignore[arg-type]
        if key is None or "known_opening" in fields:
            return fields
        return {**fields, "known_opening": {"env_hash": key[0], "scenario_hash": key[1]}}

    def incoming(self, reply: Any) -> Any:
        """A reply as received: a reset's opening is kept, or put back where the bridge left it out."""
        result = reply.get("result") if isinstance(reply, dict) else None
        info = result.get("info") if isinstance(result, dict) and "session_id" in result else None
        if not isinstance(info, dict):
            return reply
        key = (info.get("env_hash"), info.get("scenario_hash"))
        if info.get("opening_omitted") is True:
            opening = self._openings.get(key)  # type: ignore[arg-type]
            if opening is None:
                # only a bridge answering a name this client never sent gets here
                return {"id": reply.get("id"), "ok": False, "error": {"code": "internal_error", "message": "the bridge left out a reset's opening this client does not keep"}}
            del info["opening_omitted"]
            # fresh lists (an agent appending a tool changes only its own), the same schema dicts
            info["introduction"], info["rules"], info["tools"] = opening.introduction, list(opening.rules), list(opening.tools)
            return reply
        scenario = info.get("scenario_id")
        tools, rules = info.get("tools"), info.get("rules")
        if not (isinstance(scenario, str) and isinstance(key[0], str) and isinstance(key[1], str) and isinstance(tools, list) and isinstance(rules, list)):
            return reply
        if key not in self._openings:
            if len(self._openings) >= MAX_OPENINGS:
                return reply
            self._openings[key] = _Opening(info.get("introduction"), list(rules), list(tools))  # type: ignore[index]
        self._named[scenario] = key  # type: ignore[assignment]
        return reply
