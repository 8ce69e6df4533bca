"""verl (``verl`` 0.9): an agent loop registered as ``envscaler``, and its dataset.

    from envscaler.adapters.verl import verl_rows
    import pandas as pd
    pd.DataFrame(verl_rows(bridge, ["library-*"], seeds=range(64))).to_parquet("train.parquet")

and in the verl config (``agent_loop.yaml`` is the file below)::

    actor_rollout_ref.rollout.mode=async
    actor_rollout_ref.rollout.agent.agent_loop_config_path=agent_loop.yaml
    data.train_files=train.parquet data.return_raw_chat=True

    # agent_loop.yaml
    - name: envscaler
      _target_: envscaler.adapters.verl.EnvScalerAgentLoop
      endpoints: [tcp://127.0.0.1:5555, tcp://127.0.0.1:5556]
      mode: fc              # or prompt (the tools in the system prompt)

verl makes one agent loop per sample (``hydra.utils.instantiate`` of the registry entry, plus the
yaml's keys as keyword arguments) and awaits ``run(sampling_params, **row)``. Here ``run`` plays
the row's scenario and seed on the bridge with :func:`~envscaler.adapters.token_episode.play_tokens`:
each model turn is ``server_manager.generate(prompt_ids=...)`` (tokens in, tokens out), the
context built by :func:`envscaler.tokens.render` with the model's own earlier ids, so
``response_mask`` is exact (1 on the model's tokens, 0 on tool results, the simulated user's turns
and the template's markup) and ``response_logprobs`` are the server's. The episode's reward is
``reward_score`` (verl then skips its reward function for the sample); ``num_turns`` counts the
conversation's messages, as verl's own loops do.

Fork groups: a row with ``extra_info.prefix_actions`` (a JSON list of actions) starts its group
from the state after those actions: the first of the row's ``rollout.n`` samples (they share the
row's ``uid``) plays them on one episode, every sample of the group continues a fork of it, spread
over the replicas, and only the group's own turns are trained (the prefix's are prompt). Without
``prefix_actions``, every sample resets the same scenario and seed, which gives the same start.

Failures: an infrastructure failure (bridge, replica, simulated user) raises
:class:`~envscaler.adapters.bridge_episode.EpisodeInfrastructureError` out of ``run``, which fails
verl's rollout step instead of training on a made-up 0; an episode the env faulted gets reward 0
with ``extra_fields["envscaler_env_fault"] = 1`` (verl has no way to leave a sample unscored).
"""

from __future__ import annotations

import asyncio
import json
import os
import weakref
from collections.abc import Iterable, Sequence
from contextlib import closing
from typing import Any
from uuid import uuid4

from ..async_bridge_client import AsyncBridgeClient
from ..async_env import AsyncEnvScalerEnv
from ..transcript import AgentMode
from .openings import openings
from .token_episode import ForkGroups, TokenEpisode, play_tokens, prefix_actions_of

__all__ = ["AGENT_NAME", "EnvScalerAgentLoop", "verl_rows"]

#: the name the loop is registered under (the dataset's ``agent_name``)
AGENT_NAME = "envscaler"


def _base() -> tuple[type, Any]:
    try:
        from verl.experimental.agent_loop.agent_loop import AgentLoopBase, register
    except Exception:  # verl not installed: the dataset builder still works
        return object, None
    return AgentLoopBase, register


_Base: type = _base()[0]
_register: Any = _base()[1]

# one set of clients (and fork groups) per event loop and bridge: verl makes a loop object per
# sample; AgentLoopWorker runs them all on its own event loop
_shared: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[str, ...], tuple[list[AsyncBridgeClient], ForkGroups]]] = weakref.WeakKeyDictionary()


def _clients(endpoints: tuple[str, ...], timeout: float) -> tuple[list[AsyncBridgeClient], ForkGroups]:
    per_loop = _shared.setdefault(asyncio.get_running_loop(), {})
    got = per_loop.get(endpoints)
    if got is None or any(c.closed for c in got[0]):
        clients = [AsyncBridgeClient(e, timeout=timeout) for e in endpoints]
        got = per_loop[endpoints] = (clients, ForkGroups(clients))
    return got


def _plain(value: Any) -> Any:
    """numpy scalars and 0-d arrays (verl's non-tensor batch) as Python values."""
    return value.item() if hasattr(value, "item") and getattr(value, "ndim", 0) == 0 else value


class EnvScalerAgentLoop(_Base):  # type: ignore[misc]  # verl's AgentLoopBase when installed
    """One bridge episode per sample (see the module doc)."""

    def __init__(self, *args: Any, endpoints: Sequence[str] | str | None = None, mode: AgentMode = "fc", max_steps: int | None = None, timeout: float = 60.0, **kwargs: Any) -> None:
        if _Base is object:
            raise RuntimeError("verl is not installed (pip install verl): EnvScalerAgentLoop runs inside verl's AgentLoopWorker")
        super().__init__(*args, **kwargs)
        if endpoints is None:
            endpoints = os.environ.get("ENVSCALER_ENDPOINTS", "")
        if isinstance(endpoints, str):
            endpoints = [e.strip() for e in endpoints.split(",") if e.strip()]
        self.endpoints = tuple(str(e) for e in endpoints)
        if not self.endpoints:
            raise ValueError("EnvScalerAgentLoop needs the bridge's endpoints (the loop config's `endpoints`, or ENVSCALER_ENDPOINTS)")
        if mode not in ("fc", "prompt"):
            raise ValueError("mode is 'fc' or 'prompt'")
        self.mode: AgentMode = mode
        self.max_steps = max_steps
        self.timeout = float(timeout)
        self.response_length = int(self.rollout_config.response_length)

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> Any:
        from verl.experimental.agent_loop.agent_loop import AgentLoopOutput

        extra = dict(_plain(kwargs.get("extra_info")) or {})
        scenario_id = str(extra.get("scenario_id") or _plain(kwargs.get("scenario_id")) or "")
        if not scenario_id:
            raise ValueError("the row needs extra_info.scenario_id (verl_rows writes it)")
        seed = extra.get("seed", _plain(kwargs.get("seed")))
        seed = None if seed is None else int(seed)
        prefix = prefix_actions_of(extra.get("prefix_actions"))
        clients, groups = _clients(self.endpoints, self.timeout)
        params = dict(sampling_params)
        metrics: dict[str, Any] = {"generate_sequences": 0.0}

        async def generate(context: list[int], left: int) -> tuple[list[int], list[float] | None]:
            loop = asyncio.get_running_loop()
            t0 = loop.time()
            out = await self.server_manager.generate(request_id=uuid4().hex, prompt_ids=context, sampling_params={**params, "max_tokens": left})
            metrics["generate_sequences"] += loop.time() - t0
            return list(out.token_ids), (list(out.log_probs) if out.log_probs else None)

        if prefix:
            key = _plain(kwargs.get("uid")) or (scenario_id, seed, json.dumps(prefix, sort_keys=True))
            env = await groups.member(key, scenario_id, seed, prefix)
        else:
            env = AsyncEnvScalerEnv(client=clients[_next_replica(len(clients))])
        try:
            ep: TokenEpisode = await play_tokens(
                env,
                self.tokenizer,
                generate,
                scenario_id=None if prefix else scenario_id,
                seed=seed,
                prefix=env.transcript if prefix else None,
                mode=self.mode,
                max_response_tokens=self.response_length,
                max_steps=self.max_steps,
                chat_template_kwargs=self.apply_chat_template_kwargs,
            )
        finally:
            await env.close()
        limit = int(self.rollout_config.prompt_length)
        if len(ep.prompt_ids) > limit:  # verl pads every prompt to this width; cutting the system prompt would train on a prompt the model never saw
            raise ValueError(f"the prompt of {scenario_id} is {len(ep.prompt_ids)} tokens, over rollout.prompt_length={limit}: raise it (a fork prefix is part of the prompt)")
        extra_fields: dict[str, Any] = {
            "envscaler_scenario_id": scenario_id,
            "envscaler_episode_id": ep.result.episode_id,
            "envscaler_end_reason": ep.result.end_reason,
            "envscaler_env_fault": int(ep.env_error is not None),
            "envscaler_budget_spent": int(ep.budget_spent),
            "turn_scores": [],
            "tool_rewards": [],
        }
        return AgentLoopOutput(
            prompt_ids=ep.prompt_ids,
            response_ids=ep.response_ids,
            response_mask=ep.response_mask,
            response_logprobs=ep.response_logprobs,
            reward_score=0.0 if ep.reward is None else float(ep.reward),
            num_turns=len(ep.result.messages),
            metrics=metrics,
            extra_fields=extra_fields,
        )


_counter = [0]


def _next_replica(n: int) -> int:
    _counter[0] += 1
    return (_counter[0] - 1) % n


if _register is not None:
    _register(AGENT_NAME)(EnvScalerAgentLoop)  # verl's registry: {"envscaler": {"_target_": "envscaler.adapters.verl.EnvScalerAgentLoop"}}


def verl_rows(
    bridge: Any,
    scenarios: str | Sequence[str] = (),
    seeds: Iterable[int] = (0,),
    mode: AgentMode = "fc",
    prefix_actions: dict[str, Sequence[Any]] | None = None,
    data_source: str = "envscaler",
    include_conversation: bool = False,
) -> list[dict[str, Any]]:
    """Rows for verl's parquet dataset, one per (scenario, seed): ``prompt`` (the agent's opening
    messages: verl's dataset filters on its length and hands it on as ``raw_prompt``; the loop plays
    the bridge's own opening), ``agent_name`` (``envscaler``), ``data_source``, ``reward_model``
    (``{"style": "rule", "ground_truth": ""}``: the reward is the episode's) and ``extra_info``
    (``scenario_id``, ``seed``, ``env_id``, ``index`` and, for a fork group, ``prefix_actions`` as
    JSON). ``scenarios``: ids or globs (default: all task scenarios; ``include_conversation=True`` adds
    conversation scenarios, which need a bridge with a simulated user, ``serve --user-model``);
    ``prefix_actions``: ``{scenario_id: actions}``."""
    prefixes = dict(prefix_actions or {})
    rows: list[dict[str, Any]] = []
    with closing(openings(bridge, scenarios, seeds, mode, include_conversation=include_conversation)) as opened:
        for o in opened:
            extra: dict[str, Any] = {"scenario_id": o.scenario_id, "seed": o.seed, "env_id": o.env_id, "index": len(rows)}
            if o.scenario_id in prefixes:
                extra["prefix_actions"] = json.dumps(list(prefixes[o.scenario_id]))
            rows.append(
                {
                    "prompt": o.messages,
                    "agent_name": AGENT_NAME,
                    "data_source": data_source,
                    "reward_model": {"style": "rule", "ground_truth": ""},
                    "extra_info": extra,
                }
            )
    return rows
