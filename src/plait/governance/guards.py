"""Guards: the small predicate language a governance flow is written in (docs/architecture.md §9).

A guard reads the *flow state* (a JSON object: the context as the node started, updated
by successful tool results and answered asks) and the flow's *marking* (steps done,
successful calls per tool). Guards are values: frozen, comparable, serializable through
``plait.governance.document``. Every guard can say in prose what it waits for
(``describe``), which is what a refused model and a ``plait check`` reader see.

Semantics, fixed once here:
- a *key* is a top-level key of the flow state;
- ``is_true(k)`` holds only for the JSON value ``true`` (not for ``"yes"`` or ``1``);
- ``is_set(k)`` holds when ``k`` is present and not ``null``; ``captured`` is ``is_set``
  of every key;
- ``eq(k, v)`` compares strictly (``1 != 1.0``, ``true != 1``); a missing key equals
  nothing, not even ``null``;
- ``all_of()`` with no guards holds, ``any_of()`` with none does not.

This module never reads anything but the state and marking it is handed.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Set
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from plait.core.canonical import dumps, loads, strict_equal

__all__ = [
    "AllOf",
    "Always",
    "AnyOf",
    "CalledOk",
    "Captured",
    "Done",
    "Eq",
    "Guard",
    "IsSet",
    "IsTrue",
    "Not",
    "all_of",
    "always",
    "any_of",
    "atoms",
    "called_ok",
    "captured",
    "describe",
    "done",
    "eq",
    "holds",
    "is_set",
    "is_trivially_false",
    "is_trivially_true",
    "is_true",
    "keys_read",
    "needs_keys",
    "not_",
    "steps_named",
    "tools_named",
]


@dataclass(frozen=True)
class Always:
    """Holds always."""


@dataclass(frozen=True)
class IsTrue:
    """``key`` is the JSON value ``true``."""

    key: str


@dataclass(frozen=True)
class IsSet:
    """``key`` is present and not ``null``."""

    key: str


@dataclass(frozen=True)
class Eq:
    """``key`` equals ``value`` strictly. Compared and hashed by canonical JSON, so
    ``Eq("k", 1) != Eq("k", 1.0)``; ``value`` must be JSON (else CanonicalJSONError)."""

    key: str
    value: Any = field(compare=False)
    canonical: str = field(init=False, repr=False)

    def __post_init__(self) -> None:
        # A private copy: a caller changing its value later must not change the guard.
        object.__setattr__(self, "canonical", dumps(self.value))
        object.__setattr__(self, "value", loads(self.canonical))


@dataclass(frozen=True)
class Captured:
    """Every key in ``keys`` is set."""

    keys: tuple[str, ...]


@dataclass(frozen=True)
class CalledOk:
    """``tool`` has succeeded at least once (since its count was last cleared by a reset)."""

    tool: str


@dataclass(frozen=True)
class Done:
    """Step ``step`` is done."""

    step: str


@dataclass(frozen=True)
class AllOf:
    """Every guard holds (none: holds)."""

    guards: tuple[Guard, ...]


@dataclass(frozen=True)
class AnyOf:
    """At least one guard holds (none: does not hold)."""

    guards: tuple[Guard, ...]


@dataclass(frozen=True)
class Not:
    """``guard`` does not hold."""

    guard: Guard


Guard: TypeAlias = Always | IsTrue | IsSet | Eq | Captured | CalledOk | Done | AllOf | AnyOf | Not
"""Any guard."""


# --- constructors: what a flow author writes ---------------------------------------------


def always() -> Always:
    """A guard that always holds."""
    return Always()


def is_true(key: str) -> IsTrue:
    """``key`` is ``true`` in the flow state."""
    return IsTrue(key)


def is_set(key: str) -> IsSet:
    """``key`` is present (and not null) in the flow state."""
    return IsSet(key)


def eq(key: str, value: Any) -> Eq:
    """``key`` equals the JSON value ``value`` (strict: ``1`` is not ``1.0``)."""
    return Eq(key, value)


def captured(*keys: str) -> Captured:
    """Every key is set: the slots a step must fill."""
    return Captured(tuple(keys))


def called_ok(tool: str) -> CalledOk:
    """``tool`` has succeeded at least once."""
    return CalledOk(tool)


def done(step: str) -> Done:
    """Step ``step`` is done."""
    return Done(step)


def all_of(*guards: Guard) -> AllOf:
    """Every guard holds."""
    return AllOf(tuple(guards))


def any_of(*guards: Guard) -> AnyOf:
    """At least one guard holds."""
    return AnyOf(tuple(guards))


def not_(guard: Guard) -> Not:
    """``guard`` does not hold."""
    return Not(guard)


# --- evaluation ---------------------------------------------------------------------------


def _set(state: Mapping[str, Any], key: str) -> bool:
    return state.get(key) is not None


def holds(guard: Guard, state: Mapping[str, Any], done: Set[str], calls: Mapping[str, int]) -> bool:
    """Whether ``guard`` holds over the flow state and the marking (``done``, ``calls``)."""
    match guard:
        case Always():
            return True
        case IsTrue(key):
            return state.get(key) is True
        case IsSet(key):
            return _set(state, key)
        case Eq(key=key, value=value):
            return key in state and strict_equal(state[key], value)
        case Captured(keys):
            return all(_set(state, key) for key in keys)
        case CalledOk(tool):
            return calls.get(tool, 0) >= 1
        case Done(step):
            return step in done
        case AllOf(guards):
            return all(holds(g, state, done, calls) for g in guards)
        case AnyOf(guards):
            return any(holds(g, state, done, calls) for g in guards)
        case Not(inner):
            return not holds(inner, state, done, calls)


def is_trivially_true(guard: Guard) -> bool:
    """Holds whatever the state and marking are, judged from its shape alone."""
    match guard:
        case Always():
            return True
        case AllOf(guards):
            return all(is_trivially_true(g) for g in guards)
        case AnyOf(guards):
            return any(is_trivially_true(g) for g in guards)
        case Not(inner):
            return is_trivially_false(inner)
        case _:
            return False


def is_trivially_false(guard: Guard) -> bool:
    """Can never hold, judged from its shape alone."""
    match guard:
        case AllOf(guards):
            return any(is_trivially_false(g) for g in guards)
        case AnyOf(guards):
            return all(is_trivially_false(g) for g in guards)
        case Not(inner):
            return is_trivially_true(inner)
        case _:
            return False


# --- what a guard reads -------------------------------------------------------------------


def atoms(guard: Guard) -> Iterator[Guard]:
    """The atoms of ``guard`` (everything but all/any/not), depth first, in order."""
    match guard:
        case AllOf(guards) | AnyOf(guards):
            for g in guards:
                yield from atoms(g)
        case Not(inner):
            yield from atoms(inner)
        case _:
            yield guard


def keys_read(guard: Guard) -> list[str]:
    """The state keys ``guard`` reads, in order of appearance, without repeats."""
    keys: list[str] = []
    for atom in atoms(guard):
        match atom:
            case IsTrue(key) | IsSet(key) | Eq(key=key):
                found: tuple[str, ...] = (key,)
            case Captured(many):
                found = many
            case _:
                found = ()
        keys += [k for k in found if k not in keys]
    return keys


def steps_named(guard: Guard) -> list[str]:
    """The steps ``guard``'s ``done`` atoms name, in order, without repeats."""
    names: list[str] = []
    for atom in atoms(guard):
        if isinstance(atom, Done) and atom.step not in names:
            names.append(atom.step)
    return names


def tools_named(guard: Guard) -> list[str]:
    """The tools ``guard``'s ``called_ok`` atoms name, in order, without repeats."""
    names: list[str] = []
    for atom in atoms(guard):
        if isinstance(atom, CalledOk) and atom.tool not in names:
            names.append(atom.tool)
    return names


def needs_keys(guard: Guard, keys: Set[str]) -> bool:
    """Whether ``guard`` can never hold while every one of ``keys`` is absent from the
    state, whatever the rest of the state and the marking are (judged from its shape)."""
    match guard:
        case IsTrue(key) | IsSet(key) | Eq(key=key):
            return key in keys
        case Captured(many):
            return any(key in keys for key in many)
        case AllOf(guards):
            return any(needs_keys(g, keys) for g in guards)
        case AnyOf(guards):
            return all(needs_keys(g, keys) for g in guards)
        case Not(inner):
            return _holds_without(inner, keys)
        case _:
            return False


def _holds_without(guard: Guard, keys: Set[str]) -> bool:
    """Whether ``guard`` holds whenever every one of ``keys`` is absent (the dual)."""
    match guard:
        case Always():
            return True
        case AllOf(guards):
            return all(_holds_without(g, keys) for g in guards)
        case AnyOf(guards):
            return any(_holds_without(g, keys) for g in guards)
        case Not(inner):
            return needs_keys(inner, keys)
        case _:
            return False


# --- prose --------------------------------------------------------------------------------


def _listing(items: list[str]) -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def _keys(keys: tuple[str, ...]) -> str:
    return _listing([f"`{k}`" for k in keys])


def describe(guard: Guard) -> str:
    """What ``guard`` waits for, as a clause: "`confirmed` is true", "step `verify` is done"."""
    match guard:
        case Always():
            return "always"
        case IsTrue(key):
            return f"`{key}` is true"
        case IsSet(key):
            return f"`{key}` is set"
        case Eq(key=key, canonical=text):
            return f"`{key}` is {text}"
        case Captured(keys):
            if not keys:
                return "always"
            return f"{_keys(keys)} {'is' if len(keys) == 1 else 'are'} set"
        case CalledOk(tool):
            return f"`{tool}` has succeeded at least once"
        case Done(step):
            return f"step `{step}` is done"
        case AllOf(guards):
            return _join(guards, "and", "always")
        case AnyOf(guards):
            return _join(guards, "or", "never")
        case Not(inner):
            return _negate(inner)


def _join(guards: tuple[Guard, ...], word: str, empty: str) -> str:
    if not guards:
        return empty
    parts = [f"({describe(g)})" if _is_compound(g, len(guards)) else describe(g) for g in guards]
    return f" {word} ".join(parts)


def _is_compound(guard: Guard, siblings: int) -> bool:
    return siblings > 1 and isinstance(guard, AllOf | AnyOf) and len(guard.guards) > 1


def _negate(guard: Guard) -> str:
    match guard:
        case Always():
            return "never"
        case IsTrue(key):
            return f"`{key}` is not true"
        case IsSet(key):
            return f"`{key}` is not set"
        case Eq(key=key, canonical=text):
            return f"`{key}` is not {text}"
        case CalledOk(tool):
            return f"`{tool}` has not succeeded yet"
        case Done(step):
            return f"step `{step}` is not done"
        case Not(inner):
            return describe(inner)
        case _:
            return f"not ({describe(guard)})"
