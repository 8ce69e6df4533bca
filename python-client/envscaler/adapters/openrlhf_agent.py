"""OpenRLHF (``openrlhf`` 0.11): a ready ``--agent_func_path`` file over the bridge.

    export ENVSCALER_ENDPOINTS=tcp://127.0.0.1:5555,tcp://127.0.0.1:5556
    python -m openrlhf.cli.train_ppo_ray ... \\
        --train.agent_func_path "$(python -c 'import envscaler.adapters.openrlhf_agent as m; print(m.__file__)')" \\
        --data.input_key prompt --data.label_key label --data.apply_chat_template

OpenRLHF loads this file in its vLLM rollout actors and runs :class:`AgentExecutor` (its own
``MultiTurnAgentExecutor``) once per sample: ``AgentInstance.reset`` starts the bridge episode the
sample's ``label`` names (``{"scenario_id", "seed"}`` as JSON: ``openrlhf_rows`` writes it, with the
agent's system prompt and task as ``prompt``), each ``step`` sends the model's raw text to the
bridge and returns the tool results as chat-templated feedback (ChatML, as Qwen's template renders
tool results: a user turn of ``<tool_response>`` blocks), and the episode's reward on the step that
ends it. Endpoints come from ``ENVSCALER_ENDPOINTS`` (comma-separated; samples are spread over them
round-robin), the request timeout from ``ENVSCALER_TIMEOUT`` (seconds, default 60).

Failures: an infrastructure failure raises :class:`EpisodeInfrastructureError` out of ``step``
(OpenRLHF's rollout fails instead of training on a 0); an env fault ends the episode with reward 0
and ``extra_logs["env_fault"] = 1``.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
from collections.abc import Iterable, Sequence
from contextlib import closing
from typing import Any

from .bridge_episode import BridgeEpisode, EndpointPool
from .openings import openings

__all__ = ["AgentExecutor", "AgentInstance", "chatml_feedback", "openrlhf_rows"]


def _bases() -> tuple[type, type]:
    try:
        from openrlhf.utils.agent import AgentInstanceBase, MultiTurnAgentExecutor
    except Exception:  # openrlhf not installed: importable (rows, feedback), not runnable by OpenRLHF
        return object, object
    return AgentInstanceBase, MultiTurnAgentExecutor


_InstanceBase: type = _bases()[0]
_ExecutorBase: type = _bases()[1]

#: the process's pool of replica clients (OpenRLHF makes an instance per sample; the clients outlive them)
_pools: dict[str, EndpointPool] = {}
_pool_lock = threading.Lock()


def _shared_pool() -> EndpointPool:
    with _pool_lock:
        pool = _pools.get("pool")
        if pool is None or pool.closed:
            endpoints = [e.strip() for e in os.environ.get("ENVSCALER_ENDPOINTS", "").split(",") if e.strip()]
            if not endpoints:
                raise RuntimeError("set ENVSCALER_ENDPOINTS to the bridge's endpoints (comma-separated) for the OpenRLHF agent")
            pool = _pools["pool"] = EndpointPool(endpoints, timeout=float(os.environ.get("ENVSCALER_TIMEOUT", "60")))
        return pool


def chatml_feedback(observation: dict[str, Any], action_text: str, done: bool) -> str:
    """The env's answer as the text that follows the model's turn (ChatML): tool results as one user
    turn of ``<tool_response>`` blocks (how Qwen2.5's template renders ``tool`` messages), a user
    reply as a user turn, then the assistant's next opening unless the episode is over."""
    results = observation.get("tool_results") or []
    body = "\n".join(f"<tool_response>\n{r.get('content', '')}\n</tool_response>" for r in results) or str(observation.get("content", ""))
    text = "" if "<|im_end|>" in action_text else "<|im_end|>\n"
    text += f"<|im_start|>user\n{body}<|im_end|>\n"
    return text if done else text + "<|im_start|>assistant\n"


class AgentInstance(_InstanceBase):  # type: ignore[misc]  # the base is chosen at import time
    """One sample's episode (OpenRLHF makes one instance per sample and drops it afterwards)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.episode: BridgeEpisode = _shared_pool().episode()

    async def reset(self, states: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        label = states.get("label")
        spec = json.loads(label) if isinstance(label, str) else dict(label or {})
        if not spec.get("scenario_id"):
            raise ValueError(f"the sample's label must be JSON with scenario_id (and seed): got {label!r}")
        seed = spec.get("seed")
        await asyncio.to_thread(self.episode.reset, str(spec["scenario_id"]), None if seed is None else int(seed))
        # the prompt OpenRLHF rendered from the row's messages is the opening (openrlhf_rows wrote them)
        return {"observation": states["observation"]}

    async def step(self, states: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        import torch

        action_text = str(states.get("action_text", ""))
        r = await asyncio.to_thread(self.episode.step, action_text)  # raises EpisodeInfrastructureError
        observation = (r or {}).get("observation") or {}
        end = self.episode.end if r is not None else await asyncio.to_thread(self.episode.finish)
        done = end is not None
        reward = end.reward if end is not None else 0.0
        fault = bool(end is not None and end.env_fault)
        if done:
            self.episode.close()  # OpenRLHF drops the instance after the sample: close its session now
        return {
            "rewards": torch.tensor(reward),
            "scores": torch.tensor(reward),
            "environment_feedback": chatml_feedback(observation, action_text, done),
            "done": done,
            "sampling_params": states.get("sampling_params"),
            "extra_logs": {"env_fault": torch.tensor(float(fault)), "steps": torch.tensor(float(self.episode.steps))},
        }


class AgentExecutor(_ExecutorBase):  # type: ignore[misc]
    """What ``--agent_func_path`` loads: OpenRLHF's multi-turn executor over :class:`AgentInstance`."""

    def __init__(self) -> None:
        super().__init__(AgentInstance)


def openrlhf_rows(bridge: Any, scenarios: str | Sequence[str] = (), seeds: Iterable[int] = (0,), include_conversation: bool = False) -> list[dict[str, Any]]:
    """Rows for OpenRLHF's prompt dataset: ``prompt`` (the agent's system prompt and task, chat
    messages for ``--data.apply_chat_template``) and ``label`` (JSON ``{"scenario_id", "seed"}``).
    ``scenarios``: ids or globs (default: all task scenarios; ``include_conversation=True`` adds
    conversation scenarios, which need a bridge with a simulated user); each (scenario, seed) is
    reset once to read its opening."""
    with closing(openings(bridge, scenarios, seeds, mode="prompt", include_conversation=include_conversation)) as opened:
        return [{"prompt": o.messages, "label": json.dumps({"scenario_id": o.scenario_id, "seed": o.seed})} for o in opened]
