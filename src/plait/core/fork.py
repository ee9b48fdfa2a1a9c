"""Fork as a core transition (docs/architecture.md §5.6): a new run from an old run's state.

A fork starts from any checkpoint of a base run, under a new run id, and goes on from
there: a finished run's finish is undone (re-running it is the fork's own decision), and
an exhausted budget axis is forgotten (the fork's manifest may carry raised budgets).
A fork may also *edit* its context (``plait fork --set KEY=JSON``, LangGraph's
``update_state``): each edited top-level key gets the given value, replaced whole, with no
reducer applied. Nothing else changes, so the fork's first checkpoint is its seed with
these edits — and ``verify`` rebuilds it from the base's checkpoint through this function.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from plait.core.canonical import CanonicalJSONError, dumps, loads
from plait.core.errors import PlaitError
from plait.core.send import SEND_KEY
from plait.core.state import IDLE, Finished, SchedulerState
from plait.core.step import INBOX_KEY

RESERVED_KEYS = (INBOX_KEY, SEND_KEY)
"""Context keys an edit may not set: ``$inbox`` holds the steering messages the journal
delivered (an edit would forge one), ``$send`` is a result's spawn request, never context."""


def edit_problem(key: object, value: object) -> str | None:
    """Why ``key`` cannot be set to ``value`` in a fork's context, else None: the key must
    be a non-blank string and not reserved, the value JSON (canonical: no NaN)."""
    if not isinstance(key, str) or not key.strip():
        return "the key must be a non-blank string"
    if key in RESERVED_KEYS:
        return f"the key is reserved ({', '.join(RESERVED_KEYS)})"
    try:
        dumps(value)
    except (CanonicalJSONError, TypeError, ValueError) as exc:
        return f"the value is not JSON: {exc}"
    return None


def checked_edits(edits: Mapping[str, Any]) -> dict[str, Any]:
    """``edits`` as the fork applies and journals them: keys sorted, each value a copy
    through canonical JSON (the caller's objects are never shared with the state). Any
    ``edit_problem`` is PLAIT-E019 naming the key; nothing is applied then."""
    out: dict[str, Any] = {}
    for key in sorted(edits, key=str):
        problem = edit_problem(key, edits[key])
        if problem is not None:
            raise PlaitError("E019", f"fork edit {key!r}: {problem}")
        out[key] = loads(dumps(edits[key]))
    return out


def fork_state(
    state: SchedulerState, new_run_id: str, edits: Mapping[str, Any] | None = None
) -> SchedulerState:
    """The seed state of fork ``new_run_id`` from ``state``; ``state`` itself is unchanged
    (its containers are shared: the fork's driver takes ownership of them, and an edited
    context is a new dict). ``edits`` replace context keys (``checked_edits``). The fork's
    seed is written as its first checkpoint, not produced by a ``step``: this is the one
    place its state changes."""
    forked = replace(state, run_id=new_run_id)
    if isinstance(forked.phase, Finished):
        forked.phase = IDLE
    forked.exhausted = None
    if edits:
        forked.context = {**state.context, **checked_edits(edits)}
    return forked
