"""env.messages / Transcript / VectorTranscripts, and Agent / rollout continuing a forked episode, against a real bridge."""

from __future__ import annotations

import asyncio
import json

import pytest

import envscaler
from envscaler import Agent, AsyncEnvScalerEnv, EnvScalerEnv, EnvScalerVectorEnv, ForkPoint, Transcript, VectorTranscripts, fork_point
from envscaler.async_bridge_client import AsyncBridgeClient
from envscaler.transcript import slot_info, system_prompt

from helpers import BUNDLED_ENVS, NOTES_ENVS, REFERENCE_ACTIONS, REPO, start_bridge, wait_for
from user_sim import scripted_user

#: notes-1 in two steps: both reference calls at once (parallel), then the closing reply
PARALLEL = {
    "role": "assistant",
    "content": None,
    "tool_calls": [{"id": f"c{i}", "type": "function", "function": {"name": a["name"], "arguments": json.dumps(a["arguments"])}} for i, a in enumerate(REFERENCE_ACTIONS)],
}
CAROL = ["Hi, I'm Carol (u3). How many notes do I have?", "Thanks. Add a note 'x' with body 'y', please."]


def _recording(replies, seen):
    """A policy that answers with ``replies`` in turn and keeps every conversation it was shown."""

    def policy(messages, tools):
        seen.append((messages, tools))
        return replies[len(seen) - 1]

    return policy


@pytest.mark.parametrize("mode", ["fc", "prompt"])
def test_env_messages_are_the_conversation_the_agent_sent_its_policy(bridge, mode):
    fenced = "\n".join(f"```json\n{json.dumps(a)}\n```" for a in REFERENCE_ACTIONS)  # Qwen2.5-Coder's way of writing calls
    replies = [PARALLEL, "Task Completed"] if mode == "fc" else [fenced, "Task Completed"]
    seen: list = []

    async def main():
        env = AsyncEnvScalerEnv(bridge.endpoints[0])
        try:
            res = await Agent(_recording(replies, seen), mode=mode).run(env, "notes-1", seed=5)
            return res, env.transcript.messages(mode), env.messages, env.transcript.tools
        finally:
            await env.close()

    res, transcript, fc_default, tools = asyncio.run(main())
    assert res.reward == 1.0 and res.steps == 2 and not res.failures
    assert transcript == res.messages
    # every time the policy was asked, it was shown the transcript up to that point, exactly
    for asked, _ in seen:
        assert asked == res.messages[: len(asked)]
    assert [len(asked) for asked, _ in seen] == [2, len(res.messages) - 1]
    assert res.tools == tools and {t["function"]["name"] for t in tools} >= {"add_note", "delete_note"}
    if mode == "fc":
        assert [m["role"] for m in transcript] == ["system", "user", "assistant", "tool", "tool", "assistant"]
        assert [m["tool_call_id"] for m in transcript[3:5]] == ["c0", "c1"]
        assert seen[0][1] == tools
        assert fc_default == transcript
    else:
        # prompt mode: the tools are in the system prompt, both results come back as one user turn
        assert [m["role"] for m in transcript] == ["system", "user", "assistant", "user", "assistant"]
        assert transcript[3]["content"].count("<tool_response>") == 2
        assert "<tools>" in transcript[0]["content"] and seen[0][1] == []
        assert fc_default != transcript


def test_bare_calls_get_the_bridges_ids_and_a_new_reset_or_a_failed_one_starts_over(bridge):
    with EnvScalerEnv(bridge.endpoints[0]) as env:
        obs, info = env.reset(scenario_id="notes-1", seed=2)
        assert env.messages == [{"role": "system", "content": system_prompt(info)}, {"role": "user", "content": obs}]
        _, _, _, _, first = env.step(REFERENCE_ACTIONS[0])  # one call as {"name", "arguments"}
        _, _, _, _, second = env.step([REFERENCE_ACTIONS[1], {"name": "list_notes", "arguments": {"user_id": "u1"}}])  # a list of calls
        msgs = env.messages
        assert [m["role"] for m in msgs] == ["system", "user", "assistant", "tool", "assistant", "tool", "tool"]
        ids = [c["id"] for c in first["tool_calls"]] + [c["id"] for c in second["tool_calls"]]
        assert [c["id"] for m in msgs if m["role"] == "assistant" for c in m["tool_calls"]] == ids
        assert [m["tool_call_id"] for m in msgs if m["role"] == "tool"] == ids
        assert json.loads(msgs[2]["tool_calls"][0]["function"]["arguments"]) == REFERENCE_ACTIONS[0]["arguments"]
        assert [m["content"] for m in msgs if m["role"] == "tool"] == [r["content"] for s in (first, second) for r in s["observation"]["tool_results"]]
        # the step that ends the episode adds the agent's turn, not the observation it never reads
        _, reward, terminated, _, _ = env.step("Task Completed")
        assert terminated and reward == 1.0
        assert env.messages[-1] == {"role": "assistant", "content": "Task Completed"} and env.transcript.ended
        env.reset(scenario_id="notes-1", seed=3)
        assert len(env.messages) == 2
        with pytest.raises(envscaler.BridgeError):
            env.reset(scenario_id="no-such-scenario")
        assert env.messages == []


def test_a_simulated_users_turns_are_user_messages_and_its_stop_is_not(built_bridge):
    seen: list = []
    replies = [{"role": "assistant", "content": None, "tool_calls": [{"id": "a", "type": "function", "function": {"name": "list_notes", "arguments": '{"user_id": "u3"}'}}]}, "You have 1 note."]
    replies += [{"role": "assistant", "content": None, "tool_calls": [{"id": "b", "type": "function", "function": {"name": "add_note", "arguments": '{"user_id": "u3", "title": "x", "body": "y"}'}}]}]
    replies += ["Done: I added the note 'x'."]

    async def main(endpoint):
        env = AsyncEnvScalerEnv(endpoint)
        try:
            return await Agent(_recording(replies, seen)).run(env, "notes-2", seed=4), env.messages
        finally:
            await env.close()

    with scripted_user(CAROL) as url, start_bridge(envs=[NOTES_ENVS], extra=("--user-base-url", url, "--user-model", "user-sim")) as b:
        res, msgs = asyncio.run(main(b.endpoints[0]))
    assert (res.end_reason, res.reward, res.steps) == ("user_stop", 1.0, 4)
    assert msgs == res.messages
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "tool", "assistant", "user", "assistant", "tool", "assistant"]
    assert [m["content"] for m in msgs if m["role"] == "user"] == CAROL
    assert "helps a user" in msgs[0]["content"]


def test_vector_transcripts_follow_each_slot_through_autoreset(bridge):
    n = 2
    with EnvScalerEnv(bridge.endpoints[0]) as one:
        one.reset(scenario_id="notes-1", seed=9)
        one.step(PARALLEL)
        one.step("Task Completed")
        expected = one.messages
    vec = EnvScalerVectorEnv(bridge.endpoints, num_envs=n)
    try:
        vt = VectorTranscripts(n)
        obs, infos = vec.reset(seed=[9, 9], options={"scenario_id": "notes-1"})
        vt.reset(obs, infos)
        assert slot_info(infos, 1)["seed"] == 9 and slot_info(infos, 1)["tools"] == infos["tools"][1]
        assert [len(vt[i].messages()) for i in range(n)] == [2, 2]
        # slot 0 plays the same episode as `one`; slot 1 calls one tool a step and lags behind
        plan = [[PARALLEL, REFERENCE_ACTIONS[0]], ["Task Completed", REFERENCE_ACTIONS[1]], ["ignored: autoreset", "Task Completed"]]
        finished = []
        for actions in plan:
            obs, _, terminated, truncated, infos = vec.step(actions)
            finished.append(vt.step(actions, obs, terminated, truncated, infos))
        assert [[i for i, _ in f] for f in finished] == [[], [0], [1]]
        (_, done0), (_, done1) = finished[1][0], finished[2][0]
        assert done0.messages() == expected
        assert done0.ended and done1.ended and done1.step_count == 3
        assert [m["role"] for m in done1.messages()] == ["system", "user", "assistant", "tool", "assistant", "tool", "assistant"]
        # slot 0 was autoreset on the third step (a scenario drawn anew): a new transcript, its action not recorded
        assert vt[0] is not done0 and vt[0].step_count == 0
        assert vt[0].messages() == [{"role": "system", "content": system_prompt(slot_info(infos, 0))}, {"role": "user", "content": obs[0]}]
    finally:
        vec.close()


def test_fork_snapshot_and_restore_carry_the_conversation(bridge):
    with EnvScalerEnv(bridge.endpoints[0]) as env:
        env.reset(scenario_id="notes-1", seed=1)
        env.step(REFERENCE_ACTIONS[0])
        at_one = env.messages
        snap = env.snapshot()
        child = env.fork()
        from_snap = env.fork(snap)
        try:
            assert child.messages == at_one and from_snap.messages == at_one
            child.step(REFERENCE_ACTIONS[1])
            assert len(child.messages) == len(at_one) + 2 and env.messages == at_one  # independent copies
            assert env.step("I am done.")[2]  # a task's text reply ends it
            assert env.messages == [*at_one, {"role": "assistant", "content": "I am done."}]
            env.restore(snap)
            assert env.messages == at_one and env.transcript.step_count == 1
        finally:
            child.close()
            from_snap.close()
        # a snapshot this env did not take: the fork knows its step, not the messages before it
        with EnvScalerEnv(client=env.client) as other:
            foreign = other.fork(snap)
            try:
                assert foreign.messages == [] and foreign.transcript.step_count == 1 and foreign.transcript.tools == env.transcript.tools
            finally:
                foreign.close()


def _continuing(seen):
    """Finishes notes-1 from after its first reference call: the second call, then the closing reply."""

    def policy(messages, tools):
        seen.append(messages)
        if messages[-1]["role"] == "tool" and messages[-1]["name"] == "delete_note":
            return "Task Completed"
        call = {"id": "d", "type": "function", "function": {"name": "delete_note", "arguments": json.dumps(REFERENCE_ACTIONS[1]["arguments"])}}
        return {"role": "assistant", "content": None, "tool_calls": [call], "completion_ids": [1, 2, 3]}

    return policy


def test_rollout_continues_a_fork_point_with_its_message_prefix(bridge):
    with EnvScalerEnv(bridge.endpoints[1]) as source:
        source.reset(scenario_id="notes-1", seed=6)
        add = {"id": "a", "type": "function", "function": {"name": "add_note", "arguments": json.dumps(REFERENCE_ACTIONS[0]["arguments"])}}
        source.step({"role": "assistant", "content": None, "tool_calls": [add]})
        prefix = source.messages
        point = fork_point(source)
        assert point.endpoint == bridge.endpoints[1] and point.snapshot_id
        seen: list = []
        with bridge.client(0) as c0:
            before = c0.stats()["requests"]
            group = asyncio.run(envscaler.rollout(bridge, _continuing(seen), start_from=point, trials=3))
            # the group was dealt over both replicas: replica 0 imported the point and played a trial;
            # the import is dropped afterwards
            assert c0.stats()["requests"] - before >= 1 + 1 + 2  # import, fork, the trial's steps
            wait_for(lambda: c0.stats()["snapshots"] == 0, 10, what="the import dropped")
        assert [(r.scenario_id, r.reward, r.steps, r.end_reason, r.failures) for r in group] == [("notes-1", 1.0, 3, "text_reply", [])] * 3
        assert len({r.episode_id for r in group}) == 3 and source.episode_id not in {r.episode_id for r in group}
        for r in group:
            assert r.prefix_messages == len(prefix) and r.messages[: len(prefix)] == prefix
            assert [m["role"] for m in r.messages[len(prefix) :]] == ["assistant", "tool", "assistant"]
            # token-in/token-out: the ids the policy returned are kept by turn, and not sent on
            assert r.generated_ids == {len(prefix): [1, 2, 3]}
            assert "completion_ids" not in r.messages[len(prefix)]
        # the policy's first question in each continuation was the source's conversation, exactly
        assert sum(m == prefix for m in seen) == 3
        # the source was not moved by its forks: it finishes on its own
        source.step(REFERENCE_ACTIONS[1])
        assert source.step("Task Completed")[1] == 1.0
        source.drop_snapshot(point.snapshot_id)


def test_agent_run_continues_any_env_holding_a_fork_from_plain_messages(bridge):
    with EnvScalerEnv(bridge.endpoints[0]) as source:
        source.reset(scenario_id="notes-1", seed=7)
        source.step(REFERENCE_ACTIONS[0])
        point = ForkPoint(transcript=source.transcript.copy(), endpoint=bridge.endpoints[0], session_id=source.session_id)

        async def main():
            async with AsyncBridgeClient(bridge.endpoints[0]) as client:
                env = await point.open(client)
                capped = await point.open(client)
                try:
                    assert env.messages == source.messages and env.transcript.step_count == 1
                    # a prefix given as messages: the steps so far are its assistant turns
                    res = await Agent(_continuing([])).run(env, prefix=source.messages, tools=source.transcript.tools)
                    # the step cap counts the episode's steps: from step 1, max_steps=2 leaves one
                    cut = await Agent(_continuing([]), max_steps=2).run(capped, prefix=point.transcript)
                    return res, cut, env.messages
                finally:
                    await env.close()
                    await capped.close()

        res, cut, env_msgs = asyncio.run(main())
    assert (res.reward, res.steps, res.prefix_messages) == (1.0, 3, 4)
    assert env_msgs == res.messages  # the env's own transcript continued from the prefix too
    assert (cut.steps, cut.end_reason, [f["kind"] for f in cut.failures]) == (2, "client", ["max_steps"])
    with pytest.raises(ValueError, match="scenario_id"):
        asyncio.run(Agent(_continuing([])).run(None))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="not both"):
        asyncio.run(envscaler.rollout(bridge, _continuing([]), ["notes-1"], start_from=point))
    assert Transcript.from_messages(source.messages, steps=1).messages("prompt") == source.messages  # a given prefix is kept as given


def test_the_grpo_from_fork_example_runs_a_group_with_differing_rewards():
    import importlib.util

    spec = importlib.util.spec_from_file_location("grpo_from_fork", REPO / "python-client" / "examples" / "grpo_from_fork.py")
    assert spec and spec.loader
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    reference = example.reference_actions("library-1")
    with start_bridge(envs=[BUNDLED_ENVS / "library"], replicas=2) as b:
        rows = example.grpo_group(b.endpoints, "library-1", fork_after=2, group=8, slip=0.3, seed=1)
        clean = example.grpo_group(b.endpoints, "library-1", fork_after=2, group=2, slip=0.0, seed=1)
    assert len(rows) == 8 and all(r["prefix_messages"] == 2 + 2 * 2 for r in rows)
    # a continuation that played the rest of the solution succeeded; one that slipped stopped early with less
    assert all((r["reward"] == 1.0) == (r["steps"] == len(reference) + 1) for r in rows)
    assert len({r["reward"] for r in rows}) > 1 and abs(sum(r["advantage"] for r in rows)) < 1e-9
    assert [(r["reward"], r["steps"]) for r in clean] == [(1.0, len(reference) + 1)] * 2


def test_a_transcript_without_a_reset_keeps_the_steps_it_saw_and_copies_are_independent():
    tr = Transcript()
    assert tr.messages() == []
    action = {"role": "assistant", "content": None, "tool_calls": [{"id": "x", "type": "function", "function": {"name": "roll", "arguments": "{}"}}]}
    result = {"tool_call_id": "x", "name": "roll", "content": "7", "ok": True}
    info = {"step": 4, "tool_calls": [{"id": "x", "name": "roll", "arguments": {}}], "observation": {"role": "tool", "content": "7", "tool_results": [result]}}
    tr.record(action, "7", False, False, info)
    action["tool_calls"][0]["id"] = "changed later by the caller"
    assert tr.messages() == [{**action, "tool_calls": [{**action["tool_calls"][0], "id": "x"}]}, {"role": "tool", "tool_call_id": "x", "name": "roll", "content": "7"}]
    twin = tr.copy()
    twin.record("done", "bye", True, False, {"step": 5, "observation": {"role": "user", "content": "bye"}})
    assert len(twin.messages()) == 3 and len(tr.messages()) == 2 and twin.ended and not tr.ended
    with pytest.raises(ValueError, match="mode"):
        tr.messages("xml")  # type: ignore[arg-type]


def test_a_fork_point_opens_on_another_replica_byte_identically(bridge):
    with EnvScalerEnv(bridge.endpoints[0]) as source:
        source.reset(scenario_id="notes-1", seed=9)
        source.step(REFERENCE_ACTIONS[0])
        point = fork_point(source)

        async def main():
            async with AsyncBridgeClient(bridge.endpoints[0]) as here, AsyncBridgeClient(bridge.endpoints[1]) as there:
                with pytest.raises(ValueError, match="source="):
                    await point.open(there)  # the point lives on replica 0: exporting it needs a client of replica 0
                same = await point.open(here)
                moved = await point.open(there, source=here)  # imported for this fork and dropped after
                await point.stage(there, source=here)
                staged = await point.open(there)  # from the staged import: no export or import
                try:
                    outs = []
                    for env in (same, moved, staged):
                        r = await env.step(REFERENCE_ACTIONS[1])
                        outs.append((r[0], r[1], r[4]["state_hash"], r[4]["step"], env.messages))
                    return outs
                finally:
                    for env in (same, moved, staged):
                        await env.close()
                    await point.release([here, there])

        outs = asyncio.run(main())
        assert outs[0] == outs[1] == outs[2]
        with bridge.client(1) as c1:
            wait_for(lambda: c1.stats()["snapshots"] == 0, 10, what="imports dropped")
        source.drop_snapshot(point.snapshot_id)
