"""``info["previous_episode"]`` of a reset that ended a running episode without waiting for its score.

With the bridge's ``reset_finish_previous_later`` feature, ``EnvScalerEnv.reset`` and
``AsyncEnvScalerEnv.reset`` of a live episode ask the bridge to end the running episode now and
score it after replying (on a scorer thread of the replica, or when it is idle), so the reset does
not wait for the checks. What the reply says at once (``episode_id``, ``finished``, ``step``,
``state_hash``) is read without a request; the score (``reward``, ``reward_info``, ``end_reason``,
…) takes one ``episode_result`` request, asked once and kept. Code that never reads it costs nothing.

- :class:`PreviousEpisode` (``EnvScalerEnv``): the first read of a score key (or iterating it)
  fetches it, blocking, so code that reads the previous episode's reward works as before.
- :class:`AsyncPreviousEpisode` (``AsyncEnvScalerEnv``): a plain read cannot fetch, since the
  async client's replies arrive on the event loop the reading code runs on, and blocking it would
  stall every other episode on that loop. ``await prev.fetch()`` fetches the score (once; it
  returns the mapping); after it every key reads as from a plain dict. A read of a score key before
  that raises :class:`ScoreNotFetched`, saying to await ``fetch()``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import Any

__all__ = ["KNOWN_AT_ONCE", "AsyncPreviousEpisode", "PreviousEpisode", "ScoreNotFetched", "finish_mode", "lazy_previous", "scored"]

#: the keys a pending reply already carries
KNOWN_AT_ONCE = frozenset({"episode_id", "finished", "step", "state_hash"})


class ScoreNotFetched(RuntimeError):
    """A score key of an :class:`AsyncPreviousEpisode` was read before ``await prev.fetch()``."""


def scored(result: Mapping[str, Any]) -> dict[str, Any]:
    """A previous episode's result as a dict, its reward a float as a step's is (it may arrive as an int, §2)."""
    out = dict(result)
    if isinstance(out.get("reward"), int) and not isinstance(out["reward"], bool):
        out["reward"] = float(out["reward"])
    return out


class _Previous(Mapping[str, Any]):
    """What both kinds share: the reply's keys at once, the rest once scored."""

    def __init__(self, reply: Mapping[str, Any]) -> None:
        self._data = {k: v for k, v in scored(reply).items() if k != "pending"}
        self._scored = not reply.get("pending")

    @property
    def pending(self) -> bool:
        """True until the score has been fetched."""
        return not self._scored

    def _full(self) -> dict[str, Any]:
        raise NotImplementedError

    def __getitem__(self, key: str) -> Any:
        if key in KNOWN_AT_ONCE and key in self._data:
            return self._data[key]
        return self._full()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._full())

    def __len__(self) -> int:
        return len(self._full())

    def __copy__(self) -> _Previous:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> _Previous:
        # read-only, and its fetch holds the env's client (a socket and a lock, which cannot be
        # copied): a copy of an info (a fork's or a snapshot's transcript) shares it
        return self

    def __repr__(self) -> str:
        state = "pending" if self.pending else "scored"
        return f"{type(self).__name__}({state}: {self._data!r})"


class PreviousEpisode(_Previous):
    """A read-only mapping with the keys ``finish_previous=True`` gives, scored on first need."""

    def __init__(self, reply: Mapping[str, Any], fetch: Callable[[str], Mapping[str, Any]]) -> None:
        super().__init__(reply)
        self._fetch = fetch

    def _full(self) -> dict[str, Any]:
        if not self._scored:
            self._data = scored(self._fetch(str(self._data["episode_id"])))  # an error: asked again next time
            self._scored = True
        return self._data


class AsyncPreviousEpisode(_Previous):
    """:class:`PreviousEpisode` for asyncio: ``await prev.fetch()`` gets the score (one
    ``episode_result`` request, shared by concurrent callers; none once scored), then it reads
    like a dict. Reading ``reward`` (or any key beyond ``episode_id``, ``finished``, ``step``,
    ``state_hash``), iterating it or ``len()`` before that raises :class:`ScoreNotFetched`."""

    def __init__(self, reply: Mapping[str, Any], fetch: Callable[[str], Awaitable[Mapping[str, Any]]]) -> None:
        super().__init__(reply)
        self._fetch = fetch
        self._inflight: asyncio.Future[dict[str, Any]] | None = None

    async def fetch(self) -> AsyncPreviousEpisode:
        """Fetches the score once (waiting for the bridge to finish scoring); returns ``self``.
        A failed fetch raises its error and is tried again at the next call."""
        if self._scored:
            return self
        inflight = self._inflight
        if inflight is None:
            inflight = self._inflight = asyncio.ensure_future(self._get())
        try:
            data = await asyncio.shield(inflight)
        finally:
            if inflight.done() and self._inflight is inflight:
                self._inflight = None  # settled: a failure is asked again at the next call
        if not self._scored:
            self._data, self._scored = data, True
        return self

    async def _get(self) -> dict[str, Any]:
        return scored(await self._fetch(str(self._data["episode_id"])))

    def _full(self) -> dict[str, Any]:
        if not self._scored:
            raise ScoreNotFetched(
                f"the score of episode {self._data.get('episode_id')} is not fetched yet: await info['previous_episode'].fetch() first "
                "(the bridge scores it after the reset replied; a read from inside the event loop cannot wait for it)"
            )
        return self._data


def finish_mode(client: Any, live: bool) -> bool | str:
    """How a reset of a session ends its running episode (``finish_previous``): ``"later"`` where
    the bridge scores after replying, ``True`` where it can only score in the reset, ``False`` (closed
    unscored) when nothing runs or the bridge has neither feature. One rule for every env class."""
    if not live:
        return False
    if client.supports("reset_finish_previous_later"):
        return "later"
    return bool(client.supports("reset_finish_previous"))


def lazy_previous(info: dict[str, Any], fetch: Callable[[str], Mapping[str, Any]]) -> None:
    """Makes a pending ``info["previous_episode"]`` a :class:`PreviousEpisode` that fetches its score
    when read; one scored in the reset gets its reward as a float."""
    previous = info.get("previous_episode")
    if isinstance(previous, Mapping) and previous.get("pending"):
        info["previous_episode"] = PreviousEpisode(previous, fetch)
    elif isinstance(previous, Mapping):
        info["previous_episode"] = scored(previous)
