"""envscaler.rollout / Agent: the rollout loop with a policy function, against a real bridge."""

from __future__ import annotations

import asyncio
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

import envscaler
from envscaler import Agent, AsyncEnvScalerEnv
from envscaler.agent import _CONVERSATION, _TASK

from helpers import NOTES_ENVS, REFERENCE_ACTIONS, REPO, start_bridge


def _fc_policy(messages, tools):
    """Solves notes-1 in one step with both calls (parallel), then closes; counts what it saw."""
    assert tools and all(t["type"] == "function" for t in tools)
    if any(m["role"] == "tool" for m in messages):
        return "Task Completed"
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": f"c{i}", "type": "function", "function": {"name": a["name"], "arguments": json.dumps(a["arguments"])}} for i, a in enumerate(REFERENCE_ACTIONS)],
    }


def test_rollout_with_a_policy_function_over_trials_and_replicas(bridge):
    results = asyncio.run(envscaler.rollout(bridge, _fc_policy, ["notes-1"], trials=3, seed=10, concurrency=3))
    assert [(r.scenario_id, r.seed, r.reward, r.end_reason, r.steps) for r in results] == [("notes-1", 10 + t, 1.0, "text_reply", 2) for t in range(3)]
    assert all(r.success and not r.failures for r in results)
    assert len({r.episode_id for r in results}) == 3
    msgs = results[0].messages
    # the tool results went back as one tool message per call id, in order
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "tool", "tool", "assistant"]
    assert [m["tool_call_id"] for m in msgs if m["role"] == "tool"] == ["c0", "c1"]
    assert "reply with only 'Task Completed'" in msgs[0]["content"]


def test_prompt_mode_async_policy_bad_replies_are_observations_and_counted(bridge):
    seen = []

    async def policy(messages, tools):
        assert tools == []  # prompt mode: the tools are in the system prompt
        seen.append(messages[-1]["content"])
        turn = sum(m["role"] == "assistant" for m in messages)
        if turn == 0:
            return '<tool_call>{"name": "add_note", '  # unclosed: the env cannot read it
        if turn == 1:
            return '<tool_call>\n{"name": "fly", "arguments": {}}\n</tool_call>'  # an unknown tool
        if turn == 2:
            return "<think>go</think>\n" + "\n".join(f"<tool_call>\n{json.dumps(a)}\n</tool_call>" for a in REFERENCE_ACTIONS)
        return "<think>done</think>\n\nTask Completed"

    async def main():
        env = AsyncEnvScalerEnv(bridge.endpoints[0])
        try:
            return await Agent(policy, mode="prompt").run(env, "notes-1", seed=3)
        finally:
            await env.close()

    r = asyncio.run(main())
    assert r.reward == 1.0 and r.steps == 4
    assert [f["kind"] for f in r.failures] == ["unparseable_output", "invalid_tool_call"]
    assert "<tools>" in r.messages[0]["content"]
    assert "invalid_action" in seen[1] and "unknown_tool" in seen[2]
    assert seen[3].count("<tool_response>") == 2


def test_step_cap_and_a_failing_policy_end_only_their_episode(bridge):
    def looping(messages, tools):
        return {"role": "assistant", "content": None, "tool_calls": [{"id": "x", "type": "function", "function": {"name": "list_notes", "arguments": '{"user_id": "u1"}'}}]}

    capped = asyncio.run(envscaler.rollout(bridge.endpoints, looping, ["notes-1"], max_steps=2))
    assert [(r.steps, r.end_reason, [f["kind"] for f in r.failures]) for r in capped] == [(2, "client", ["max_steps"])]

    def broken(messages, tools):
        raise RuntimeError("policy bug")

    failed = asyncio.run(envscaler.rollout(bridge.endpoints, broken, ["notes-1"]))
    assert failed[0].failures[0]["kind"] == "policy_error" and "policy bug" in failed[0].failures[0]["message"]
    with pytest.raises(ValueError, match="matches no scenario"):
        asyncio.run(envscaler.rollout(bridge.endpoints, broken, ["nope-*"]))


def test_the_default_instructions_are_the_typescript_agents():
    ts = (REPO / "agent" / "system-prompt.ts").read_text(encoding="utf-8").replace("${TASK_DONE}", "Task Completed")
    for line in (_TASK + "\n" + _CONVERSATION).splitlines():
        if line.strip():
            assert line in ts, line


class _StoppingUser(BaseHTTPRequestHandler):
    """An OpenAI-compatible endpoint whose simulated user says ###STOP### in its first message."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        message = {"role": "assistant", "content": "# Thought:\nNothing to do.\n# Reply:\n###STOP###"}
        choice = {"index": 0, "finish_reason": "stop", "message": message}
        usage = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
        body = json.dumps({"id": "x", "object": "chat.completion", "created": 0, "model": "user-sim", "choices": [choice], "usage": usage}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def test_a_user_who_stops_in_the_opening_ends_the_episode_before_the_policy_is_asked(built_bridge):
    server = ThreadingHTTPServer(("127.0.0.1", 0), _StoppingUser)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    asked = []

    def policy(messages, tools):
        asked.append(messages)
        return "Task Completed"

    async def play(endpoint):
        env = AsyncEnvScalerEnv(endpoint)
        try:
            return await Agent(policy).run(env, "notes-2", seed=3)
        finally:
            await env.close()

    try:
        with start_bridge(envs=[NOTES_ENVS], extra=("--user-base-url", url, "--user-model", "user-sim")) as b:
            res = asyncio.run(play(b.endpoints[0]))
    finally:
        server.shutdown()
    assert asked == []
    assert (res.end_reason, res.steps, res.failures) == ("user_stop", 0, [])
