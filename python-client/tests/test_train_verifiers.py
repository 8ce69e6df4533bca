"""The verifiers adapter inside verifiers 0.3.1's own v0 stack: ``vf.load_environment`` builds
the env, ``env.evaluate`` runs its rollouts through verifiers' OpenAI chat client against a local
OpenAI-compatible fixture that replays the reference solutions as native tool calls (reward 1.0).
0.3.1 is the newest release with the v0 ``MultiTurnEnv``: 0.4.0 ships only its v1 stack (trainer
suite: ``pytest -m trainers``; scripts/test-all.sh installs verifiers==0.3.1)."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from trainer_helpers import episode_rewards, memo_scenarios, records, require, sessions, start_train_bridge

pytestmark = pytest.mark.trainers
vf = require("verifiers", "install verifiers==0.3.1 (the v0 MultiTurnEnv; scripts/test-all.sh does)")
openai = require("openai", "verifiers' OpenAI client")

from envscaler.adapters.verifiers_env import EnvScalerMultiTurnEnv  # noqa: E402


@pytest.fixture(scope="module")
def bridge(tmp_path_factory: Any) -> Iterator[Any]:
    rec = tmp_path_factory.mktemp("trajectories")
    with start_train_bridge(rec, replicas=2) as b:
        b.record_dir = rec
        yield b


@pytest.fixture(scope="module")
def replay_llm() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """An OpenAI-compatible /v1/chat/completions on 127.0.0.1: for a memo task it answers turn k with
    the k-th reference action as a native tool call, then "Task Completed"; it keeps each request."""
    scenarios = memo_scenarios()
    seen: list[dict[str, Any]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)))
            seen.append(body)
            msgs = body["messages"]
            task = next(m["content"] for m in msgs if m["role"] == "user")
            (sid,) = [s for s, sc in scenarios.items() if sc["task"] in task]
            k = sum(m["role"] == "assistant" for m in msgs)
            actions = scenarios[sid]["reference_actions"]
            if k < len(actions):
                call = {"id": f"call_{k}", "type": "function", "function": {"name": actions[k]["name"], "arguments": json.dumps(actions[k]["arguments"])}}
                message: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": [call]}
                finish = "tool_calls"
            else:
                message, finish = {"role": "assistant", "content": "Task Completed"}, "stop"
            out = json.dumps(
                {
                    "id": "x",
                    "object": "chat.completion",
                    "created": 0,
                    "model": body.get("model", "m"),
                    "choices": [{"index": 0, "finish_reason": finish, "message": message}],
                    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
                }
            ).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", seen
    finally:
        server.shutdown()
        server.server_close()


def _stats(bridge: Any) -> list[dict[str, Any]]:
    return [bridge.client(i, timeout=10).stats() for i in range(len(bridge.endpoints))]


def test_load_environment_and_evaluate_reference_solutions_to_one(bridge: Any, replay_llm: tuple[str, list[dict[str, Any]]]) -> None:
    url, seen = replay_llm
    env = vf.load_environment("envscaler.adapters.verifiers_env", endpoints=bridge.endpoints, scenarios=["memo-*"], seeds=[2, 3])
    assert isinstance(env, EnvScalerMultiTurnEnv) and isinstance(env, vf.MultiTurnEnv)
    client = vf.OpenAIChatCompletionsClient(openai.AsyncOpenAI(base_url=url, api_key="local"))
    before = set(episode_rewards(records(bridge.record_dir)))
    out = asyncio.run(env.evaluate(client, model="replay", num_examples=-1, rollouts_per_example=2, max_concurrent=4, on_progress=[]))
    states = out["outputs"] if isinstance(out, dict) and "outputs" in out else out.outputs if hasattr(out, "outputs") else out
    rewards = [s["reward"] for s in states]
    assert rewards == [1.0] * 8, rewards
    # the model was given the env's tools natively (verifiers' tool_defs), one request per turn
    assert {t["function"]["name"] for t in seen[0]["tools"]} == {"list_memos", "add_memo", "delete_memo"}
    assert len(seen) == 2 * 2 * (1 + 1) + 2 * 2 * (2 + 1)
    ended = {k: v for k, v in episode_rewards(records(bridge.record_dir)).items() if k not in before}
    assert sorted(ended.values()) == [1.0] * 8  # the bridge scored each rollout
    assert sessions(_stats(bridge)) == 0


def test_an_unfinished_episode_is_scored_by_finish(bridge: Any, replay_llm: tuple[str, list[dict[str, Any]]]) -> None:
    url, _ = replay_llm
    env = vf.load_environment("envscaler.adapters.verifiers_env", endpoints=bridge.endpoints, scenarios=["memo-2"], seeds=[0], max_turns=1)
    client = vf.OpenAIChatCompletionsClient(openai.AsyncOpenAI(base_url=url, api_key="local"))
    out = asyncio.run(env.evaluate(client, model="replay", num_examples=-1, rollouts_per_example=1, on_progress=[]))
    states = out["outputs"] if isinstance(out, dict) and "outputs" in out else out.outputs if hasattr(out, "outputs") else out
    # verifiers stops at max_turns before its env_response runs the last turn's call, so the state is
    # untouched: finish scored it, 1 of memo-2's 3 checks (Bob has no memos)
    assert [round(s["reward"], 3) for s in states] == [round(1 / 3, 3)]
    assert sessions(_stats(bridge)) == 0
