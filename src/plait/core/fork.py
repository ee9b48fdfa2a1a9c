"""Fork as a core transition (docs/architecture.md §5.6): a new run from an old run's state.

A fork starts from any checkpoint of a base run, under a new run id, and goes on from
there: a finished run's finish is undone (re-running it is the fork's own decision), and
an exhausted budget axis is forgotten (the fork's manifest may carry raised budgets).
Nothing else changes, so the fork's first checkpoint is its seed with these three edits.
"""

from __future__ import annotations

from dataclasses import replace

from plait.core.state import IDLE, Finished, SchedulerState


def fork_state(state: SchedulerState, new_run_id: str) -> SchedulerState:
    """The seed state of fork ``new_run_id`` from ``state``; ``state`` itself is unchanged
    (its containers are shared: the fork's driver takes ownership of them). The fork's
    seed is written as its first checkpoint, not produced by a ``step``: this is the one
    place its state changes."""
    forked = replace(state, run_id=new_run_id)
    if isinstance(forked.phase, Finished):
        forked.phase = IDLE
    forked.exhausted = None
    return forked
