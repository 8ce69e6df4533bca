"""TRL (``trl`` >= 1.16): a ``GRPOTrainer(rollout_func=...)`` that plays whole bridge episodes,
conversation scenarios (simulated user turns) included, as token ids with an env mask.

    rollout = TRLRollout(bridge)                                   # a Bridge, an endpoint or a list
    dataset = rollout.dataset(["notes-2", "library-*"], seeds=range(4))
    trainer = GRPOTrainer(model, reward_funcs=[rollout.reward], args=config, train_dataset=dataset,
                          processing_class=tokenizer, rollout_func=rollout)
    trainer.train(); rollout.close()

TRL's tool loop (``environment_factory``, :mod:`envscaler.adapters.trl`) ends when the model stops
calling tools, so it has no turn for a simulated user; ``rollout_func`` hands the whole rollout to
us. TRL calls ``rollout(prompts, trainer)`` with its batch's prompts, each prompt repeated
``num_generations`` times in a row (one GRPO group per run), and wants back per completion
``prompt_ids``, ``completion_ids``, ``logprobs``, and here ``env_mask`` (1 on the model's tokens, 0
on the tool results, the simulated user's turns and the template's markup, so only the model's
own tokens are trained) and ``envscaler_reward`` (forwarded to ``rollout.reward``).

Each completion is one episode played by :func:`~envscaler.adapters.token_episode.play_tokens`: the
trainer's model generates each turn from the token ids of the conversation so far (the model's
own earlier ids kept verbatim), the bridge runs its tool calls or asks its simulated user, until the
episode ends or ``max_completion_length`` tokens are used. A prompt's row (scenario, seed and the
fork prefix) travels in its first message's ``envscaler_row`` field (TRL passes the prompts, not
the rows; chat templates ignore the field).

Fork groups: a row made with ``prefix_actions`` starts its group from the state after those
actions: one episode plays them, it is forked into the group's ``num_generations`` members spread
over the replicas, and each member continues its fork (the prefix's turns are prompt, not trained).
Without a prefix every member resets the row's scenario and seed (the same start).

Failures: an infrastructure failure (bridge, replica, simulated user) raises
:class:`~envscaler.adapters.bridge_episode.EpisodeInfrastructureError` (the step fails;
``on_infra_error="skip"`` leaves the rollout unscored instead); an env fault's reward is None, which
TRL leaves out of the group's baseline.

Generation uses the trainer's model through ``transformers``' ``generate`` one turn at a time (with
the trainer's ``generation_config``: temperature, top-p, ...), which is what runs on a CPU; for vLLM,
pass ``generate=`` a coroutine of your own (``(context_ids, max_new_tokens) -> (ids, logprobs)``).
Do not set a response template on the tokenizer (``use_fenced_tool_calls``): the bridge parses the
calls from the model's text, and TRL would try to parse the multi-turn completion as one reply.
"""

from __future__ import annotations

import asyncio
import copy
import json
import logging
import threading
from collections.abc import Iterable, Mapping, Sequence
from contextlib import closing
from typing import Any

from ..async_bridge_client import AsyncBridgeClient
from ..async_env import AsyncEnvScalerEnv
from ..bridge_client import CurveKeys
from ..launch import watch_of
from ..transcript import AgentMode
from .bridge_episode import EpisodeInfrastructureError, endpoints_of
from .openings import openings
from .token_episode import Generate, TokenEpisode, fork_members, play_tokens, prefix_actions_of, start_source

__all__ = ["ROW_FIELD", "TRLRollout", "episode_reward"]

log = logging.getLogger("envscaler.adapters.trl_rollout")

#: the field of a prompt's first message that carries its row
ROW_FIELD = "envscaler_row"


def episode_reward(completions: Any = None, envscaler_reward: Sequence[float | None] | None = None, **_: Any) -> list[float | None]:
    """The reward function for ``reward_funcs``: each completion's episode reward (None: unscorable)."""
    if envscaler_reward is None:
        raise ValueError("no envscaler_reward in the batch: use this reward with TRLRollout as the rollout_func")
    return [None if r is None else float(r) for r in envscaler_reward]


class TRLRollout:
    """The ``rollout_func`` (call it), its dataset and its reward (see the module doc).

    ``mode``: ``fc`` (tools to the chat template) or ``prompt`` (tools in the system prompt);
    ``max_steps`` caps an episode's steps; ``max_turn_tokens`` caps one model turn (the episode's
    whole completion is capped by the trainer's ``max_completion_length``); ``generate`` replaces
    the trainer's model (async ``(context_ids, max_new_tokens) -> (ids, logprobs or None)``)."""

    def __init__(
        self,
        bridge: Any,
        mode: AgentMode = "fc",
        max_steps: int | None = None,
        timeout: float = 60.0,
        curve: CurveKeys | None = None,
        on_infra_error: str = "raise",
        generate: Generate | None = None,
        max_turn_tokens: int | None = None,
    ) -> None:
        if on_infra_error not in ("raise", "skip"):
            raise ValueError("on_infra_error is 'raise' or 'skip'")
        self.endpoints, found = endpoints_of(bridge)
        self.gone = watch_of(bridge)  # a launched bridge that exits fails the episodes at once, not after the timeout
        self.curve = curve if curve is not None else found
        self.mode: AgentMode = mode
        self.max_steps = max_steps
        self.timeout = float(timeout)
        self.on_infra_error = on_infra_error
        self.custom_generate = generate
        self.max_turn_tokens = max_turn_tokens
        self.reward = episode_reward
        #: the last call's episodes, in completion order (for logging and tests)
        self.last_episodes: list[TokenEpisode | None] = []
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="envscaler-trl-rollout", daemon=True)
        self._thread.start()
        self._clients: list[AsyncBridgeClient] = self._run(self._make_clients())
        self._next = 0
        self.closed = False

    # ------------------------------------------------------------------ the event loop the episodes run on

    def _run(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    async def _make_clients(self) -> list[AsyncBridgeClient]:
        return [AsyncBridgeClient(e, timeout=self.timeout, curve=self.curve, gone=self.gone) for e in self.endpoints]

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True

        async def shut() -> None:
            for c in self._clients:
                await c.close()

        self._run(shut())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)

    def __enter__(self) -> TRLRollout:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ the dataset

    def rows(
        self,
        scenarios: str | Sequence[str] = (),
        seeds: Iterable[int] = (0,),
        prefix_actions: Mapping[str, Sequence[Any]] | None = None,
        include_conversation: bool = True,
    ) -> list[dict[str, Any]]:
        """One row per (scenario, seed): ``prompt`` (the agent's opening, its first message carrying
        the row as ``envscaler_row``), ``scenario_id``, ``seed``. ``scenarios``: ids, globs or env
        ids (default: all, conversations included: this is the adapter for them, and its bridge is
        meant to have a simulated user; ``include_conversation=False`` keeps task scenarios only);
        ``prefix_actions``: ``{scenario_id: actions}`` for fork groups. Each (scenario, seed) is
        reset once to read its opening."""
        prefixes = dict(prefix_actions or {})
        rows = []
        with closing(openings(self.endpoints, scenarios, seeds, self.mode, timeout=self.timeout, curve=self.curve, include_conversation=include_conversation)) as opened:
            for o in opened:
                row = {"scenario_id": o.scenario_id, "seed": o.seed, "prefix_actions": list(prefixes.get(o.scenario_id, []))}
                prompt: list[dict[str, Any]] = [dict(m) for m in o.messages]
                prompt[0][ROW_FIELD] = json.dumps(row)
                rows.append({"prompt": prompt, "scenario_id": o.scenario_id, "seed": o.seed})
        return rows

    def dataset(
        self,
        scenarios: str | Sequence[str] = (),
        seeds: Iterable[int] = (0,),
        prefix_actions: Mapping[str, Sequence[Any]] | None = None,
        include_conversation: bool = True,
    ) -> Any:
        """:meth:`rows` as a ``datasets.Dataset``."""
        from datasets import Dataset  # the [train] extra

        return Dataset.from_list(self.rows(scenarios, seeds, prefix_actions, include_conversation))

    # ------------------------------------------------------------------ the rollout_func

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, Any]:
        if self.closed:
            raise RuntimeError("the TRLRollout is closed")
        n = int(trainer.num_generations if trainer.model.training else trainer.num_generations_eval)
        if n < 1 or len(prompts) % n or any(prompts[i] != prompts[i - i % n] for i in range(len(prompts))):
            raise ValueError(f"TRL passed {len(prompts)} prompts that are not runs of num_generations={n} equal prompts (one GRPO group each)")
        groups = [_row_of(prompts[i]) for i in range(0, len(prompts), n)]
        generate = self.custom_generate or _model_generate(trainer, self.max_turn_tokens)
        tokenizer = trainer.processing_class
        budget = int(trainer.max_completion_length)
        episodes: list[TokenEpisode | None] = self._run(self._play_groups(groups, n, tokenizer, generate, budget))
        self.last_episodes = episodes
        pad = [int(tokenizer.eos_token_id)]
        out: dict[str, Any] = {"prompt_ids": [], "completion_ids": [], "logprobs": [], "env_mask": [], "envscaler_reward": []}
        for ep in episodes:
            if ep is None or not ep.response_ids:  # unscored (skip) or nothing generated: one masked token, no reward
                out["prompt_ids"].append(ep.prompt_ids if ep is not None else next((e.prompt_ids for e in episodes if e is not None), pad))
                out["completion_ids"].append(pad)
                out["logprobs"].append([0.0])
                out["env_mask"].append([0])
                out["envscaler_reward"].append(None)
                continue
            out["prompt_ids"].append(ep.prompt_ids)
            out["completion_ids"].append(ep.response_ids)
            out["logprobs"].append(ep.response_logprobs or [0.0] * len(ep.response_ids))
            out["env_mask"].append(ep.response_mask)
            out["envscaler_reward"].append(ep.reward)
        return out

    async def _play_groups(self, groups: list[dict[str, Any]], n: int, tokenizer: Any, generate: Generate, budget: int) -> list[TokenEpisode | None]:
        results: list[TokenEpisode | None] = []
        for row in groups:
            results += await self._play_group(row, n, tokenizer, generate, budget)
        return results

    def _client(self) -> AsyncBridgeClient:
        c = self._clients[self._next % len(self._clients)]
        self._next += 1
        return c

    async def _play_group(self, row: dict[str, Any], n: int, tokenizer: Any, generate: Generate, budget: int) -> list[TokenEpisode | None]:
        scenario_id, seed = str(row["scenario_id"]), row.get("seed")
        prefix = prefix_actions_of(row.get("prefix_actions"))
        try:
            if prefix:
                source = await start_source(self._client(), scenario_id, None if seed is None else int(seed), prefix)
                try:
                    members = await fork_members(source, self._clients, n)
                finally:
                    await source.close()
            else:
                members = [AsyncEnvScalerEnv(client=self._client()) for _ in range(n)]
        except Exception as e:
            return self._failed(e, n)

        async def one(env: AsyncEnvScalerEnv) -> TokenEpisode | None:
            try:
                return await play_tokens(
                    env,
                    tokenizer,
                    generate,
                    scenario_id=None if prefix else scenario_id,
                    seed=None if seed is None else int(seed),
                    prefix=env.transcript if prefix else None,
                    mode=self.mode,
                    max_response_tokens=budget,
                    max_steps=self.max_steps,
                )
            finally:
                await env.close()

        played = await asyncio.gather(*(one(m) for m in members), return_exceptions=True)
        out: list[TokenEpisode | None] = []
        for p in played:
            if isinstance(p, BaseException):
                out += self._failed(p, 1)
            else:
                out.append(p)
        return out

    def _failed(self, e: BaseException, n: int) -> list[TokenEpisode | None]:
        if isinstance(e, EpisodeInfrastructureError) and self.on_infra_error == "skip":
            log.warning("envscaler: %s (rollout left unscored)", e)
            return [None] * n
        raise e


def _row_of(prompt: Any) -> dict[str, Any]:
    first = prompt[0] if isinstance(prompt, list) and prompt else None
    raw = first.get(ROW_FIELD) if isinstance(first, Mapping) else None
    if not raw:
        raise ValueError(f"a prompt without its row: its first message needs the {ROW_FIELD!r} field (build the dataset with TRLRollout.rows/dataset)")
    row = json.loads(raw)
    if not isinstance(row, dict) or not row.get("scenario_id"):
        raise ValueError(f"{ROW_FIELD} names no scenario_id: {raw!r}")
    return row


def _model_generate(trainer: Any, max_turn_tokens: int | None = None) -> Generate:
    """The trainer's model as ``generate``: one turn with ``transformers``' ``generate`` and the
    trainer's generation config, the sampled tokens' logprobs from the processed scores."""
    import torch

    model = trainer.accelerator.unwrap_model(trainer.model)
    config = copy.deepcopy(trainer.generation_config)
    eos = {int(t) for t in (trainer.eos_token_ids if hasattr(trainer, "eos_token_ids") else [trainer.processing_class.eos_token_id])}

    async def generate(context: list[int], left: int) -> tuple[list[int], list[float] | None]:
        turn = copy.deepcopy(config)
        turn.max_new_tokens = min(int(left), int(max_turn_tokens or config.max_new_tokens or left))
        ids = torch.tensor([context], device=model.device)
        with torch.no_grad():
            out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), generation_config=turn, return_dict_in_generate=True, output_scores=True)
        new = out.sequences[0, len(context) :].tolist()
        logprobs = [float(torch.log_softmax(s[0].float(), dim=-1)[t]) for s, t in zip(out.scores, new, strict=False)]
        for k, t in enumerate(new):  # through the first end-of-turn token, as TRL's own generation cuts
            if t in eos:
                new, logprobs = new[: k + 1], logprobs[: k + 1]
                break
        return new, logprobs

    return generate
