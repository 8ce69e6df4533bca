"""Gymnasium spaces for free text.

``gymnasium.spaces.Text`` only holds strings over a fixed character set (alphanumerics by default)
and a bounded length, but observations here are arbitrary env output (JSON, unicode, newlines)
and actions are arbitrary model output. These spaces contain any ``str``; sampling produces short
printable strings so ``env.action_space.sample()`` is a legal (raw text) action.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from gymnasium.spaces import Space

__all__ = ["AgentAction", "AnyText", "TextBatch"]

# What sample() draws from: ASCII without '<' (so a sample never opens a <tool_call> block) plus
# some non-ASCII, so code that assumes ASCII fails early.
_ALPHABET = tuple(chr(c) for c in range(0x20, 0x7F) if chr(c) != "<") + tuple("äéßøλπжש中文✓€\n")


class AnyText(Space[str]):
    """Any Python string. ``sample()`` gives a printable string of ``min_length..max_length`` chars."""

    def __init__(self, max_length: int = 64, min_length: int = 1, seed: int | np.random.Generator | None = None) -> None:
        if not 0 <= min_length <= max_length:
            raise ValueError("need 0 <= min_length <= max_length")
        self.min_length = int(min_length)
        self.max_length = int(max_length)
        super().__init__(shape=None, dtype=None, seed=seed)

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        n = int(self.np_random.integers(self.min_length, self.max_length + 1))
        idx = self.np_random.integers(0, len(_ALPHABET), size=n)
        return "".join(_ALPHABET[i] for i in idx)

    def contains(self, x: Any) -> bool:
        return isinstance(x, str)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, type(self)) or type(other) is not type(self):  # a subclass is another space
            return False
        return (other.min_length, other.max_length) == (self.min_length, self.max_length)

    def __hash__(self) -> int:
        return hash((type(self).__name__, self.min_length, self.max_length))

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class AgentAction(AnyText):
    """An action as the bridge accepts it (§4 ``step``): raw assistant text (what ``sample()`` gives),
    a ``{"name", "arguments"}`` call, an OpenAI tool call or assistant message, or a list of calls."""

    def contains(self, x: Any) -> bool:
        if isinstance(x, str):
            return True
        if isinstance(x, Mapping):
            return "name" in x or "function" in x or "tool_calls" in x or "content" in x
        if isinstance(x, Sequence):
            return len(x) > 0 and all(isinstance(c, Mapping) and self.contains(c) for c in x)
        return False


class TextBatch(Space[np.ndarray]):
    """A batch of ``n`` elements of ``single`` (AnyText or AgentAction), as a 1-D numpy object array."""

    def __init__(self, single: AnyText, n: int, seed: int | np.random.Generator | None = None) -> None:
        self.single = single
        self.n = int(n)
        super().__init__(shape=(self.n,), dtype=np.dtype(object), seed=seed)

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def seed(self, seed: int | None = None) -> Any:
        seeds = super().seed(seed)
        # the element space samples from its own generator: derive it, so batches are reproducible
        self.single.seed(int(self.np_random.integers(0, 2**31 - 1)))
        return seeds

    def sample(self, mask: Any = None, probability: Any = None) -> np.ndarray:
        out = np.empty(self.n, dtype=object)
        for i in range(self.n):
            out[i] = self.single.sample()
        return out

    def contains(self, x: Any) -> bool:
        if isinstance(x, np.ndarray):
            return x.shape == (self.n,) and all(self.single.contains(v) for v in x)
        if isinstance(x, (list, tuple)):
            return len(x) == self.n and all(self.single.contains(v) for v in x)
        return False

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TextBatch) and other.n == self.n and other.single == self.single

    def __hash__(self) -> int:
        return hash(("TextBatch", self.n, self.single))

    def __repr__(self) -> str:
        return f"TextBatch({self.single!r}, {self.n})"


# ---------------------------------------------------------------------------------------------
# Shared memory for text observations, so ``gymnasium.vector.AsyncVectorEnv`` (and
# ``gymnasium.make_vec(..., vectorization_mode="async")``) works with its default
# ``shared_memory=True``. Each sub-env gets a fixed slot of bytes: a 4-byte length, then UTF-8.

#: Bytes per sub-env slot (observation text as UTF-8 plus 4); ENVSCALER_SHARED_TEXT_BYTES overrides it.
SHARED_TEXT_BYTES = 1 << 20


def _slot_bytes() -> int:
    import os

    raw = os.environ.get("ENVSCALER_SHARED_TEXT_BYTES")
    return int(raw) if raw else SHARED_TEXT_BYTES


def _slot_of(buffer: Any) -> tuple[memoryview, int]:
    view = memoryview(buffer.get_obj()).cast("B")
    return view, int.from_bytes(view[:4], "little")


class SharedTextArray:
    """The live view of ``n`` text slots in shared memory: reading decodes the current texts.

    AsyncVectorEnv reads the shared buffer once and then returns ``deepcopy(observations)`` on each
    step (``copy=True``, its default): the deep copy is a fresh numpy object array of the texts.
    With ``copy=False`` it returns this view itself, which indexes and iterates like that array.
    The buffer starts with the slot size (4 bytes), so writers in other processes need no setting.
    """

    def __init__(self, buffer: Any, n: int) -> None:
        self._buffer, self._n = buffer, n

    def _get(self, i: int) -> str:
        view, slot = _slot_of(self._buffer)
        base = 4 + i * slot
        size = int.from_bytes(view[base : base + 4], "little")
        return bytes(view[base + 4 : base + 4 + size]).decode("utf-8")

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, i: Any) -> Any:
        return np.asarray(self)[i]

    def __iter__(self) -> Any:
        return iter(np.asarray(self))

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        out = np.empty(self._n, dtype=object)
        for i in range(self._n):
            out[i] = self._get(i)
        return out

    def __deepcopy__(self, memo: dict[int, Any]) -> np.ndarray:
        return np.asarray(self)

    def __repr__(self) -> str:
        return f"SharedTextArray({list(np.asarray(self))!r})"


def _register_shared_memory() -> None:
    from gymnasium.vector.utils import shared_memory as shm

    @shm.create_shared_memory.register(AnyText)
    def _create(space: AnyText, n: int = 1, ctx: Any = None) -> Any:
        import multiprocessing

        slot = _slot_bytes()
        buffer = (ctx or multiprocessing).Array("B", 4 + n * slot)
        memoryview(buffer.get_obj()).cast("B")[:4] = slot.to_bytes(4, "little")
        return buffer

    @shm.read_from_shared_memory.register(AnyText)
    def _read(space: AnyText, shared_memory: Any, n: int = 1) -> SharedTextArray:
        return SharedTextArray(shared_memory, n)

    @shm.write_to_shared_memory.register(AnyText)
    def _write(space: AnyText, index: int, value: Any, shared_memory: Any) -> None:
        data = str(value).encode("utf-8")
        view, slot = _slot_of(shared_memory)
        if len(data) + 4 > slot:
            raise ValueError(
                f"an observation of {len(data)} bytes does not fit the shared-memory slot of {slot - 4} bytes; "
                "raise ENVSCALER_SHARED_TEXT_BYTES (in the process that creates the vector env) or pass shared_memory=False"
            )
        base = 4 + index * slot
        view[base : base + 4] = len(data).to_bytes(4, "little")
        view[base + 4 : base + 4 + len(data)] = data


_register_shared_memory()
