"""The agent loop of ``envscaler rollout`` as a library call, with your own policy instead of an endpoint.

A policy is any function (sync or ``async``) ``policy(messages, tools) -> reply``: ``messages`` is
the agent's conversation in the OpenAI chat shape (system prompt, task or user turns, tool
results), ``tools`` the env's OpenAI function schemas, and the reply either raw assistant text
(Qwen3/Hermes ``<tool_call>`` blocks, optional ``<think>``) or an assistant message dict
(``{"role": "assistant", "content": ..., "tool_calls": [...]}``). The env parses the reply; one
it cannot read comes back as an observation the policy sees next, and is counted.

    results = await envscaler.rollout(bridge.endpoints, my_policy, ["library-*"], trials=4)
"""

from __future__ import annotations

import asyncio
import fnmatch
import inspect
import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from .async_bridge_client import AsyncBridgeClient
from .async_env import AsyncEnvScalerEnv
from .protocol import BridgeError

__all__ = ["TASK_DONE", "Agent", "EpisodeResult", "Policy", "rollout", "system_prompt"]

Policy = Callable[[list[dict[str, Any]], list[dict[str, Any]]], "Any | Awaitable[Any]"]

#: The closing reply of a task agent (the original's convention; the SFT filter looks for it).
TASK_DONE = "Task Completed"

# The same instructions as the TypeScript agent (agent/system-prompt.ts), so a policy trained
# through either path sees the same prompt.
_TASK = "\n".join(
    [
        "You are an agent that completes the task you are given by operating an environment through its tools.",
        "",
        "How to work:",
        "- Work step by step: call one tool, read its result, then decide the next step.",
        "- Avoid making several tool calls in one step.",
        "- Look things up before you change them: use the query tools to confirm ids and current values, then use the tools that modify state.",
        "- Use only the information in the task and in tool results; do not invent ids or values.",
        "- Follow the environment's rules below.",
        f"- When you believe the task is complete, reply with only '{TASK_DONE}' and no tool call.",
    ]
)
_CONVERSATION = "\n".join(
    [
        "You are an agent that helps a user by talking with them and operating an environment through its tools.",
        "",
        "How to work:",
        "- Work step by step: call one tool, read its result, then decide the next step.",
        "- Avoid making several tool calls in one step.",
        "- If you need information only the user has (who they are, which item, which option), ask the user for it.",
        "- In one step, either call a tool or talk to the user, never both.",
        "- Look things up before you change them: use the query tools to confirm ids and current values, then use the tools that modify state.",
        "- Use only the information the user gives and tool results; do not invent ids or values.",
        "- Follow the environment's rules below.",
        "- When you have done what the user asked, tell them what you did.",
    ]
)


def _tools_section(tools: Sequence[Any]) -> str:
    lines = "\n".join(json.dumps(t, separators=(",", ":"), ensure_ascii=False) for t in tools)
    return (
        "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
        f"You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n{lines}\n</tools>\n\n"
        "For each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n"
        '<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>'
    )


def system_prompt(info: dict[str, Any], mode: Literal["fc", "prompt"] = "fc", instructions: str | None = None) -> str:
    """The default system prompt for a reset's ``info``: instructions for its scenario mode, the env's introduction and rules, and (prompt mode) the tools."""
    head = instructions if instructions is not None else (_CONVERSATION if info.get("mode") == "conversation" else _TASK)
    rules = "\n".join(f"- {r}" for r in info.get("rules") or []) or "- (none)"
    text = (
        f"{head}\n\nThe following is an introduction to the current environment:\n"
        f"# Environment Information\n\n## Brief Introduction:\n{info.get('introduction', '')}\n\n## Environment Rules / Constraints:\n{rules}"
    )
    return f"{text}\n\n{_tools_section(info.get('tools') or [])}" if mode == "prompt" else text


def _error_type(content: str) -> str | None:
    try:
        j = json.loads(content)
    except (ValueError, TypeError):
        return None
    err = j.get("error") if isinstance(j, dict) else None
    return err.get("type") if isinstance(err, dict) and isinstance(err.get("type"), str) else None


@dataclass
class EpisodeResult:
    """One played episode."""

    scenario_id: str
    seed: int | None
    episode_id: str | None = None
    reward: float = 0.0
    terminated: bool = False
    truncated: bool = False
    end_reason: str | None = None
    steps: int = 0
    #: the agent's conversation, as the policy saw it and answered it
    messages: list[dict[str, Any]] = field(default_factory=list)
    #: ``{"kind", "step", "message"}``: unparseable_output, invalid_tool_call, env_fault, max_steps, user_simulator_failed, policy_error
    failures: list[dict[str, Any]] = field(default_factory=list)
    reward_info: dict[str, Any] | None = None

    @property
    def success(self) -> bool:
        return self.reward >= 1 - 1e-9


class Agent:
    """Plays episodes of an ``AsyncEnvScalerEnv`` with a policy function.

    ``mode="fc"``: the policy gets the tools and the observations as ``tool`` messages (one per
    call id); ``mode="prompt"``: the tools are in the system prompt and results come back as user
    ``<tool_response>`` turns. ``max_steps`` caps the agent's steps (the scenario's own cap applies
    too); an episode the agent does not end is scored with ``finish``.
    """

    def __init__(self, policy: Policy, mode: Literal["fc", "prompt"] = "fc", max_steps: int | None = None, instructions: dict[str, str] | None = None) -> None:
        if mode not in ("fc", "prompt"):
            raise ValueError("mode is 'fc' or 'prompt'")
        self.policy = policy
        self.mode = mode
        self.max_steps = max_steps
        self.instructions = instructions or {}

    async def _ask(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        reply = self.policy([dict(m) for m in messages], tools)
        return await reply if inspect.isawaitable(reply) else reply

    async def run(self, env: AsyncEnvScalerEnv, scenario_id: str, seed: int | None = None) -> EpisodeResult:
        res = EpisodeResult(scenario_id=scenario_id, seed=seed)
        obs, info = await env.reset(seed=seed, options={"scenario_id": scenario_id})
        res.episode_id = info.get("episode_id")
        res.seed = info.get("seed", seed)
        tools = list(info.get("tools") or [])
        res.messages = [
            {"role": "system", "content": system_prompt(info, self.mode, self.instructions.get(info.get("mode", "task")))},
            {"role": "user", "content": obs},
        ]
        cap = min(self.max_steps or 10**9, int(info.get("max_steps") or 10**9))
        ended = False
        reward, terminated, truncated = 0.0, False, False
        step_info: dict[str, Any] = {}
        if info.get("end_reason") == "user_stop":
            # the simulated user ended the conversation in its opening: nothing for the policy to answer
            obs, reward, terminated, truncated, step_info = await env.finish()
            ended = True
            cap = 0
        for step in range(1, cap + 1):
            try:
                reply = await self._ask(res.messages, tools if self.mode == "fc" else [])
            except Exception as e:  # the policy is the caller's code: its failure ends this episode only
                res.failures.append({"kind": "policy_error", "step": step, "message": f"{type(e).__name__}: {e}"})
                break
            message = {"role": "assistant", "content": reply} if isinstance(reply, str) else dict(reply)
            message.setdefault("role", "assistant")
            res.messages.append(message)
            obs, reward, terminated, truncated, step_info = await env.step(reply)
            res.steps = int(step_info.get("step", step))
            full = step_info.get("observation") or {}
            results = full.get("tool_results") or []
            if full.get("role") == "user" and _error_type(obs) == "invalid_action":
                res.failures.append({"kind": "unparseable_output", "step": step, "message": obs})
            for r in results:
                if not r.get("ok") and _error_type(r.get("content", "")) in ("unknown_tool", "invalid_arguments"):
                    res.failures.append({"kind": "invalid_tool_call", "step": step, "message": r.get("content")})
            if terminated or truncated:
                ended = True
                break
            self._observe(res.messages, message, full, obs)
        if not ended:
            if not any(f["kind"] == "policy_error" for f in res.failures):
                res.failures.append({"kind": "max_steps", "step": res.steps, "message": f"the agent reached the step cap ({cap})"})
            obs, reward, terminated, truncated, step_info = await env.finish()
        res.reward, res.terminated, res.truncated = float(reward), terminated, truncated
        res.end_reason = step_info.get("end_reason")
        res.reward_info = step_info.get("reward_info")
        if res.truncated and res.end_reason == "max_steps" and not any(f["kind"] == "max_steps" for f in res.failures):
            res.failures.append({"kind": "max_steps", "step": res.steps, "message": "the env's step limit ended the episode"})
        err = step_info.get("error")
        if err:
            kind = "user_simulator_failed" if err.get("code") == "user_simulator_failed" else "env_fault"
            res.failures.append({"kind": kind, "step": res.steps, "message": f"{err.get('code')}: {err.get('message')}"})
        return res

    def _observe(self, messages: list[dict[str, Any]], assistant: dict[str, Any], full: dict[str, Any], content: str) -> None:
        results = full.get("tool_results") or []
        calls = assistant.get("tool_calls") or []
        if self.mode == "prompt" or (results and not calls):
            text = "\n".join(f"<tool_response>\n{r.get('content', '')}\n</tool_response>" for r in results) if results else content
            messages.append({"role": "user", "content": text})
            return
        if calls:
            by_id = {r.get("tool_call_id"): r for r in results}
            for c in calls:
                r = by_id.get(c.get("id"))
                messages.append({"role": "tool", "tool_call_id": c.get("id"), "name": (c.get("function") or {}).get("name"), "content": r.get("content") if r else content})
            return
        messages.append({"role": "user", "content": content})


async def rollout(
    endpoints: str | Sequence[str] | Any,
    policy: Policy,
    scenarios: Sequence[str] = (),
    trials: int = 1,
    seed: int = 0,
    concurrency: int = 8,
    mode: Literal["fc", "prompt"] = "fc",
    max_steps: int | None = None,
    timeout: float = 300.0,
) -> list[EpisodeResult]:
    """Plays every scenario ``trials`` times (trial t with seed ``seed + t``), ``concurrency`` episodes at a time.

    ``endpoints``: a bridge (``envscaler.launch()``), one endpoint or a list (episodes are spread
    over them). ``scenarios``: ids, globs (``library-*``) or env ids; empty: all. Results are in
    (scenario, trial) order.
    """
    eps = [endpoints] if isinstance(endpoints, str) else list(getattr(endpoints, "endpoints", endpoints))
    clients = [AsyncBridgeClient(e, timeout=timeout) for e in eps]
    agent = Agent(policy, mode=mode, max_steps=max_steps)
    try:
        listed = await clients[0].list_scenarios()
        chosen: list[str] = []
        for p in scenarios or ["*"]:
            hits = [s["scenario_id"] for s in listed if s["env_id"] == p or fnmatch.fnmatchcase(s["scenario_id"], p)]
            if not hits:
                raise ValueError(f"scenario pattern {p!r} matches no scenario or env on the bridge")
            chosen += [h for h in hits if h not in chosen]
        plan = [(sid, t) for sid in chosen for t in range(trials)]
        gate = asyncio.Semaphore(max(1, concurrency))

        async def one(i: int, sid: str, t: int) -> EpisodeResult:
            async with gate:
                env = AsyncEnvScalerEnv(client=clients[i % len(clients)])
                try:
                    return await agent.run(env, sid, seed=seed + t)
                except BridgeError as e:
                    return EpisodeResult(scenario_id=sid, seed=seed + t, failures=[{"kind": "bridge_error", "step": 0, "message": str(e)}])
                finally:
                    await env.close()

        return list(await asyncio.gather(*(one(i, sid, t) for i, (sid, t) in enumerate(plan))))
    finally:
        for c in clients:
            await c.close()
