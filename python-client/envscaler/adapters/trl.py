"""TRL (``trl`` >= 1.16): EnvScaler scenarios as ``GRPOTrainer(environment_factory=...)`` envs.

    envs = TRLEnvironments(bridge)                       # a Bridge, an endpoint or a list of them
    dataset = envs.dataset(["library-*"], seeds=range(4))
    use_fenced_tool_calls(tokenizer)                     # Qwen2.5-Coder writes ```json calls
    trainer = GRPOTrainer(model, args=config, train_dataset=dataset, processing_class=tokenizer,
                          environment_factory=envs.factories)
    trainer.train(); envs.close()

TRL reads an env's tools once per class (the public methods of an instance's class, their schema
from type hints and a Google docstring through transformers' ``get_json_schema``), so there is one
generated class per EnvScaler env, and the dataset's ``environment`` column picks it per row.
``reset(**row)`` starts the row's scenario with its seed on the bridge, each tool method is one
bridge ``step`` with that call, and ``get_reward()`` finishes and scores the episode.

What TRL cannot express (``trl_visible_schema`` says exactly what survives): a parameter needs a
description (its name is used when the bridge gives none); ``pattern``, bounds, ``minItems`` and
the fields of objects inside arrays are not in TRL's schema (the env still checks them and answers a
bad call with an ``invalid_arguments`` observation). TRL's tool loop has no slot for a simulated
user, so conversation scenarios are refused here (they need a ``rollout_func``).

Failures, the trainer's way: the agent's mistakes are observations (the bridge answers them);
TRL turns an exception in a tool into an error observation, so a tool that hits an infrastructure
failure records it and ``get_reward()`` raises :class:`EpisodeInfrastructureError`, which stops
the step instead of scoring the rollout 0; a reset that fails on the bridge raises it from
``reset``. With ``on_infra_error="skip"`` both leave the rollout unscored (logged) instead. An episode the env itself faulted (``env_fault``) is
unscorable: ``get_reward()`` returns None, which TRL leaves out of the group's baseline.
"""

from __future__ import annotations

import copy
import fnmatch
import inspect
import keyword
import logging
import re
import threading
from collections.abc import Iterable, Sequence
from contextlib import closing
from typing import Any, Literal, Union

from ..bridge_client import CurveKeys
from ..protocol import tool_observation_text
from .bridge_episode import BridgeEpisode, EndpointPool, EpisodeInfrastructureError
from .openings import openings

__all__ = [
    "FENCED_JSON_RESPONSE_TEMPLATE",
    "FENCED_OR_TAGGED_RESPONSE_TEMPLATE",
    "TRLEnvironments",
    "make_env_class",
    "trl_visible_schema",
    "use_fenced_tool_calls",
]

log = logging.getLogger("envscaler.adapters.trl")

# ---------------------------------------------------------------------------------------------- response templates

#: TRL's response parser for models that write tool calls as ```json fences (Qwen2.5-Coder does;
#: TRL's Qwen template only reads ``<tool_call>`` tags, so with it such a model makes no calls at
#: all). transformers >= 5.13 ``response_template`` format.
FENCED_JSON_RESPONSE_TEMPLATE: dict[str, Any] = {
    "defaults": {"role": "assistant"},
    "start_anchor": "<|im_start|>assistant\n",
    "fields": {
        "tool_calls": {
            "open": "```json\n",
            "close_pattern": r"\s*```\s*",
            "repeats": True,
            "content": "json",
            "transform": {"type": "function", "function": "{content}"},
        },
        "content": {"close_pattern": r"<\|im_end\|>\s*", "content": "text"},
    },
}

#: The same, accepting ``<tool_call>`` tags too (a model trained further may switch to them).
FENCED_OR_TAGGED_RESPONSE_TEMPLATE: dict[str, Any] = {
    "defaults": {"role": "assistant"},
    "start_anchor": "<|im_start|>assistant\n",
    "fields": {
        "tool_calls": {
            "open_pattern": r"```json\s*\n|<tool_call>\s*",
            "close_pattern": r"\s*(?:```|</tool_call>)\s*",
            "repeats": True,
            "content": "json",
            "transform": {"type": "function", "function": "{content}"},
        },
        "content": {"close_pattern": r"<\|im_end\|>\s*", "content": "text"},
    },
}


def use_fenced_tool_calls(tokenizer: Any, accept_tags: bool = False) -> Any:
    """Sets the fenced-JSON response template on ``tokenizer`` (before building the trainer: TRL
    keeps a template it finds). The start anchor is Qwen's (ChatML); returns the tokenizer."""
    tokenizer.response_template = copy.deepcopy(FENCED_OR_TAGGED_RESPONSE_TEMPLATE if accept_tags else FENCED_JSON_RESPONSE_TEMPLATE)
    return tokenizer


# ---------------------------------------------------------------------------------------------- schemas -> methods

_SCALARS: dict[str, type] = {"string": str, "integer": int, "number": float, "boolean": bool, "null": type(None)}
_JSON_TYPE = {str: "string", int: "integer", float: "number", bool: "boolean", type(None): "null"}
#: the keywords transformers' get_json_schema can produce for a parameter (anything else is lost)
_KEPT = ("type", "enum", "items", "description")
_RESERVED = {"reset", "get_reward"}


def _hint(schema: dict[str, Any]) -> Any:
    """The Python type hint whose transformers schema is as close to ``schema`` as it gets."""
    enum = schema.get("enum")
    if isinstance(enum, list) and enum and all(type(v) in _JSON_TYPE for v in enum):
        return Literal[tuple(enum)]
    t = schema.get("type")
    if isinstance(t, list):
        members = [_SCALARS[x] for x in t if x in _SCALARS]
        return Union[tuple(members)] if members else Any  # noqa: UP007 (built from a runtime tuple)
    if t == "array":
        items = schema.get("items")
        return list[_hint(items)] if isinstance(items, dict) and items else list  # type: ignore[misc]
    if t == "object":
        return dict
    return _SCALARS.get(t, Any) if isinstance(t, str) else Any


def _visible(schema: dict[str, Any], name: str | None) -> dict[str, Any]:
    hint_schema: dict[str, Any] = {}
    enum = schema.get("enum")
    if isinstance(enum, list) and enum and all(type(v) in _JSON_TYPE for v in enum):
        kinds = list(dict.fromkeys(_JSON_TYPE[type(v)] for v in enum))
        hint_schema = {"type": kinds[0] if len(kinds) == 1 else kinds, "enum": list(enum)}
    else:
        t = schema.get("type")
        if isinstance(t, list):
            names = sorted({x for x in t if x in _SCALARS and x != "null"})
            hint_schema = {"type": names[0] if len(names) == 1 else names} if names else {}
            if "null" in t and names:
                hint_schema["nullable"] = True
        elif t == "array":
            items = schema.get("items")
            hint_schema = {"type": "array", "items": _visible(items, None)} if isinstance(items, dict) and items else {"type": "array"}
        elif isinstance(t, str) and (t in _SCALARS or t == "object"):
            hint_schema = {"type": t}
    if name is not None:  # a parameter: get_json_schema needs (and keeps) a one-paragraph description
        hint_schema["description"] = _param_description(schema, name)
    return hint_schema


def _param_description(schema: dict[str, Any], name: str) -> str:
    desc = schema.get("description")
    text = desc.strip() if isinstance(desc, str) and desc.strip() else name
    return re.sub(r"\s*\n+\s*", " ", text)


def trl_visible_schema(tool: dict[str, Any]) -> dict[str, Any]:
    """The schema TRL shows the model for a generated tool method: the bridge's tool schema less
    what type hints and a Google docstring cannot carry (``pattern``, bounds, ``minItems``, the
    fields of nested objects, ``null`` in a type list becomes ``nullable``), a missing parameter
    description replaced by the parameter's name, multi-line parameter descriptions on one line, an
    empty ``required`` list left out.
    Equal to ``tool`` for a tool that uses none of those."""
    fn = tool["function"]
    params = fn.get("parameters") or {}
    props = params.get("properties") or {}
    out_params: dict[str, Any] = {"type": "object", "properties": {p: _visible(s, p) for p, s in props.items()}}
    required = [p for p in props if p in (params.get("required") or [])]
    if required:
        out_params["required"] = required
    return {"type": "function", "function": {"name": fn["name"], "description": (fn.get("description") or "").strip(), "parameters": out_params}}


def _docstring(fn: dict[str, Any]) -> str:
    lines = [(fn.get("description") or "").strip() or fn["name"]]
    props = (fn.get("parameters") or {}).get("properties") or {}
    if props:
        lines += ["", "Args:"] + [f"    {p}: {_param_description(s, p)}" for p, s in props.items()]
    return "\n".join(lines)


def _check_name(name: str, what: str) -> None:
    if not name.isidentifier() or keyword.iskeyword(name):
        raise ValueError(f"{what} {name!r} is not a Python identifier, so TRL cannot expose it as a tool method")


def _tool_method(tool: dict[str, Any]) -> Any:
    fn = tool["function"]
    name = fn["name"]
    _check_name(name, "tool")
    if name in _RESERVED or name.startswith("_"):
        raise ValueError(f"tool {name!r} clashes with TRL's env methods (reset, get_reward, private names)")
    params = fn.get("parameters") or {}
    props: dict[str, Any] = params.get("properties") or {}
    required = set(params.get("required") or [])
    sig_params = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    annotations: dict[str, Any] = {}
    # required parameters first (a Python signature cannot have a defaulted one before them)
    for p in sorted(props, key=lambda p: p not in required):
        _check_name(p, f"parameter of {name}:")
        annotations[p] = _hint(props[p])
        default = inspect.Parameter.empty if p in required else None
        sig_params.append(inspect.Parameter(p, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotations[p]))
    # no return hint: get_json_schema would add a "return" entry the bridge's schema does not have

    def method(self: _EnvScalerTRLEnv, **arguments: Any) -> str:
        return self._call(name, arguments)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = _docstring(fn)
    method.__annotations__ = annotations
    method.__signature__ = inspect.Signature(sig_params)  # type: ignore[attr-defined]
    return method


# ---------------------------------------------------------------------------------------------- the env classes


class _EnvScalerTRLEnv:
    """Base of the generated classes (private: TRL would list public methods as tools)."""

    _envscaler_env_id: str = ""
    _envscaler_pool: EndpointPool
    _envscaler_scenarios: dict[str, dict[str, Any]]
    _envscaler_on_infra_error: str = "raise"

    def __init__(self) -> None:
        self._episode: BridgeEpisode = self._envscaler_pool.episode()

    def reset(self, scenario_id: str, seed: int | None = None, **row: Any) -> str | None:
        """Starts the row's scenario on the bridge; the task is already the prompt's user turn."""
        scenario = self._envscaler_scenarios.get(scenario_id)
        if scenario is None:
            raise ValueError(f"scenario {scenario_id!r} is not one of env {self._envscaler_env_id}'s (its rows go to another environment)")
        if scenario.get("mode") == "conversation":
            raise ValueError(f"scenario {scenario_id!r} is a conversation: TRL's tool loop has no turn for its simulated user (use task scenarios)")
        try:
            self._episode.reset(scenario_id, None if seed is None else int(seed))
        except EpisodeInfrastructureError as e:
            if self._envscaler_on_infra_error == "raise":
                raise
            # recorded on the episode: the tools answer with it and get_reward() returns None
            log.warning("envscaler: %s (rollout left unscored)", e)
        return None

    def _call(self, name: str, arguments: dict[str, Any]) -> str:
        r = self._episode.step({"name": name, "arguments": arguments})  # raises EpisodeInfrastructureError (recorded)
        if r is None:
            return '{"error": {"type": "episode_done", "message": "the episode has ended; no tool runs any more"}}'
        obs = r.get("observation") or {}
        results = obs.get("tool_results")
        return tool_observation_text(results) if results else str(obs.get("content", ""))

    def get_reward(self) -> float | None:
        """Finishes the episode (if the agent has not ended it) and returns its reward; None when the
        env faulted (unscorable); raises EpisodeInfrastructureError when the bridge failed."""
        try:
            end = self._episode.finish()
        except EpisodeInfrastructureError as e:
            if self._envscaler_on_infra_error == "raise":
                raise
            log.warning("envscaler: %s (rollout left unscored)", e)
            return None
        if end.env_fault:
            log.warning("envscaler: the env faulted in %s (%s): rollout left unscored", self._episode.info.get("scenario_id"), end.error)
            return None
        return end.reward

    def _close(self) -> None:
        self._episode.close()


def make_env_class(env: dict[str, Any], pool: EndpointPool, scenarios: Iterable[dict[str, Any]], on_infra_error: str = "raise") -> type:
    """A TRL environment class for one EnvScaler env (``list_envs`` entry): one method per tool."""
    if on_infra_error not in ("raise", "skip"):
        raise ValueError("on_infra_error is 'raise' or 'skip'")
    env_id = env["env_id"]
    methods = {t["function"]["name"]: _tool_method(t) for t in env.get("tools") or []}
    attrs: dict[str, Any] = {
        "__doc__": f"EnvScaler env {env_id} ({env.get('name', '')}) on the bridge, for TRL's environment_factory.",
        "__module__": __name__,
        "_envscaler_env_id": env_id,
        "_envscaler_pool": pool,
        "_envscaler_scenarios": {s["scenario_id"]: s for s in scenarios if s.get("env_id") == env_id},
        "_envscaler_on_infra_error": on_infra_error,
        **methods,
    }
    # TRL names the reward column after the class
    cls_name = "EnvScaler_" + re.sub(r"\W", "_", env_id)
    return type(cls_name, (_EnvScalerTRLEnv,), attrs)


class TRLEnvironments:
    """The generated env classes of a bridge, their dataset, and the sessions they hold.

    ``bridge``: an ``envscaler.launch()`` Bridge, an endpoint, or a list of endpoints (instances
    are spread over the replicas round-robin). ``envs``: env ids or globs (default: every env).
    ``factories`` is what ``GRPOTrainer(environment_factory=...)`` takes; ``close()`` closes every
    session the instances opened (an instance dropped without it closes its own when collected).
    """

    def __init__(self, bridge: Any, envs: Sequence[str] = (), timeout: float = 60.0, curve: CurveKeys | None = None, on_infra_error: str = "raise") -> None:
        self.pool = EndpointPool(bridge, timeout=timeout, curve=curve)
        client = self.pool.client(0)
        listed = client.list_envs()
        self.scenarios: list[dict[str, Any]] = client.list_scenarios()
        chosen = [e for e in listed if not envs or any(e["env_id"] == p or fnmatch.fnmatchcase(e["env_id"], p) for p in envs)]
        if not chosen:
            raise ValueError(f"no env on the bridge matches {list(envs)}")
        self.env_classes: dict[str, type] = {e["env_id"]: make_env_class(e, self.pool, self.scenarios, on_infra_error) for e in chosen}
        self._lock = threading.Lock()

    @property
    def factories(self) -> dict[str, type]:
        """``{env_id: class}`` for ``environment_factory`` (the dataset's ``environment`` column holds the env id)."""
        return dict(self.env_classes)

    def tools(self, env_id: str) -> list[dict[str, Any]]:
        """The bridge's tool schemas of an env (what the generated methods stand for)."""
        return [t for e in self.pool.client(0).list_envs() if e["env_id"] == env_id for t in e.get("tools") or []]

    def dataset(self, scenarios: str | Sequence[str] = (), seeds: Iterable[int] = (0,), repeat: int = 1) -> Any:
        """A ``datasets.Dataset`` with one row per (scenario, seed): ``prompt`` (the agent's system
        prompt and the task, as ``envscaler.Agent`` opens an episode), ``environment`` (env id),
        ``scenario_id`` and ``seed``. ``scenarios``: ids, globs or env ids (default: every task
        scenario of the chosen envs); conversation scenarios are left out (see the module doc).

        Each (scenario, seed) is reset once on the bridge to read its exact opening."""
        from datasets import Dataset  # the [train] extra

        rows = self.rows(scenarios, seeds)
        return Dataset.from_list([r for r in rows for _ in range(max(1, int(repeat)))])

    def rows(self, scenarios: str | Sequence[str] = (), seeds: Iterable[int] = (0,)) -> list[dict[str, Any]]:
        """The dataset's rows as plain dicts (what ``dataset`` wraps)."""
        pool_ids = [s for s in self.scenarios if s["env_id"] in self.env_classes and s.get("mode") != "conversation"]
        with closing(openings(self.pool, scenarios, seeds, listed=pool_ids, what="task scenario of the chosen envs")) as opened:
            return [{"prompt": o.messages, "environment": o.env_id, "scenario_id": o.scenario_id, "seed": o.seed} for o in opened]

    def stats(self) -> list[dict[str, Any]]:
        return self.pool.stats()

    def close(self) -> None:
        self.pool.close()

    def __enter__(self) -> TRLEnvironments:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
