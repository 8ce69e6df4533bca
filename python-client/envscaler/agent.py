"""The agent loop of ``envscaler rollout`` as a library call, with your own policy instead of an endpoint.

A policy is any function (sync or ``async``) ``policy(messages, tools) -> reply``: ``messages`` is
the agent's conversation in the OpenAI chat shape (system prompt, task or user turns, tool
results), ``tools`` the env's OpenAI function schemas, and the reply either raw assistant text
(Qwen3/Hermes ``<tool_call>`` blocks, optional ``<think>``) or an assistant message dict
(``{"role": "assistant", "content": ..., "tool_calls": [...]}``). The env parses the reply; one
it cannot read comes back as an observation the policy sees next, and is counted.

    results = await envscaler.rollout(bridge.endpoints, my_policy, ["library-*"], trials=4)

From a mid-episode state (GRPO groups): ``rollout(bridge, policy, start_from=envscaler.fork_point(env),
trials=8)`` forks the episode ``env`` is playing and continues each fork from its conversation so
far (``Agent.run(env, prefix=...)`` for one env holding a fork). The messages are built by
``envscaler.transcript`` (the envs' own ``env.messages`` use the same functions);
``envscaler.tokens.render`` turns a result into token ids and a loss mask.
"""

from __future__ import annotations

import asyncio
import fnmatch
import inspect
import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .async_bridge_client import AsyncBridgeClient
from .async_env import AsyncEnvScalerEnv
from .fork_point import ForkPoint
from .launch import watch_of
from .protocol import BridgeError

# the prompt and the message shapes live in transcript.py, shared with the envs' own transcripts
from .transcript import (  # _TASK, _CONVERSATION: the prompts were defined here first; tests import them from here
    _CONVERSATION,  # noqa: F401
    _TASK,  # noqa: F401
    TASK_DONE,
    AgentMode,
    Transcript,
    assistant_message,
    observation_messages,
    start_messages,
    system_prompt,
)

__all__ = ["COMPLETION_IDS", "TASK_DONE", "Agent", "EpisodeResult", "Policy", "rollout", "system_prompt"]

Policy = Callable[[list[dict[str, Any]], list[dict[str, Any]]], "Any | Awaitable[Any]"]


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
    #: the tools the policy was given (fc mode) or shown in the system prompt (prompt mode): pass them to ``envscaler.tokens.render``
    tools: list[dict[str, Any]] = field(default_factory=list)
    #: how many leading ``messages`` came from the prefix a continuation was given (0 after a reset):
    #: ``render(..., train_from=result.prefix_messages)`` trains only on this run's turns
    prefix_messages: int = 0
    #: the model's own token ids of an assistant turn, by its index in ``messages``, when the policy
    #: returned them (``"completion_ids"`` in its reply dict): ``render(..., generated=...)`` uses them verbatim
    generated_ids: dict[int, list[int]] = field(default_factory=dict)

    @property
    def success(self) -> bool:
        return self.reward >= 1 - 1e-9


#: The key of a policy's reply dict that carries the model's own generated token ids (token-in/token-out).
COMPLETION_IDS = "completion_ids"


class Agent:
    """Plays episodes of an ``AsyncEnvScalerEnv`` with a policy function.

    ``mode="fc"``: the policy gets the tools and the observations as ``tool`` messages (one per
    call id); ``mode="prompt"``: the tools are in the system prompt and results come back as user
    ``<tool_response>`` turns. ``max_steps`` caps the episode's steps (counted as the bridge counts
    them, so a continuation from step k plays at most ``max_steps - k``; the scenario's own cap
    applies too); an episode the agent does not end is scored with ``finish``.

    A reply dict may carry ``"completion_ids"``: the token ids the model generated for it. They are
    taken off before the env sees the reply and kept in ``EpisodeResult.generated_ids``.
    """

    def __init__(self, policy: Policy, mode: AgentMode = "fc", max_steps: int | None = None, instructions: dict[str, str] | None = None) -> None:
        if mode not in ("fc", "prompt"):
            raise ValueError("mode is 'fc' or 'prompt'")
        self.policy = policy
        self.mode: AgentMode = mode
        self.max_steps = max_steps
        self.instructions = instructions or {}

    async def _ask(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        reply = self.policy([dict(m) for m in messages], tools)
        return await reply if inspect.isawaitable(reply) else reply

    async def run(
        self,
        env: AsyncEnvScalerEnv,
        scenario_id: str | None = None,
        seed: int | None = None,
        *,
        prefix: Transcript | Sequence[dict[str, Any]] | None = None,
        tools: Sequence[dict[str, Any]] | None = None,
    ) -> EpisodeResult:
        """Plays one episode: resets ``env`` to ``scenario_id`` (and ``seed``), or, with ``prefix``, continues the episode ``env`` holds.

        The continuation (GRPO from a mid-episode state): ``env`` holds a live session forked from
        another episode after k steps, and ``prefix`` is that episode's conversation up to the fork:
        a :class:`~envscaler.transcript.Transcript` (``source.transcript.copy()``, or a
        :class:`~envscaler.fork_point.ForkPoint`'s), rendered in this agent's mode, or the messages
        themselves (then pass ``tools``; the steps played so far are counted as the assistant turns
        in them). No reset is sent; the policy is asked next with ``prefix`` as its history."""
        if prefix is None:
            if scenario_id is None:
                raise ValueError("Agent.run needs a scenario_id (or a prefix to continue a forked episode)")
            return await self._play(env, EpisodeResult(scenario_id=scenario_id, seed=seed), None)
        if isinstance(prefix, Transcript):
            transcript = prefix.copy()
        else:
            msgs = [dict(m) for m in prefix]
            transcript = Transcript.from_messages(msgs, tools or (), steps=sum(m.get("role") == "assistant" for m in msgs))
        res = EpisodeResult(scenario_id=str(env.scenario_id or transcript.info.get("scenario_id") or ""), seed=transcript.info.get("seed"))
        env.transcript = transcript.copy()  # the env's own record of this episode continues from the prefix too
        return await self._play(env, res, transcript)

    async def _play(self, env: AsyncEnvScalerEnv, res: EpisodeResult, prefix: Transcript | None) -> EpisodeResult:
        reward, terminated, truncated = 0.0, False, False
        step_info: dict[str, Any] = {}
        ended = False
        if prefix is None:
            obs, info = await env.reset(seed=res.seed, options={"scenario_id": res.scenario_id})
            res.seed = info.get("seed", res.seed)
            res.messages = start_messages(obs, info, self.mode, self.instructions.get(info.get("mode", "task")))
            done_before = 0
        else:
            info = prefix.info
            res.messages = prefix.messages(self.mode, self.instructions.get(info.get("mode", "task")))
            res.prefix_messages = len(res.messages)
            done_before = prefix.step_count
            res.steps = done_before
        res.episode_id = env.episode_id
        res.tools = list(info.get("tools") or [])
        cap = min(self.max_steps or 10**9, int(info.get("max_steps") or 10**9))
        if prefix is None and info.get("end_reason") == "user_stop":
            # the simulated user ended the conversation in its opening: nothing for the policy to answer
            obs, reward, terminated, truncated, step_info = await env.finish()
            ended = True
            cap = 0
        for step in range(done_before + 1, cap + 1):
            try:
                reply = await self._ask(res.messages, res.tools if self.mode == "fc" else [])
            except Exception as e:  # the policy is the caller's code: its failure ends this episode only
                res.failures.append({"kind": "policy_error", "step": step, "message": f"{type(e).__name__}: {e}"})
                break
            ids = None
            if isinstance(reply, dict) and COMPLETION_IDS in reply:
                reply = dict(reply)
                ids = [int(t) for t in reply.pop(COMPLETION_IDS)]
            obs, reward, terminated, truncated, step_info = await env.step(reply)
            message = assistant_message(reply, step_info)
            if ids is not None:
                res.generated_ids[len(res.messages)] = ids
            res.messages.append(message)
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
            res.messages += observation_messages(message, full, obs, self.mode)
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
        messages += observation_messages(assistant, full, content, self.mode)


async def rollout(
    endpoints: str | Sequence[str] | Any,
    policy: Policy,
    scenarios: Sequence[str] = (),
    trials: int = 1,
    seed: int = 0,
    concurrency: int = 8,
    mode: AgentMode = "fc",
    max_steps: int | None = None,
    timeout: float = 300.0,
    start_from: ForkPoint | Sequence[ForkPoint] | None = None,
) -> list[EpisodeResult]:
    """Plays every scenario ``trials`` times (trial t with seed ``seed + t``), ``concurrency`` episodes at a time.

    ``endpoints``: a bridge (``envscaler.launch()``), one endpoint or a list (episodes are spread
    over them). ``scenarios``: ids, globs (``library-*``) or env ids; empty: all. Results are in
    (scenario, trial) order.

    ``start_from``: one or more :class:`~envscaler.fork_point.ForkPoint` instead of scenarios: each
    is forked ``trials`` times (dealt over the replicas of ``endpoints``, starting on the one holding
    it; it is exported once and imported once on each other) and the agent continues every fork from
    the point's conversation (``Agent.run(env, prefix=...)``); results are in (point, trial) order,
    with ``prefix_messages`` marking where the point's conversation ends.
    """
    eps = [endpoints] if isinstance(endpoints, str) else list(getattr(endpoints, "endpoints", endpoints))
    gone = watch_of(endpoints)  # a launched bridge: its exit fails the requests at once, not after the timeout
    clients = {e: AsyncBridgeClient(e, timeout=timeout, gone=gone) for e in eps}
    agent = Agent(policy, mode=mode, max_steps=max_steps)
    gate = asyncio.Semaphore(max(1, concurrency))
    try:
        if start_from is not None:
            if scenarios:
                raise ValueError("rollout takes scenarios or start_from, not both")
            points = [start_from] if isinstance(start_from, ForkPoint) else list(start_from)
            for p in points:
                if p.endpoint not in clients:  # a point on a replica outside `endpoints`
                    clients[p.endpoint] = AsyncBridgeClient(p.endpoint, timeout=timeout, gone=gone)
            targets = [clients[e] for e in eps] or [clients[points[0].endpoint]]

            def placed(p: ForkPoint, t: int) -> AsyncBridgeClient:
                # a group is dealt over the replicas, starting on the point's own (no import there)
                order = [clients[p.endpoint], *(c for c in targets if c.endpoint != p.endpoint)]
                return order[t % len(order)]

            async def cont(p: ForkPoint, t: int) -> EpisodeResult:
                async with gate:
                    try:
                        env = await p.open(placed(p, t), source=clients[p.endpoint])
                    except BridgeError as e:
                        sid = str(p.transcript.info.get("scenario_id", ""))
                        return EpisodeResult(scenario_id=sid, seed=p.transcript.info.get("seed"), failures=[{"kind": "bridge_error", "step": 0, "message": str(e)}])
                    try:
                        return await agent.run(env, prefix=p.transcript)
                    except BridgeError as e:
                        return EpisodeResult(scenario_id=str(env.scenario_id), seed=p.transcript.info.get("seed"), failures=[{"kind": "bridge_error", "step": 0, "message": str(e)}])
                    finally:
                        await env.close()

            used = {(id(p), placed(p, t).endpoint): p for p in points for t in range(trials)}
            try:
                # each point exported once and imported once on every other replica its trials go to
                for (_, ep), p in used.items():
                    try:
                        await p.stage(clients[ep], source=clients[p.endpoint])
                    except BridgeError:
                        pass  # the trials placed there meet the error again in open() and report it as their failure
                return list(await asyncio.gather(*(cont(p, t) for p in points for t in range(trials))))
            finally:
                for p in points:
                    await p.release(list(clients.values()))

        pool = list(clients.values())
        listed = await pool[0].list_scenarios()
        chosen: list[str] = []
        for pattern in scenarios or ["*"]:
            hits = [s["scenario_id"] for s in listed if s["env_id"] == pattern or fnmatch.fnmatchcase(s["scenario_id"], pattern)]
            if not hits:
                raise ValueError(f"scenario pattern {pattern!r} matches no scenario or env on the bridge")
            chosen += [h for h in hits if h not in chosen]
        plan = [(sid, t) for sid in chosen for t in range(trials)]

        async def one(i: int, sid: str, t: int) -> EpisodeResult:
            async with gate:
                env = AsyncEnvScalerEnv(client=pool[i % len(pool)])
                try:
                    return await agent.run(env, sid, seed=seed + t)
                except BridgeError as e:
                    return EpisodeResult(scenario_id=sid, seed=seed + t, failures=[{"kind": "bridge_error", "step": 0, "message": str(e)}])
                finally:
                    await env.close()

        return list(await asyncio.gather(*(one(i, sid, t) for i, (sid, t) in enumerate(plan))))
    finally:
        for c in clients.values():
            await c.close()
