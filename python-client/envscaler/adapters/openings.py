"""The openings of a set of (scenario, seed) pairs: what every trainer adapter's dataset builder reads.

A dataset row for a trainer carries the agent's opening (system prompt and task, the tools), and
the only exact source of it is the bridge: the task, a simulated user's first message and the tool
list can depend on the seed. So each builder resets every (scenario, seed) once and reads the
reset. :func:`openings` is that loop, written once: one session, reset again for each pair (one
request each: the bridge ends the session's previous episode unscored in the same ``reset``), and
closed when the loop ends, however it ends.
"""

from __future__ import annotations

from collections.abc import Generator, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ..bridge_client import BridgeClient, CurveKeys
from ..launch import watch_of
from ..transcript import AgentMode
from .bridge_episode import BridgeEpisode, EndpointPool, endpoints_of, match_scenarios, prompt_messages

__all__ = ["Opening", "openings"]


@dataclass(frozen=True)
class Opening:
    """One (scenario, seed)'s opening, as its reset gave it."""

    #: the scenario's ``list_scenarios`` entry (``scenario_id``, ``env_id``, ``mode``, ``task``, ...)
    scenario: dict[str, Any]
    seed: int
    #: the reset's observation: the task, or a simulated user's first message
    observation: str
    #: the reset's info: ``tools``, ``rules``, ``env_introduction``, ``max_steps``, ...
    info: dict[str, Any]
    #: the agent's opening messages (:func:`~envscaler.adapters.bridge_episode.prompt_messages`)
    messages: list[dict[str, str]]

    @property
    def scenario_id(self) -> str:
        return str(self.scenario["scenario_id"])

    @property
    def env_id(self) -> str:
        return str(self.scenario["env_id"])

    @property
    def tools(self) -> list[dict[str, Any]]:
        """The env's tools (OpenAI function schemas) as this reset lists them."""
        return list(self.info.get("tools") or [])


def openings(
    bridge: Any,
    scenarios: str | Sequence[str] = (),
    seeds: Iterable[int] = (0,),
    mode: AgentMode = "fc",
    *,
    listed: Sequence[dict[str, Any]] | None = None,
    include_conversation: bool = False,
    what: str | None = None,
    timeout: float = 60.0,
    curve: CurveKeys | None = None,
) -> Generator[Opening, None, None]:
    """The :class:`Opening` of every (scenario, seed), scenario-major, in ``match_scenarios`` order
    and ``seeds`` order (``seeds`` is read once, so a generator gives every scenario the same seeds).

    ``bridge``: a Bridge, an endpoint or a list of them (a client of its own on the first endpoint,
    with ``timeout`` and ``curve``, closed at the end), or an :class:`EndpointPool` (an episode of
    the pool, on its next replica; the pool's clients stay open). ``scenarios``: patterns for
    ``match_scenarios`` over ``listed`` (default: the bridge's ``list_scenarios``); ``what`` names
    the scenarios in its error. ``mode``: the opening messages' mode (``fc`` or ``prompt``).

    ``include_conversation``: whether conversation scenarios are in (default: task scenarios only).
    A conversation scenario needs a bridge with a simulated user (``serve --user-model``); on one
    without, its episode ends at the agent's first text reply (``no_user``) and is still scored, so
    a dataset must not pick them up unasked. A pattern naming only conversation scenarios is then
    an error that says so.

    Nothing is sent until the first ``next()``. The session (and a client of its own) is closed when
    the iteration ends, raises, or is closed early: use ``contextlib.closing(openings(...))`` when
    the loop may stop before the end, so that happens at once rather than at garbage collection.
    Errors are the bridge's (``UnknownScenario``, ``EnvFault`` at a reset, ...) and
    ``match_scenarios``' ``ValueError`` for a pattern that matches nothing."""
    seed_list = [int(s) for s in seeds]
    own: BridgeClient | None = None
    episode: BridgeEpisode | None = None
    try:
        if isinstance(bridge, EndpointPool):
            client = bridge.client(0)
        else:
            endpoints, found = endpoints_of(bridge)
            client = own = BridgeClient(endpoints[0], timeout=timeout, curve=curve if curve is not None else found, gone=watch_of(bridge))
        pool = client.list_scenarios() if listed is None else list(listed)
        if include_conversation:
            chosen = match_scenarios(pool, scenarios, what or "scenario on the bridge")
        else:
            tasks = [s for s in pool if s.get("mode") != "conversation"]
            convs = [s for s in pool if s.get("mode") == "conversation"]
            why = "conversation scenarios need a bridge with a simulated user (serve --user-model); pass include_conversation=True to include them"
            chosen = match_scenarios(tasks, scenarios, what or "task scenario on the bridge", left_out=convs, left_out_why=why)
        episode = bridge.episode() if isinstance(bridge, EndpointPool) else BridgeEpisode(client, 0)
        for s in chosen:
            for seed in seed_list:
                obs, info = episode.reset(s["scenario_id"], seed)
                yield Opening(s, seed, obs, info, prompt_messages(info, obs, mode))
    finally:
        if episode is not None:
            episode.close()
        if own is not None:
            own.close()
