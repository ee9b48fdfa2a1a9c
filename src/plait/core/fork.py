"""Fork as a core transition (docs/architecture.md §5.6): a new run from an old run's state.

A fork starts from any checkpoint of a base run, under a new run id, and goes on from
there: a finished run's finish is undone (re-running it is the fork's own decision), and
an exhausted budget axis is forgotten (the fork's manifest may carry raised budgets).
Nothing else changes, so the fork's first checkpoint is its seed with these three edits.
"""

from __future__ import annotations

from dataclasses import replace

from plait.core.state import IDLE, Finished, SchedulerState


def fork_into(state: SchedulerState, run_id: str) -> None:
    """Make ``state`` the seed of fork ``run_id``, in place (the step's ``Forked``)."""
    state.run_id = run_id
    if isinstance(state.phase, Finished):
        state.phase = IDLE
    state.exhausted = None


def fork_state(state: SchedulerState, new_run_id: str) -> SchedulerState:
    """The seed state of fork ``new_run_id`` from ``state``; ``state`` itself is unchanged
    (its containers are shared: the fork's driver takes ownership of them)."""
    forked = replace(state)
    fork_into(forked, new_run_id)
    return forked
