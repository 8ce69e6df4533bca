"""openings(): the (scenario, seed) loop every trainer adapter's dataset builder runs, on a bridge of
its own (so the session counts are this module's alone): every pair in order, one reset request a
pair, and no session left open however the loop ends."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import closing

import pytest

from envscaler import Bridge, BridgeClient
from envscaler.adapters.bridge_episode import EndpointPool, match_scenarios, prompt_messages
from envscaler.adapters.openings import openings
from envscaler.adapters.openrlhf_agent import openrlhf_rows
from envscaler.adapters.skyrl import skyrl_rows
from envscaler.adapters.verifiers_env import verifiers_rows
from envscaler.adapters.verl import verl_rows
from envscaler.protocol import UnknownScenario

from helpers import NOTES_1_TASK, NOTES_ENVS, start_bridge


@pytest.fixture(scope="module")
def notes(built_bridge: None) -> Iterator[Bridge]:
    """2 replicas of notes-v1 (notes-1 a task, notes-2 a conversation)."""
    with start_bridge(envs=[NOTES_ENVS], replicas=2) as b:
        yield b


def sessions(bridge: Bridge) -> list[int]:
    """Open sessions on each replica."""
    out = []
    for i in range(len(bridge.endpoints)):
        with bridge.client(i, timeout=30) as c:
            out.append(int(c.stats()["sessions"]))
    return out


def test_every_scenario_and_seed_in_order_one_reset_each_then_closed(notes: Bridge) -> None:
    with BridgeClient(notes.endpoints[0], timeout=30) as c:
        listed = {s["scenario_id"]: s for s in c.list_scenarios()}
        before = c.stats()["requests"]
        # a generator of seeds: read once, every scenario still gets all of them
        got = list(openings(notes, seeds=(s for s in [3, 1]), mode="prompt", include_conversation=True))
        requests = c.stats()["requests"] - before
    assert [(o.scenario_id, o.seed) for o in got] == [("notes-1", 3), ("notes-1", 1), ("notes-2", 3), ("notes-2", 1)]
    # list_scenarios, one reset a pair (the session reused: no close and reopen between pairs), the close, our stats
    assert requests == 1 + len(got) + 1 + 1
    for o in got:
        assert o.scenario == listed[o.scenario_id] and o.env_id == "notes-v1"
        assert o.info["scenario_id"] == o.scenario_id and o.info["seed"] == o.seed
        assert {t["function"]["name"] for t in o.tools} >= {"list_notes", "add_note", "delete_note"}
        assert o.info["rules"] and o.info["introduction"]
        assert o.messages == prompt_messages(o.info, o.observation, "prompt")
        assert o.messages[0]["role"] == "system" and "list_notes" in o.messages[0]["content"]  # prompt mode: the tools in the system prompt
    assert got[0].observation == NOTES_1_TASK
    assert sessions(notes) == [0, 0]


def test_a_consumer_that_stops_early_or_raises_leaves_no_session(notes: Bridge) -> None:
    with closing(openings(notes, ["notes-1"], seeds=range(5))) as opened:
        first = next(opened)
        assert first.seed == 0
        assert sum(sessions(notes)) == 1  # the episode it read the opening from is still open
    assert sessions(notes) == [0, 0]

    with pytest.raises(RuntimeError, match="the consumer failed"), closing(openings(notes, seeds=range(3), include_conversation=True)) as opened:
        for o in opened:
            if o.seed == 1:
                raise RuntimeError("the consumer failed")
    assert sessions(notes) == [0, 0]


def test_an_unknown_pattern_or_scenario_raises_as_the_builders_did_and_leaves_no_session(notes: Bridge) -> None:
    # a pattern that matches nothing: match_scenarios' error, the same the builders raise
    with pytest.raises(ValueError, match=r"^scenario pattern 'nope-\*' matches no task scenario on the bridge; there are 1: notes-1$"):
        list(openings(notes, ["notes-1", "nope-*"]))
    with pytest.raises(ValueError, match=r"^scenario pattern 'nope-\*' matches no scenario on the bridge; there are 2: notes-1, notes-2$"):
        skyrl_rows(notes, ["notes-1", "nope-*"], include_conversation=True)
    # a scenario the bridge does not have (a stale `listed`): the bridge's typed error, after the good pair
    stale = [{"scenario_id": "notes-1", "env_id": "notes-v1"}, {"scenario_id": "ghost-1", "env_id": "ghost-v1"}]
    seen = []
    with pytest.raises(UnknownScenario):
        for o in openings(notes, listed=stale, what="scenario listed"):
            seen.append(o.scenario_id)
    assert seen == ["notes-1"]
    assert sessions(notes) == [0, 0]


def test_a_pool_lends_its_next_replica_and_keeps_its_clients(notes: Bridge) -> None:
    with EndpointPool(notes, timeout=30) as pool:
        pool.episode().close()  # replica 0's turn: the pool's next episode goes to replica 1
        with closing(openings(pool, ["notes-2"], seeds=[8, 9], include_conversation=True)) as opened:
            o = next(opened)
            assert (o.scenario_id, o.seed) == ("notes-2", 8)
            assert [s["sessions"] for s in pool.stats()] == [0, 1]
        assert [s["sessions"] for s in pool.stats()] == [0, 0]  # its episode closed, the pool's clients still answer
        assert pool.episode().replica == 0  # openings took replica 1's turn, as TRLEnvironments.rows always did


def test_builders_give_task_scenarios_unless_asked_for_conversations(notes: Bridge) -> None:
    """notes-2 is a conversation: on a bridge without a simulated user its episode would end at the
    first text reply (no_user) and still be scored, so no builder picks it up unasked."""
    builders = {
        "skyrl_rows": lambda **kw: [r["extra_info"]["scenario_id"] for r in skyrl_rows(notes, **kw)],
        "verl_rows": lambda **kw: [r["extra_info"]["scenario_id"] for r in verl_rows(notes, **kw)],
        "openrlhf_rows": lambda **kw: [json.loads(r["label"])["scenario_id"] for r in openrlhf_rows(notes, **kw)],
        "verifiers_rows": lambda **kw: [json.loads(r["info"])["scenario_id"] for r in verifiers_rows(notes, **kw)],
    }
    for name, ids in builders.items():
        assert ids() == ["notes-1"], name
        assert ids(scenarios="notes-*") == ["notes-1"], name
        assert ids(include_conversation=True) == ["notes-1", "notes-2"], name
        # naming a conversation scenario without asking for them is an error that says why
        with pytest.raises(ValueError, match=r"'notes-2' matches no task scenario on the bridge, only scenarios left out \(notes-2\): conversation scenarios need a bridge with a simulated user"):
            ids(scenarios=["notes-2"])
    assert sessions(notes) == [0, 0]


def test_a_str_of_scenarios_is_one_pattern(notes: Bridge) -> None:
    """A bare string was read letter by letter ("pattern 'n' matches no ...")."""
    assert [o.scenario_id for o in openings(notes, "notes-*", include_conversation=True)] == ["notes-1", "notes-2"]
    assert [r["extra_info"]["scenario_id"] for r in skyrl_rows(notes, "notes-1", seeds=[0, 1])] == ["notes-1", "notes-1"]
    assert [r["extra_info"]["scenario_id"] for r in verl_rows(notes, "notes-v1")] == ["notes-1"]


def test_a_pattern_error_lists_the_first_ids_and_how_many_more() -> None:
    listed = [{"scenario_id": f"s-{i:02d}", "env_id": "s-v1"} for i in range(13)]
    with pytest.raises(ValueError) as got:
        match_scenarios(listed, "zz-*")
    assert str(got.value) == "scenario pattern 'zz-*' matches no scenario on the bridge; there are 13: " + ", ".join(f"s-{i:02d}" for i in range(10)) + " and 3 more"
    with pytest.raises(ValueError, match="there are none"):
        match_scenarios([], ["a"])
