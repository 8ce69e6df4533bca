"""A Python value as PyText.tagged writes it (envs/bfcl/py-text.js): the form both benchmark oracles
(bfcl_oracle.py, acebench_oracle.py) compare our ports' states against. Standard library only:
the oracles run as plain scripts beside this file."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def tagged(v: Any, other: Callable[[Any], Any] | None = None, fallback: str = "o:") -> Any:
    """`other` tags the values a benchmark adds (BFCL's sets and file-system nodes): it returns
    None for a value it does not know; anything else left is `fallback` + repr."""

    def again(x: Any) -> Any:
        return tagged(x, other, fallback)

    if v is None:
        return "N"
    if isinstance(v, bool):
        return "b:1" if v else "b:0"
    if isinstance(v, int):
        return f"i:{v}"
    if isinstance(v, float):
        return f"f:{v!r}"
    if isinstance(v, str):
        return "s:" + v
    if isinstance(v, list):
        return {"l": [again(x) for x in v]}
    if isinstance(v, tuple):
        return {"t": [again(x) for x in v]}
    if isinstance(v, dict):
        return {"d": [[again(k), again(x)] for k, x in v.items()]}
    if other is not None:
        t = other(v)
        if t is not None:
            return t
    return fallback + repr(v)
