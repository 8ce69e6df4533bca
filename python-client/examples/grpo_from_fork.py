"""GRPO from a mid-episode state: play an episode k steps, fork it into a group, let the agent
continue every fork from the conversation so far, and turn each continuation into token ids with a
loss mask (1 on the model's turns only).

    python python-client/examples/grpo_from_fork.py [--scenario library-1] [--fork-after 2] [--group 8]
                                                    [--tokenizer DIR] [--endpoint tcp://...]

The policy stands in for your model: it plays the scenario's reference solution (read from the
repository's envs/), but at each turn it may slip (with probability --slip) and stop early with
"Task Completed", so the group's rewards differ and the advantages (reward minus the group's mean)
are not all zero. Replace ``ScriptedPolicy`` with your sampler: any function ``(messages, tools) ->
reply`` (text, or an assistant message dict; add ``"completion_ids"`` with the ids your engine
sampled and they are used verbatim in the token ids).

With --tokenizer (a Hugging Face tokenizer folder or hub id; ``pip install 'envscaler[tokens]'``),
each continuation is rendered: the source's turns up to the fork are prompt, the continuation's
turns are response, masked 1 where the model wrote. Without --endpoint a bridge over the bundled
envs is started (and stopped) here.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
from pathlib import Path
from typing import Any

import envscaler
from envscaler.tokens import render

ENVS = Path(__file__).resolve().parents[2] / "envs"


def reference_actions(scenario_id: str) -> list[dict[str, Any]]:
    """The scenario's reference solution, from the repository's env folder (library-1 -> envs/library)."""
    scenarios = json.loads((ENVS / scenario_id.rsplit("-", 1)[0] / "scenarios.json").read_text(encoding="utf-8"))
    return next(s["reference_actions"] for s in scenarios if s["id"] == scenario_id)


def as_message(action: dict[str, Any], call_id: str) -> dict[str, Any]:
    """A tool call as the assistant message an OpenAI-compatible server returns."""
    call = {"id": call_id, "type": "function", "function": {"name": action["name"], "arguments": json.dumps(action["arguments"])}}
    return {"role": "assistant", "content": None, "tool_calls": [call]}


class ScriptedPolicy:
    """Plays the reference solution one call per turn; slips (ends early) with probability ``slip``."""

    def __init__(self, reference: list[dict[str, Any]], slip: float, seed: int) -> None:
        self.reference, self.slip, self.rng = reference, slip, random.Random(seed)

    def __call__(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        turn = sum(m["role"] == "assistant" for m in messages)  # the prefix's turns count: the fork continues the episode
        if turn >= len(self.reference) or self.rng.random() < self.slip:
            return "Task Completed"
        return as_message(self.reference[turn], f"call_{turn}")


def grpo_group(endpoints: list[str], scenario: str, fork_after: int, group: int, slip: float, seed: int, tokenizer: Any = None) -> list[dict[str, Any]]:
    reference = reference_actions(scenario)
    # 1. the source episode, played k steps by hand (or by your agent): its env keeps the conversation
    with envscaler.EnvScalerEnv(endpoints[0]) as source:
        source.reset(scenario_id=scenario, seed=seed)
        for k in range(fork_after):
            source.step(as_message(reference[k], f"call_{k}"))
        # 2. the fork point: a snapshot of the episode now, and the messages that led here
        point = envscaler.fork_point(source)
        # 3. the group: `group` forks of the snapshot, each continued by the agent from the prefix
        results = asyncio.run(envscaler.rollout(endpoints, ScriptedPolicy(reference, slip, seed), start_from=point, trials=group))
        source.drop_snapshot(point.snapshot_id or "")
    mean = sum(r.reward for r in results) / len(results)
    rows = []
    for r in results:
        row: dict[str, Any] = {"reward": r.reward, "advantage": r.reward - mean, "steps": r.steps, "prefix_messages": r.prefix_messages, "messages": len(r.messages)}
        if tokenizer is not None:
            # 4. token ids for the trainer: the prefix (the source's turns) is prompt, the continuation is response
            ids = render(tokenizer, r.messages, r.tools, train_from=r.prefix_messages, generated=r.generated_ids)
            row.update(prompt_tokens=len(ids.prompt_ids), response_tokens=len(ids.response_ids), trained_tokens=sum(ids.response_mask))
        rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--endpoint", help="a running bridge (envscaler serve); default: start one over the bundled envs")
    ap.add_argument("--scenario", default="library-1")
    ap.add_argument("--fork-after", type=int, default=2, help="steps of the source episode before the fork")
    ap.add_argument("--group", type=int, default=8, help="continuations per fork point (the GRPO group size)")
    ap.add_argument("--slip", type=float, default=0.15, help="the scripted policy's chance to stop early at each turn")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tokenizer", help="a Hugging Face tokenizer (folder or hub id) to render token ids and loss masks")
    args = ap.parse_args(argv)
    tokenizer = None
    if args.tokenizer:
        from transformers import AutoTokenizer  # the [tokens] extra

        tokenizer = AutoTokenizer.from_pretrained(args.tokenizer)

    def run(endpoints: list[str]) -> list[dict[str, Any]]:
        return grpo_group(endpoints, args.scenario, args.fork_after, args.group, args.slip, args.seed, tokenizer)

    if args.endpoint:
        rows = run([args.endpoint])
    else:
        with envscaler.launch(envs=str(ENVS), extra_args=("--no-record",)) as bridge:
            rows = run(bridge.endpoints)
    for i, row in enumerate(rows):
        print(json.dumps({"trial": i, **{k: round(v, 4) if isinstance(v, float) else v for k, v in row.items()}}))
    return rows


if __name__ == "__main__":
    main()
