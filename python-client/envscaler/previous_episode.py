"""``info["previous_episode"]`` of a reset that ended a running episode without waiting for its score.

With the bridge's ``reset_finish_previous_later`` feature, ``EnvScalerEnv.reset`` of a live episode
asks the bridge to end the running episode now and score it after replying (on a scorer thread of
the replica, or when it is idle), so the reset does not wait for the checks. What the reply says at
once (``episode_id``, ``finished``, ``step``, ``state_hash``) is read without a request; the first
read of anything else (``reward``, ``reward_info``, ``end_reason``, …, or iterating it) asks the
bridge for the score once (``episode_result``) and keeps it. So code that reads the previous
episode's reward gets it as before, and code that never reads it costs nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

#: the keys a pending reply already carries
KNOWN_AT_ONCE = frozenset({"episode_id", "finished", "step", "state_hash"})


class PreviousEpisode(Mapping[str, Any]):
    """A read-only mapping with the keys ``finish_previous=True`` gives, scored on first need."""

    def __init__(self, reply: Mapping[str, Any], fetch: Callable[[str], Mapping[str, Any]]) -> None:
        self._data = {k: v for k, v in reply.items() if k != "pending"}
        self._fetch: Callable[[str], Mapping[str, Any]] | None = fetch if reply.get("pending") else None

    @property
    def pending(self) -> bool:
        """True until the score has been fetched."""
        return self._fetch is not None

    def _full(self) -> dict[str, Any]:
        if self._fetch is not None:
            fetch, self._fetch = self._fetch, None
            try:
                self._data = dict(fetch(str(self._data["episode_id"])))
            except BaseException:
                self._fetch = fetch  # asked again next time
                raise
        return self._data

    def __getitem__(self, key: str) -> Any:
        if key in KNOWN_AT_ONCE and key in self._data:
            return self._data[key]
        return self._full()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._full())

    def __len__(self) -> int:
        return len(self._full())

    def __repr__(self) -> str:
        state = "pending" if self.pending else "scored"
        return f"PreviousEpisode({state}: {self._data!r})"
