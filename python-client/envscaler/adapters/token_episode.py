"""Episodes as token ids, for trainers that generate tokens themselves (verl's agent loop, TRL's
``rollout_func``): the model is called tokens in, tokens out, and the episode comes back as
``prompt_ids``, ``response_ids``, an exact ``response_mask`` and the model's logprobs.

    ep = await play_tokens(env, tokenizer, generate, scenario_id="memo-1", seed=0, max_response_tokens=1024)
    ep.prompt_ids, ep.response_ids, ep.response_mask, ep.response_logprobs, ep.reward

``generate(context_ids, max_new_tokens) -> (ids, logprobs or None)`` is the trainer's model. The
episode is played by :class:`envscaler.Agent` (the same conversation ``envscaler rollout`` builds:
system prompt, task or simulated user, tool results), and every model turn's context is cut from
:func:`envscaler.tokens.render` of the conversation so far with the model's own ids in place of its
earlier turns. So the ids the model was given at turn k are a prefix of the final episode's ids
(checked: a chat template that rewrites earlier turns is a ``ValueError``, not a silently wrong
mask), its own tokens are mask 1 with their logprobs, and everything it read (tool results, the
simulated user, the template's markup) is mask 0 with logprob 0.

The response ends at the model's last token. ``max_response_tokens`` bounds it: a turn is given at
most what is left, and the episode stops (scored by ``finish``) when nothing is left.

Fork groups (GRPO from a mid-episode state): :func:`start_source` plays a row's prefix on one
episode, :func:`fork_members` forks it into a group spread over the replicas (exported and imported
across them), and ``play_tokens(member, ..., prefix=member.transcript)`` continues each: the
prefix's turns are context (mask 0, part of the prompt), only the group's own turns are trained.
:class:`ForkGroups` does the same when the members of a group arrive one by one (verl calls its
agent loop once per sample).
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..agent import COMPLETION_IDS, Agent, EpisodeResult
from ..async_bridge_client import AsyncBridgeClient
from ..async_env import AsyncEnvScalerEnv
from ..protocol import BridgeError, error_for
from ..tokens import render
from ..transcript import AgentMode, Transcript
from .bridge_episode import EpisodeInfrastructureError

__all__ = [
    "ENV_FAULTS",
    "ForkGroups",
    "Generate",
    "TokenEpisode",
    "fork_members",
    "play_tokens",
    "prefix_actions_of",
    "start_source",
]

#: ``generate(context_ids, max_new_tokens) -> (generated_ids, logprobs or None)``
Generate = Callable[[list[int], int], Awaitable[tuple[list[int], "list[float] | None"]]]

#: error codes of an episode the env itself broke (the reward says nothing about the policy);
#: any other error that ends an episode (session_lost, user_simulator_failed, ...) is infrastructure
ENV_FAULTS = frozenset({"env_fault", "env_timeout", "env_oom", "env_crashed", "env_output_invalid"})


class _BudgetSpent(Exception):
    """The response has no token left for another model turn."""


@dataclass
class TokenEpisode:
    """One played episode as token ids (see the module doc)."""

    prompt_ids: list[int]
    response_ids: list[int]
    #: 1 on the model's own tokens, 0 on what it read
    response_mask: list[int]
    #: per response token: the model's logprob (mask 1), 0.0 (mask 0); None if ``generate`` gave none
    response_logprobs: list[float] | None
    #: the episode's reward; None when the env faulted (unscorable: leave it out of the baseline)
    reward: float | None
    result: EpisodeResult
    #: the model turns played in this episode (a continuation's prefix not counted)
    model_turns: int = 0
    #: the episode stopped because ``max_response_tokens`` was spent
    budget_spent: bool = False
    #: the env's own error when it faulted (``reward`` is None then)
    env_error: dict[str, Any] | None = None
    metrics: dict[str, float] = field(default_factory=dict)


def _infrastructure(res: EpisodeResult) -> EpisodeInfrastructureError | None:
    """The failure that ended ``res`` if the bridge or the simulated user (not the policy, not the env) ended it."""
    for f in res.failures:
        if f["kind"] in ("env_fault", "user_simulator_failed", "bridge_error"):
            code = str(f.get("message", "")).split(":", 1)[0].strip()
            if f["kind"] == "env_fault" and code in ENV_FAULTS:
                continue
            return EpisodeInfrastructureError(f"the episode of {res.scenario_id} ended by {f['kind']}: {f.get('message')}", error_for(code or "internal_error", str(f.get("message", ""))))
    return None


async def play_tokens(
    env: AsyncEnvScalerEnv,
    tokenizer: Any,
    generate: Generate,
    *,
    scenario_id: str | None = None,
    seed: int | None = None,
    prefix: Transcript | None = None,
    mode: AgentMode = "fc",
    max_response_tokens: int = 4096,
    max_steps: int | None = None,
    chat_template_kwargs: Mapping[str, Any] | None = None,
) -> TokenEpisode:
    """Plays one episode on ``env`` (a reset of ``scenario_id``/``seed``, or the continuation of the
    fork ``env`` holds from ``prefix``) with ``generate`` as the model; returns it as token ids.

    Raises :class:`EpisodeInfrastructureError` when the bridge or the simulated user failed (the
    episode says nothing about the policy), ``ValueError`` when the chat template cannot give exact
    ids (it rewrites earlier turns)."""
    own: dict[int, list[int]] = {}
    logprobs: dict[int, list[float] | None] = {}
    contexts: list[list[int]] = []
    train_from = len(prefix.messages(mode)) if prefix is not None else 0
    kwargs = dict(chat_template_kwargs or {})
    state: dict[str, Any] = {"prompt_len": None, "spent": False}

    async def policy(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
        at = len(messages)
        probe = [*messages, {"role": "assistant", "content": ""}]
        r = render(tokenizer, probe, tools or None, generated={**own, at: []}, train_from=train_from, chat_template_kwargs=kwargs)
        context = r.input_ids[: r.assistant_spans[-1][0]]
        if state["prompt_len"] is None:
            state["prompt_len"] = len(context)
        left = max_response_tokens - (len(context) - state["prompt_len"])
        if left <= 0:
            state["spent"] = True
            raise _BudgetSpent(f"the response has used its {max_response_tokens} tokens")
        ids, lps = await generate(list(context), left)
        ids = [int(t) for t in ids][:left]
        own[at], logprobs[at] = ids, (None if lps is None else [float(x) for x in lps][: len(ids)])
        contexts.append(context)
        return {"role": "assistant", "content": tokenizer.decode(ids, skip_special_tokens=True), COMPLETION_IDS: ids}

    agent = Agent(policy, mode=mode, max_steps=max_steps)
    try:
        res = await (agent.run(env, prefix=prefix) if prefix is not None else agent.run(env, scenario_id, seed=seed))
    except BridgeError as e:
        raise EpisodeInfrastructureError(f"the bridge failed during {scenario_id or 'a continuation'}: {e}", e) from e
    crash = [f for f in res.failures if f["kind"] == "policy_error" and not f["message"].startswith(_BudgetSpent.__name__)]
    if crash:  # the trainer's generate failed: that is not an episode to train on
        raise RuntimeError(f"generate failed in {res.scenario_id}: {crash[0]['message']}")
    infra = _infrastructure(res)
    if infra is not None:
        raise infra
    tools = res.tools if mode == "fc" else None
    final = render(tokenizer, res.messages, tools or None, generated=res.generated_ids, train_from=res.prefix_messages, chat_template_kwargs=kwargs)
    ids = final.input_ids
    for k, ctx in enumerate(contexts):
        if ids[: len(ctx)] != ctx:
            raise ValueError(f"the chat template rendered turn {k + 1}'s context differently once the episode went on: its ids are not exact")
    prompt_len = len(final.prompt_ids)
    end = final.assistant_spans[-1][1] if final.assistant_spans else prompt_len
    response = ids[prompt_len:end]
    mask = final.loss_mask[prompt_len:end]
    lps_out: list[float] | None = [0.0] * len(response)
    turns = sorted(own)
    for i, (a, b) in zip(turns, final.assistant_spans, strict=True):
        lp = logprobs.get(i)
        if lp is None or len(lp) != b - a:
            lps_out = None
            break
        lps_out[a - prompt_len : b - prompt_len] = lp  # type: ignore[index]
    env_error = None
    reward: float | None = res.reward
    for f in res.failures:
        if f["kind"] == "env_fault":
            env_error, reward = {"message": f["message"]}, None
    return TokenEpisode(
        prompt_ids=final.prompt_ids,
        response_ids=response,
        response_mask=mask,
        response_logprobs=lps_out,
        reward=reward,
        result=res,
        model_turns=len(turns),
        budget_spent=bool(state["spent"]),
        env_error=env_error,
        metrics={"steps": float(res.steps), "model_turns": float(len(turns)), "invalid_calls": float(sum(f["kind"] in ("invalid_tool_call", "unparseable_output") for f in res.failures))},
    )


# ---------------------------------------------------------------------------------------------- fork groups


def prefix_actions_of(value: Any) -> list[Any]:
    """A row's ``prefix_actions``: a list, or its JSON text (parquet and ``datasets`` keep a string
    as it is, where a list of differently shaped dicts would be coerced); empty when absent."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return []
    if isinstance(value, str):
        value = json.loads(value)
    if not isinstance(value, list):
        raise ValueError("prefix_actions is a list of actions (or its JSON text)")
    return list(value)


async def start_source(client: AsyncBridgeClient, scenario_id: str, seed: int | None, prefix_actions: Sequence[Any] = ()) -> AsyncEnvScalerEnv:
    """An episode of ``scenario_id``/``seed`` after playing ``prefix_actions`` (its transcript has
    them): the state a fork group starts from. The caller closes it once the group is forked."""
    env = AsyncEnvScalerEnv(client=client)
    try:
        await env.reset(seed=seed, options={"scenario_id": scenario_id})
        for k, action in enumerate(prefix_actions):
            _, _, terminated, truncated, info = await env.step(action)
            if terminated or truncated:
                raise ValueError(f"the prefix of {scenario_id} ended the episode at its action {k + 1} ({info.get('end_reason')}): nothing is left to play from there")
    except BaseException:
        await env.close()
        raise
    return env


async def fork_members(source: AsyncEnvScalerEnv, clients: Sequence[AsyncBridgeClient], n: int) -> list[AsyncEnvScalerEnv]:
    """``n`` forks of ``source`` now, spread round-robin over ``clients`` (one per replica; a fork
    on another replica than the source's is exported and imported there). All or none: a failed
    fork closes the others and raises."""
    home = next((i for i, c in enumerate(clients) if c is source.client), 0)
    made = await asyncio.gather(*(source.fork(client=clients[(home + k) % len(clients)]) for k in range(n)), return_exceptions=True)
    failed = [m for m in made if isinstance(m, BaseException)]
    if failed:
        await asyncio.gather(*(m.close() for m in made if isinstance(m, AsyncEnvScalerEnv)))
        raise failed[0]
    return [m for m in made if isinstance(m, AsyncEnvScalerEnv)]


@dataclass
class _Group:
    source: asyncio.Task[AsyncEnvScalerEnv]
    waiting: int = 0
    forked: int = 0


class ForkGroups:
    """Fork groups whose members arrive one at a time (verl runs one agent loop per sample).

    The first member of a key starts the source (:func:`start_source` on the next replica); each
    member, as it arrives, gets its own fork of it, on the replicas in turn; when no member is
    waiting any more, the source is closed and the key forgotten. The members of a group that
    start together (verl starts a batch's samples at once) therefore share one source; a member
    arriving after its group closed starts a new source (the same state when the prefix replays
    deterministically; counted in ``sources``)."""

    def __init__(self, clients: Sequence[AsyncBridgeClient]) -> None:
        if not clients:
            raise ValueError("ForkGroups needs a client per replica")
        self.clients = list(clients)
        self._groups: dict[Any, _Group] = {}
        self._next = 0
        #: how many sources were started (one per group when its members arrive together)
        self.sources = 0
        #: forks made, by the endpoint of the replica they were made on
        self.placed: Counter[str] = Counter()

    async def member(self, key: Any, scenario_id: str, seed: int | None, prefix_actions: Sequence[Any]) -> AsyncEnvScalerEnv:
        """A fork of the group ``key``'s source for one member; the caller closes it."""
        group = self._groups.get(key)
        if group is None:
            client = self.clients[self._next % len(self.clients)]
            self._next += 1
            self.sources += 1
            group = self._groups[key] = _Group(asyncio.ensure_future(start_source(client, scenario_id, seed, prefix_actions)))
        group.waiting += 1
        try:
            source = await asyncio.shield(group.source)
            home = next((i for i, c in enumerate(self.clients) if c is source.client), 0)
            target = self.clients[(home + group.forked) % len(self.clients)]
            group.forked += 1
            child = await source.fork(client=target)
            self.placed[target.endpoint] += 1
            return child
        finally:
            group.waiting -= 1
            if group.waiting == 0:
                if self._groups.get(key) is group:
                    del self._groups[key]
                if group.source.done() and not group.source.cancelled() and group.source.exception() is None:
                    await group.source.result().close()
