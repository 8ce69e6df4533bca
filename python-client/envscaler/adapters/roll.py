"""EnvScalerRollEnv: the env API of EnvScaler's ROLL integration, served by the bridge.

The original classes (``EnvScalerNonConvRLEnv`` and friends) load env code and tasks in-process;
this one keeps their ``reset``/``step`` shapes so a ROLL env manager can switch to the bridge
without changes: ``reset(seed, task_index) -> ({"type": "user", "content"}, info)`` with
``env_name``, ``env_introduction``, ``tools`` and ``task`` in info, and ``step(action)`` returning
``({"type": "tool"|"user", "content"}, reward, terminated, truncated, info)``.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from ..bridge_client import BridgeClient, CurveKeys
from ..episode_logic import Episode, check_mode, check_seed, close_session_quietly, open_client, step_tuple
from ..previous_episode import finish_mode, lazy_previous

__all__ = ["ROLL_ENV_IDS", "EnvScalerRollEnv", "format_env_introduction", "make_roll_env", "register_roll"]

#: The GEM env ids EnvScaler's ROLL configs name, and the scenario mode each plays.
ROLL_ENV_IDS = {"envscaler_non_conv_env": "task", "envscaler_conv_env": "conversation"}


def format_env_introduction(introduction: str, rules: Sequence[str]) -> str:
    """The system-prompt block of the original envs (same headings, same two-space line breaks)."""
    rule_lines = "".join(f"- {rule}\n" for rule in rules)
    return f"# Environment Information\n\n## Brief Introduction:  \n{introduction}\n\n## Environment Rules / Constraints:  \n{rule_lines}"


class EnvScalerRollEnv:
    """One bridge session playing the scenarios ``scenario_ids`` (default: all the bridge lists;
    with ``mode="task"|"conversation"`` only those of that mode), in that order for ``task_index``.
    ``reset``'s ``seed`` is the bridge's episode seed too: 0 <= seed < 2^32 (else ValueError)."""

    def __init__(
        self,
        endpoint: str | None = None,
        scenario_ids: Sequence[str] | None = None,
        client: BridgeClient | None = None,
        curve: CurveKeys | None = None,
        timeout: float = 60.0,
        mode: str | None = None,
    ) -> None:
        check_mode(mode)
        self.client, self._owns_client = open_client("EnvScalerRollEnv", endpoint, client, curve, timeout)
        client = self.client
        listed = {s["scenario_id"]: s for s in client.list_scenarios()}
        ids = list(scenario_ids) if scenario_ids is not None else list(listed)
        missing = [s for s in ids if s not in listed]
        if missing:
            raise ValueError(f"the bridge does not serve scenarios {missing}")
        if mode is not None:
            ids = [s for s in ids if listed[s].get("mode") == mode]
        #: the task list task_index indexes, like the original envs' task_items
        self.task_items: list[dict[str, Any]] = [listed[s] for s in ids]
        self.envs: dict[str, dict[str, Any]] = {e["env_id"]: e for e in client.list_envs()}
        self.episode = Episode()
        self.task_item: dict[str, Any] | None = None
        self.env_name: str | None = None
        self.env_introduction: str | None = None
        self.tools: list[Any] = []
        self.current_step = 0

    # the bridge's session of the current episode (kept by the shared state machine)
    session_id = property(lambda self: self.episode.session_id)

    def reset(self, seed: int | None = None, task_index: int | None = None) -> tuple[dict[str, str], dict[str, Any]]:
        self.episode.check_open()
        bridge_seed = None if seed is None else check_seed(seed)
        if task_index is None:
            if not self.task_items:
                raise ValueError("no tasks available")
            task_index = random.Random(seed).randrange(len(self.task_items))
        elif not 0 <= task_index < len(self.task_items):
            raise ValueError(f"Invalid task_index {task_index}, expected range [0, {len(self.task_items)})")
        item = self.task_items[task_index]
        # the previous episode's task, tools and introduction go with it: nothing of it stays if this reset fails
        self.task_item, self.env_name, self.env_introduction, self.tools, self.current_step = None, None, None, [], 0
        # a live episode is ended by this reset and scored after the reply where the bridge can
        # (info["bridge_info"]["previous_episode"] fetches the score when read)
        finish_previous = finish_mode(self.client, self.episode.live and self.episode.session_id is not None)
        result = self.episode.reset(lambda sid: self.client.reset(item["scenario_id"], seed=bridge_seed, session_id=sid, finish_previous=finish_previous))
        content, info_b = self.episode.begin(result, item["scenario_id"])
        lazy_previous(info_b, self.client.episode_result)
        info_b.pop("observation")  # the bridge's info as it sent it
        env = self.envs.get(info_b.get("env_id", item["env_id"]), {})
        self.task_item = item
        self.current_step = 0
        self.env_name = env.get("name", item["env_id"])
        self.env_introduction = format_env_introduction(info_b.get("introduction", env.get("introduction", "")), info_b.get("rules", env.get("rules", [])))
        self.tools = list(info_b.get("tools", env.get("tools", [])))
        observation = {"type": "user", "content": content}
        info = {
            "env_name": self.env_name,
            "env_introduction": self.env_introduction,
            "tools": self.tools,
            "task": {
                "task_id": item["scenario_id"],
                "scenario_id": item["scenario_id"],
                "env_id": item["env_id"],
                "mode": item.get("mode"),
                "task": item.get("task", ""),
            },
            "task_index": task_index,
            "bridge_info": info_b,
        }
        return observation, info

    def step(self, action: str | dict[str, Any]) -> tuple[dict[str, str], float, bool, bool, dict[str, Any]]:
        """``action``: the model's raw text, or a parsed ``{"name", "arguments"}`` call.

        ``chat_with_user`` (the original envs' way to talk to the user) becomes a text reply.
        """
        session = self.episode.session()
        wire: Any = action
        if isinstance(action, dict) and action.get("name") == "chat_with_user":
            args = action.get("arguments") or {}
            wire = str(args.get("content", "")) if isinstance(args, dict) else str(args)
        content, reward, terminated, truncated, info_b = self.episode.ended(step_tuple(self.client.step(session, wire)))
        self.current_step += 1
        role = info_b.pop("observation").get("role")
        observation = {"type": "tool" if role == "tool" else "user", "content": content}
        return observation, reward, terminated, truncated, {"action": action, **info_b}

    def state(self) -> dict[str, Any]:
        """The env's current state (the bridge's ``state_json``, parsed); ResetNeeded without an episode."""
        return self.client.state(self.episode.session())

    def close(self) -> None:
        if self.episode.closed:
            return
        close_session_quietly(self.client, self.episode.close())
        if self._owns_client:
            self.client.close()


def make_roll_env(
    endpoint: str | None = None,
    scenario_ids: Sequence[str] | None = None,
    mode: str | None = None,
    timeout: float = 60.0,
    curve: CurveKeys | None = None,
    **config: Any,
) -> EnvScalerRollEnv:
    """The entry point ``register_roll`` registers: an :class:`EnvScalerRollEnv` on ``endpoint``
    playing ``scenario_ids``, or every scenario of ``mode`` (``task``/``conversation``) the bridge
    serves. ROLL's env manager passes its yaml's env config as keywords
    (``gem.make(env_id, **config)``); keys this adapter has no use for (the original envs' data paths
    and the like) are ignored, since the bridge holds the envs and scenarios."""
    if endpoint is None:
        raise ValueError("the ROLL env needs the bridge's endpoint (register_roll(endpoint=...) or the env config's 'endpoint')")
    if scenario_ids is None and mode is not None:
        with BridgeClient(endpoint, timeout=timeout, curve=curve) as c:
            scenario_ids = [s["scenario_id"] for s in c.list_scenarios() if s.get("mode", "task") == mode]
    return EnvScalerRollEnv(endpoint, scenario_ids=scenario_ids, curve=curve, timeout=timeout)


def register_roll(endpoint: str | None = None, **kwargs: Any) -> list[str]:
    """Registers the env ids of EnvScaler's ROLL configs with GEM (``gem.register``), over the
    bridge at ``endpoint``: ``envscaler_non_conv_env`` plays the task scenarios,
    ``envscaler_conv_env`` the conversation ones. ``kwargs`` (``scenario_ids``, ``timeout``,
    ``curve``) go to every env; the env manager's own config may override them. Returns the ids."""
    import gem

    for env_id, mode in ROLL_ENV_IDS.items():
        gem.register(env_id, entry_point=make_roll_env, endpoint=endpoint, mode=mode, **kwargs)
    return list(ROLL_ENV_IDS)
