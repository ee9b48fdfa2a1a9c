"""The parts a governance flow is made of: steps, their edges, and the constraints.

Plain values with no behaviour; ``flow.py`` assembles them into a ``Flow`` and every pass
over a flow (``validate``, ``mermaid``, ``writer``, ``monitor``) reads them from here, so
none of those passes needs ``flow.py`` at import time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, TypeAlias

from plait.governance.guards import Guard

__all__ = [
    "After",
    "Before",
    "Constraint",
    "Join",
    "Mode",
    "NeverUntil",
    "Once",
    "Require",
    "Reset",
    "Step",
    "edge",
    "with_commit",
]

Join: TypeAlias = Literal["all", "any"]
Mode: TypeAlias = Literal["enforce", "observe"]


@dataclass(frozen=True)
class After:
    """An edge into a step: satisfied when ``step`` is done and ``when`` (if any) holds."""

    step: str
    when: Guard | None = None


def edge(step: str, *, when: Guard | None = None) -> After:
    """An ``after`` edge, optionally guarded: ``after=[edge("triage", when=is_true("urgent"))]``."""
    return After(step, when)


@dataclass(frozen=True)
class Step:
    """One step of a flow. Active while not done and eligible; see ``monitor.py``."""

    id: str
    after: tuple[After, ...] = ()
    join: Join = "all"
    gate: Guard | None = None
    done: Guard | None = None
    allow: tuple[str, ...] | None = None
    deny: tuple[str, ...] = ()
    posture: str | None = None
    terminal: bool = False


@dataclass(frozen=True)
class Once:
    """``tool`` succeeds at most once (until a reset clears its count)."""

    tool: str


@dataclass(frozen=True)
class Before:
    """Step ``then`` is not eligible until step ``first`` is done."""

    first: str
    then: str


@dataclass(frozen=True)
class NeverUntil:
    """``tool`` is refused while ``until`` does not hold."""

    tool: str
    until: Guard


@dataclass(frozen=True)
class Require:
    """A final answer needs these steps done."""

    steps: tuple[str, ...]


@dataclass(frozen=True)
class Reset:
    """On ``when``'s rising edge, ``steps`` are no longer done and the ``once`` counts of
    the tools their ``done`` guards call are cleared."""

    steps: tuple[str, ...]
    when: Guard


Constraint: TypeAlias = Once | Before | NeverUntil | Require | Reset


def with_commit(
    constraints: tuple[Constraint, ...], tool: str, until: Guard
) -> tuple[Constraint, ...]:
    """``constraints`` plus what ``commit(tool, until)`` adds (``once`` and never-until),
    leaving out either one when an equal constraint is already there."""
    added = [c for c in (Once(tool), NeverUntil(tool, until)) if c not in constraints]
    return (*constraints, *added)
