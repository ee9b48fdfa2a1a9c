"""Wake times: when a worker should drive a parked run on (§8 timers, §11).

A parked run's wake time is the earliest of its timers, ask expiries and its children's
wake times; anything journaled for a run (an answer, a cancel, a message, a raise) makes
its top-level run due now.
"""

from __future__ import annotations

from plait.core.keys import child_run_id
from plait.core.state import SchedulerState
from plait.store.base import Store


def set_wake(store: Store, run_id: str, wake_ms: int | None, *, replace: bool = False) -> None:
    """Record the run's wake time (the earlier one wins unless ``replace``)."""
    if replace or wake_ms is not None:
        store.set_wake(run_id, wake_ms, replace=replace)


def wake_time(store: Store, state: SchedulerState) -> int | None:
    """The earliest of a parked run's timers, ask expiries and children's wake times."""
    times: list[int] = []
    for entry in state.pending_asks.values():
        if entry.wake_ms is not None:
            times.append(int(entry.wake_ms))
        if entry.expires_at is not None:
            times.append((int(entry.expires_at) + 1) * 1000)  # expired: now//1000 > it
        if entry.child is not None:
            child = store.wake_of(child_run_id(state.run_id, entry.key))
            if child is not None:
                times.append(int(child))
    return min(times, default=None)


def backoff_sleep_ms(state: SchedulerState, now_ms: int, limit_ms: int) -> int | None:
    """How long to sleep in-process before a parked run's retry wait is due: when that
    wait is what the run waits on first and is due within ``limit_ms``; else None (the
    run parks, and a worker drives it on at its wake time)."""
    earliest: tuple[int, bool] | None = None
    for entry in state.pending_asks.values():
        times = [entry.wake_ms] if entry.wake_ms is not None else []
        if entry.expires_at is not None:
            times.append((int(entry.expires_at) + 1) * 1000)
        for at in times:
            if earliest is None or at < earliest[0]:
                earliest = (int(at), entry.backoff)
    if earliest is None or not earliest[1]:
        return None
    wait = earliest[0] - now_ms
    return wait if 0 < wait <= limit_ms else None


def wake_root(store: Store, run_id: str, now_ms: int) -> None:
    """Something was journaled for ``run_id``: its top-level run is due now."""
    root = store.get_run(run_id)
    while root.parent_run_id is not None:
        root = store.get_run(root.parent_run_id)
    set_wake(store, root.run_id, now_ms)
