"""The recipe's eval stage (examples/train/eval_model.py) records the tool calls the bridge ran.

A text policy in fc mode writes its calls as ```json fences inside the assistant text, so the
message list has no structured ``tool_calls``: the eval once recorded none for a model that called
tools and changed the state. Runs in the default venv (no torch): the policy is scripted."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from helpers import start_bridge

REPO = Path(__file__).resolve().parents[2]
TRAIN_ENVS = Path(__file__).resolve().parent / "fixtures" / "train-envs"
sys.path.insert(0, str(REPO / "examples" / "train"))


def test_eval_records_the_calls_a_text_policy_made_in_fenced_json() -> None:
    import eval_model

    replies = iter(
        [
            '```json\n{"name": "add_memo", "arguments": {"user_id": "u2", "title": "todo", "priority": "high"}}\n```',
            '```json\n{"name": "no_such_tool", "arguments": {}}\n```',
            "Done.",
        ]
    )

    def policy(messages: list[dict[str, Any]], tools: Any) -> str:
        return next(replies)

    with start_bridge(envs=[TRAIN_ENVS]) as bridge:
        [episode] = asyncio.run(eval_model.play(bridge.endpoints, policy, [("memo-v1", "memo-1", 0)], concurrency=1, max_steps=3))
    assert episode["changed_state"] is True
    assert not any(m.get("tool_calls") for m in episode["messages"])  # the calls are only in the text
    names = [c["name"] for c in episode["tool_calls"]]
    assert names == ["add_memo", "no_such_tool"], json.dumps(episode["tool_calls"])
    assert episode["tool_calls"][0]["arguments"] == {"user_id": "u2", "title": "todo", "priority": "high"} and "error" not in episode["tool_calls"][0]
    assert episode["tool_calls"][1]["error"]  # refused by the bridge, and said so
