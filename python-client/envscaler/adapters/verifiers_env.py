"""verifiers (``verifiers`` 0.3.1, its v0 stack): bridge scenarios as a ``MultiTurnEnv``.

    import verifiers as vf
    env = vf.load_environment("envscaler.adapters.verifiers_env", endpoints=bridge.endpoints, scenarios=["library-*"], seeds=[0, 1])
    results = env.evaluate_sync(vf.OpenAIChatCompletionsClient(AsyncOpenAI(base_url=..., api_key=...)), model="qwen")

verifiers 0.4.0 (PyPI's newest) ships only its v1 stack; 0.3.1 is the newest release with the v0
``MultiTurnEnv`` and ``load_environment`` (``verifiers.legacy``, also importable as ``verifiers``),
which prime-rl's v0 path and ``vf-eval`` run. Each dataset row is one (scenario, seed): ``prompt``
(the agent's system prompt and task, as ``envscaler.Agent`` opens an episode), ``info`` (JSON:
``scenario_id``, ``seed`` and the env's tools as verifiers ``tool_defs``, so the model is given them
natively). ``setup_state`` resets the row's scenario and seed on the bridge (the live opening
replaces the row's user turn, which matters for a simulated user), ``env_response`` sends the model's
turn (its tool calls, or its text) as one bridge step and returns the tool results (``tool``
messages) or the user's reply; the step that ends the episode is the final env response. The
reward is the episode's: ``finish`` scores an episode the model left unfinished (verifiers stopped
it at ``max_turns`` or on an error) before the session is closed in cleanup.

Failures: an infrastructure failure (bridge, replica, simulated user) raises
:class:`~envscaler.adapters.bridge_episode.EpisodeInfrastructureError` into verifiers (its rollout
records the error: ``state["error"]``), never a reward of 0 it could train on; an env fault's reward
is 0 with ``state["envscaler_env_fault"] = True`` (metric ``envscaler_env_fault``).
"""

from __future__ import annotations

import asyncio
import json
import weakref
from collections.abc import Iterable, Sequence
from contextlib import closing
from typing import Any

from ..async_bridge_client import AsyncBridgeClient
from ..async_env import AsyncEnvScalerEnv
from ..protocol import BridgeError
from ..transcript import AgentMode, assistant_message, observation_messages
from .bridge_episode import EpisodeInfrastructureError
from .openings import openings

__all__ = ["EnvScalerMultiTurnEnv", "load_environment", "verifiers_rows"]


def _vf() -> Any:
    try:
        import verifiers as vf

        return vf if hasattr(vf, "MultiTurnEnv") else None  # 0.4.0: the v1 stack only
    except Exception:
        return None


_v = _vf()
_Base: type = _v.MultiTurnEnv if _v is not None else object

# one client per replica and event loop (verifiers runs its rollouts on one loop)
_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, AsyncBridgeClient]] = weakref.WeakKeyDictionary()


def _client(endpoint: str, timeout: float) -> AsyncBridgeClient:
    per_loop = _clients.setdefault(asyncio.get_running_loop(), {})
    c = per_loop.get(endpoint)
    if c is None or c.closed:
        c = per_loop[endpoint] = AsyncBridgeClient(endpoint, timeout=timeout)
    return c


def verifiers_rows(bridge: Any, scenarios: str | Sequence[str] = (), seeds: Iterable[int] = (0,), mode: AgentMode = "fc", include_conversation: bool = False) -> list[dict[str, Any]]:
    """One row per (scenario, seed): ``prompt`` (the opening messages), ``info`` (JSON text:
    ``scenario_id``, ``seed``, ``env_id``, ``tool_defs`` in fc mode) and ``answer`` (empty).
    ``scenarios``: ids or globs (default: all task scenarios; ``include_conversation=True`` adds
    conversation scenarios, which need a bridge with a simulated user). Each (scenario, seed) is
    reset once to read its opening."""
    rows = []
    with closing(openings(bridge, scenarios, seeds, mode, include_conversation=include_conversation)) as opened:
        for o in opened:
            tools = [_tool_def(t) for t in o.tools]
            meta: dict[str, Any] = {"scenario_id": o.scenario_id, "seed": o.seed, "env_id": o.env_id}
            if mode == "fc":
                meta["tool_defs"] = tools
            rows.append({"prompt": o.messages, "info": json.dumps(meta), "answer": ""})
    return rows


def _tool_def(tool: dict[str, Any]) -> dict[str, Any]:
    """A bridge tool (OpenAI function schema) as a verifiers ``tool_defs`` entry."""
    fn = tool["function"]
    return {"name": fn["name"], "description": fn.get("description", ""), "parameters": fn.get("parameters") or {"type": "object", "properties": {}}}


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(str(getattr(p, "text", None) or (p.get("text") if isinstance(p, dict) else "") or "") for p in content)


class EnvScalerMultiTurnEnv(_Base):  # type: ignore[misc]  # verifiers' MultiTurnEnv when installed
    """A verifiers v0 ``MultiTurnEnv`` over the bridge (see the module doc)."""

    def __init__(
        self,
        endpoints: Sequence[str] | str,
        scenarios: str | Sequence[str] = (),
        seeds: Iterable[int] = (0,),
        mode: AgentMode = "fc",
        timeout: float = 60.0,
        max_turns: int = -1,
        include_conversation: bool = False,
        **kwargs: Any,
    ) -> None:
        if _v is None:
            raise RuntimeError("verifiers with the v0 MultiTurnEnv is not installed (pip install 'verifiers==0.3.1'; 0.4.0 ships only its v1 stack)")
        from datasets import Dataset

        self.endpoints = [endpoints] if isinstance(endpoints, str) else [str(e) for e in endpoints]
        self.mode: AgentMode = mode
        self.timeout = float(timeout)
        self._next = 0
        rows = verifiers_rows(self.endpoints, scenarios, seeds, mode, include_conversation)
        dataset = Dataset.from_list(rows)
        rubric = _v.Rubric(funcs=[self.envscaler_reward])
        rubric.add_metric(self.envscaler_env_fault)
        super().__init__(dataset=dataset, eval_dataset=dataset, rubric=rubric, max_turns=max_turns, **kwargs)

    async def setup_state(self, state: Any) -> Any:
        info = state["info"] if isinstance(state["info"], dict) else json.loads(state["info"])
        endpoint = self.endpoints[self._next % len(self.endpoints)]
        self._next += 1
        env = AsyncEnvScalerEnv(client=_client(endpoint, self.timeout))
        state["envscaler_env"] = env
        try:
            obs, reset_info = await env.reset(seed=info.get("seed"), options={"scenario_id": info["scenario_id"]})
        except BridgeError as e:
            raise EpisodeInfrastructureError(f"reset of {info['scenario_id']} failed: {e}", e) from e
        state["envscaler_episode_id"] = reset_info.get("episode_id")
        prompt = list(state["prompt"])
        prompt[-1] = _v.types.UserMessage(content=obs)  # the live opening (a simulated user's may differ from the row's)
        state["prompt"] = prompt
        return state

    async def env_response(self, messages: Any, state: Any, **kwargs: Any) -> Any:
        last = messages[-1]
        calls = getattr(last, "tool_calls", None) or []
        action: Any
        if calls:
            action = {
                "role": "assistant",
                "content": _text(last.content) or None,
                "tool_calls": [{"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}} for c in calls],
            }
        else:
            action = _text(last.content)
        env: AsyncEnvScalerEnv = state["envscaler_env"]
        try:
            obs, reward, terminated, truncated, info = await env.step(action)
        except BridgeError as e:
            raise EpisodeInfrastructureError(f"step failed: {e}", e) from e
        self._check(info)
        replies = observation_messages(assistant_message(action, info), info.get("observation") or {}, obs, self.mode)
        out = [_v.types.ToolMessage(content=str(m["content"]), tool_call_id=str(m["tool_call_id"])) if m["role"] == "tool" else _v.types.UserMessage(content=str(m["content"])) for m in replies]
        if terminated or truncated:
            state["envscaler_reward"] = float(reward)
            state["envscaler_env_fault"] = bool(info.get("error"))
            state["final_env_response"] = out
        return out

    @staticmethod
    def _check(info: dict[str, Any]) -> None:
        err = info.get("error") or {}
        code = str(err.get("code", ""))
        if code and not code.startswith("env_"):  # session_lost, user_simulator_failed, ...: not the policy's doing
            raise EpisodeInfrastructureError(f"the episode ended by {code}: {err.get('message')}", BridgeError(str(err.get("message", "")), code=code))

    if _v is not None:

        @_v.cleanup  # type: ignore[untyped-decorator]
        async def envscaler_close(self, state: Any) -> None:
            """Scores an episode verifiers stopped (max_turns, an error) with ``finish``, then closes its session."""
            env: AsyncEnvScalerEnv | None = state.get("envscaler_env")
            if env is None:
                return
            try:
                if "envscaler_reward" not in state and state.get("error") is None and env.episode.live:
                    _, reward, _, _, info = await env.finish()
                    self._check(info)
                    state["envscaler_reward"] = float(reward)
                    state["envscaler_env_fault"] = bool(info.get("error"))
            finally:
                await env.close()

    async def envscaler_reward(self, state: Any, **kwargs: Any) -> float:
        """The episode's reward (an errored rollout has none: verifiers records its error)."""
        return float(state.get("envscaler_reward") or 0.0)

    async def envscaler_env_fault(self, state: Any, **kwargs: Any) -> float:
        return float(bool(state.get("envscaler_env_fault")))


def load_environment(
    endpoints: Sequence[str] | str,
    scenarios: str | Sequence[str] = (),
    seeds: Iterable[int] = (0,),
    mode: AgentMode = "fc",
    timeout: float = 60.0,
    max_turns: int = -1,
    include_conversation: bool = False,
) -> Any:
    """verifiers' entry point (``vf.load_environment("envscaler.adapters.verifiers_env", ...)``);
    task scenarios only unless ``include_conversation=True`` (a bridge with a simulated user)."""
    return EnvScalerMultiTurnEnv(endpoints, scenarios, seeds, mode=mode, timeout=timeout, max_turns=max_turns, include_conversation=include_conversation)
