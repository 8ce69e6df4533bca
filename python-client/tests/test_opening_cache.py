"""Reset openings (docs/protocol.md §4 reset, feature ``reset_known_opening``): a client names the
opening it keeps, the bridge leaves it out, and the client puts it back, so ``info`` reads the same;
the golden vectors' reply with the opening left out is filled from the one the client kept."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from envscaler import AsyncBridgeClient, BridgeClient, EnvScalerEnv
from envscaler.opening_cache import MAX_OPENINGS, OpeningCache
from envscaler.protocol import unpackb

VECTORS = json.loads((Path(__file__).resolve().parents[2] / "protocol" / "vectors" / "messages.json").read_text(encoding="utf-8"))


def _vector(name: str) -> dict:
    return unpackb(bytes.fromhex(next(v for v in VECTORS if v["name"] == name)["msgpack_hex"]))


def _full_reply(rid: int = 1, scenario: str = "notes-1", env_hash: str = "01" * 32, scenario_hash: str = "02" * 32) -> dict:
    tools = [{"type": "function", "function": {"name": "add_note"}}]
    info = {
        "episode_id": "e-1",
        "env_id": "notes-v1",
        "scenario_id": scenario,
        "seed": 1,
        "introduction": "Notes.",
        "rules": ["be nice"],
        "tools": tools,
        "env_hash": env_hash,
        "scenario_hash": scenario_hash,
    }
    return {"v": 2, "id": rid, "ok": True, "result": {"session_id": "s-a", "observation": {"role": "user", "content": "Add a note."}, "info": info}}


def test_the_cache_names_an_opening_only_after_a_full_reply_and_fills_the_vectors_lean_reply():
    cache = OpeningCache()
    request = _vector("reset naming the opening the client keeps")
    fields = {"scenario_id": "notes-1", "session_id": "s-a", "finish_previous": "later"}
    assert cache.outgoing(fields) == fields  # nothing kept yet: nothing named
    full = _full_reply()
    cache.incoming(full)
    named = cache.outgoing(fields)
    assert named["known_opening"] == request["known_opening"]
    assert "known_opening" not in fields  # the caller's dict is not changed
    lean = cache.incoming(_vector("reset result with the opening left out"))
    info = lean["result"]["info"]
    assert "opening_omitted" not in info
    assert (info["introduction"], info["rules"], info["tools"]) == ("Notes.", ["be nice"], full["result"]["info"]["tools"])
    # the lists are each info's own: an agent that appends a tool changes only its info
    info["tools"].append({"type": "function", "function": {"name": "mine"}})
    again = cache.incoming(_vector("reset result with the opening left out"))["result"]["info"]
    assert len(again["tools"]) == 1


def test_a_reply_leaving_out_an_opening_the_client_never_kept_is_an_error_reply_not_a_bare_info():
    reply = OpeningCache().incoming(_vector("reset result with the opening left out"))
    assert reply["ok"] is False and reply["error"]["code"] == "internal_error" and reply["id"] == 36


def test_the_cache_keeps_at_most_MAX_OPENINGS_and_never_drops_one():
    cache = OpeningCache()
    for i in range(MAX_OPENINGS + 5):
        cache.incoming(_full_reply(scenario=f"s-{i}", scenario_hash=f"{i:064x}"))
    assert "known_opening" in cache.outgoing({"scenario_id": "s-0"})
    assert "known_opening" in cache.outgoing({"scenario_id": f"s-{MAX_OPENINGS - 1}"})
    assert "known_opening" not in cache.outgoing({"scenario_id": f"s-{MAX_OPENINGS}"})


def test_through_a_bridge_the_opening_crosses_once_and_info_reads_the_same(bridge1, monkeypatch):
    sizes: list[int] = []
    import envscaler.bridge_client as bc

    real = bc.unpackb
    monkeypatch.setattr(bc, "unpackb", lambda data: (sizes.append(len(data)), real(data))[1])
    env = EnvScalerEnv(bridge1.endpoints[0], scenario_ids=["library-1"])
    try:
        _, first = env.reset(seed=0)
        sizes.clear()
        _, second = env.reset(seed=1)
        assert set(first) ^ set(second) == {"previous_episode"}
        for key in ("introduction", "rules", "tools"):
            assert second[key] == first[key]
        # library-1's opening is ~8 KB: the second reply is a small fraction of that
        assert len(json.dumps(first["tools"])) > 4000
        assert sizes and max(sizes) < 2000
    finally:
        env.close()


def test_a_client_that_never_said_hello_gets_the_opening_in_full(bridge1, monkeypatch):
    sizes: list[int] = []
    import envscaler.bridge_client as bc

    real = bc.unpackb
    monkeypatch.setattr(bc, "unpackb", lambda data: (sizes.append(len(data)), real(data))[1])
    with BridgeClient(bridge1.endpoints[0], timeout=30) as c:
        a = c.reset("library-1", seed=0)
        b = c.reset("library-1", seed=1, session_id=a["session_id"])
        assert b["info"]["tools"] == a["info"]["tools"]
        assert min(sizes[-2:]) > 4000  # both replies carried the opening
        c.close_session(b["session_id"])


def test_the_async_client_names_and_fills_the_opening_too(bridge1):
    async def run() -> tuple[dict, dict, int]:
        async with AsyncBridgeClient(bridge1.endpoints[0], timeout=30) as c:
            await c.hello()
            a = await c.request("reset", scenario_id="library-1", seed=0)
            sent = c._openings.outgoing({"scenario_id": "library-1"})
            b = await c.request("reset", scenario_id="library-1", seed=1, session_id=a["session_id"])
            await c.request("close", session_id=b["session_id"])
            return a["info"], b["info"], len(sent.get("known_opening", {}))

    first, second, named = asyncio.run(run())
    assert named == 2
    assert second["tools"] == first["tools"] and second["rules"] == first["rules"] and "opening_omitted" not in second
