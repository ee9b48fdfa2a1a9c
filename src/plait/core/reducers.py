"""Context reducers (docs/architecture.md §3.7): how a write to a context key meets the value there.

A workflow declares a reducer per context key; keys without one use ``lww``. A reducer is
called as ``reduce(key, old, new)`` where ``old`` is ``MISSING`` when the key is absent.

Every reducer is batching-invariant: pre-reducing a batch of writes (starting from
``MISSING``) and applying the result once equals applying the writes one by one. That is
exact for all reducers except ``sum`` over floats, where IEEE addition is a left fold in
write order (exact whenever the partial sums are representable).

Reducers must never mutate their inputs (callers keep references to old values), never
coerce types (``true`` is not a number) and never read anything but their arguments.
A type mismatch is a ReducerError, which the runtime reports as a node failure.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Mapping
from typing import Final, Literal, TypeAlias

from plait.core.canonical import JSON

__all__ = [
    "MISSING",
    "REDUCERS",
    "Missing",
    "Reducer",
    "ReducerError",
    "make_reducer",
    "reduce_value",
]


class _MissingType(enum.Enum):
    MISSING = "MISSING"

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Final = _MissingType.MISSING
"""The ``old`` value of a key the context does not hold yet (distinct from a present null)."""

Missing: TypeAlias = Literal[_MissingType.MISSING]

Reducer: TypeAlias = Callable[[str, JSON | Missing, JSON], JSON]
"""``reduce(key, old, new) -> merged``, as returned by make_reducer."""

REDUCERS: tuple[str, ...] = ("lww", "append", "extend", "sum", "max", "min", "merge")


class ReducerError(ValueError):
    """A value a reducer cannot combine; the message names the reducer and the key."""

    def __init__(self, reducer: str, key: str, problem: str) -> None:
        super().__init__(f"reducer '{reducer}' on key '{key}': {problem}")
        self.reducer = reducer
        self.key = key


def _kind(value: JSON) -> str:
    """A JSON-flavoured type name for messages."""
    if value is None:
        return "null"
    names = {bool: "boolean", int: "integer", float: "float", str: "string", list: "list"}
    return names.get(type(value)) or ("object" if isinstance(value, dict) else type(value).__name__)


def _list_old(reducer: str, key: str, old: JSON | Missing) -> list[JSON]:
    if old is MISSING:
        return []
    if not isinstance(old, list):
        raise ReducerError(reducer, key, f"the existing value must be a list, got {_kind(old)}")
    return old


def _number(reducer: str, key: str, value: JSON, which: str) -> int | float:
    """``value`` if it is a finite int or float (never a bool), else a ReducerError."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ReducerError(reducer, key, f"expected {which}a number, got {_kind(value)}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ReducerError(reducer, key, f"expected {which}a finite number, got {value}")
    return value


def _lww(key: str, old: JSON | Missing, new: JSON) -> JSON:
    return new


def _append(key: str, old: JSON | Missing, new: JSON) -> JSON:
    base = _list_old("append", key, old)
    return [*base, *new] if isinstance(new, list) else [*base, new]


def _extend(key: str, old: JSON | Missing, new: JSON) -> JSON:
    if not isinstance(new, list):
        raise ReducerError("extend", key, f"expected a list, got {_kind(new)}")
    return [*_list_old("extend", key, old), *new]


def _sum(key: str, old: JSON | Missing, new: JSON) -> JSON:
    value = _number("sum", key, new, "")
    if old is MISSING:
        return value
    total = _number("sum", key, old, "the existing value to be ") + value
    if isinstance(total, float) and not math.isfinite(total):
        raise ReducerError("sum", key, "the sum overflows to infinity")
    return total


def _max(key: str, old: JSON | Missing, new: JSON) -> JSON:
    """On a tie (``1`` vs ``1.0``) the existing value stays, which keeps max associative."""
    value = _number("max", key, new, "")
    if old is MISSING:
        return value
    current = _number("max", key, old, "the existing value to be ")
    return value if value > current else current


def _min(key: str, old: JSON | Missing, new: JSON) -> JSON:
    """On a tie the existing value stays, as for max."""
    value = _number("min", key, new, "")
    if old is MISSING:
        return value
    current = _number("min", key, old, "the existing value to be ")
    return value if value < current else current


def _merge(key: str, old: JSON | Missing, new: JSON) -> JSON:
    if not isinstance(new, dict):
        raise ReducerError("merge", key, f"expected an object, got {_kind(new)}")
    if old is MISSING:
        return dict(new)
    if not isinstance(old, dict):
        raise ReducerError("merge", key, f"the existing value must be an object, got {_kind(old)}")
    return {**old, **new}


_TABLE: Final[dict[str, Reducer]] = {
    "lww": _lww,
    "append": _append,
    "extend": _extend,
    "sum": _sum,
    "max": _max,
    "min": _min,
    "merge": _merge,
}


def _unknown(problems: list[str]) -> ValueError:
    return ValueError(f"{'; '.join(problems)} (known reducers: {', '.join(REDUCERS)})")


def reduce_value(reducer: str, key: str, old: JSON | Missing, new: JSON) -> JSON:
    """Combine ``new`` into ``old`` (``MISSING`` if the key is absent) with the named reducer.

    Raises ValueError for an unknown reducer name and ReducerError for a value of the
    wrong type. Returns a fresh list/dict where it combines; inputs are never mutated.
    """
    function = _TABLE.get(reducer) if isinstance(reducer, str) else None
    if function is None:
        raise _unknown([f"unknown reducer {reducer!r}"])
    return function(key, old, new)


def make_reducer(reducers: Mapping[str, str]) -> Reducer:
    """A per-key reducer for a workflow's declared table; undeclared keys use ``lww``.

    Every name is checked here, up-front, so a bad table is a load error and not a failure
    halfway through a run. Unknown names are reported in sorted key order, all at once.
    """
    unknown = [
        f"unknown reducer {name!r} for key {key!r}"
        for key, name in sorted(reducers.items())
        if not isinstance(name, str) or name not in _TABLE
    ]
    if unknown:
        raise _unknown(unknown)
    table = {key: _TABLE[name] for key, name in reducers.items()}

    def reduce(key: str, old: JSON | Missing, new: JSON) -> JSON:
        function = table.get(key)
        return new if function is None else function(key, old, new)  # undeclared: _lww's

    return reduce
