"""Deltas of the turns a drive streams: who gets them, and with which turn they belong.

A ``DeltaObserver`` given to ``Runtime(deltas=...)`` makes the drive stream its model
turns (``Model.stream``) and tells the observer each piece with the turn's identity.
Deltas are observational (docs/architecture.md §12): nothing here touches the journal,
the journal keeps the completed turn only, and an observer that raises is dropped for
the rest of the turn instead of failing it. An observer with a ``listening(run_id)``
method is asked before each turn, so a server streams only turns someone watches.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from plait.models.base import Delta, OnDelta


@dataclass(frozen=True)
class TurnDelta:
    """One delta of the turn ``call_id`` (the ``turn``-th model turn of ``run_id``, 0-based)."""

    run_id: str
    node: str
    call_id: str
    turn: int
    delta: Delta

    def to_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "node": self.node,
            "call_id": self.call_id,
            "turn": self.turn,
            **self.delta.to_json(),
        }


DeltaObserver = Callable[[TurnDelta], None]
"""Told each delta of each streamed turn; called on the drive's event loop, must not block."""


def turn_sink(
    observer: DeltaObserver | None, run_id: str, node: str, call_id: str, turn: int
) -> OnDelta | None:
    """What the model tells its deltas to for one turn, or None: no one listens."""
    if observer is None:
        return None
    listening = getattr(observer, "listening", None)
    if listening is not None and not listening(run_id):
        return None
    failed = False

    def tell(delta: Delta) -> None:
        nonlocal failed
        if failed:
            return
        try:
            observer(TurnDelta(run_id, node, call_id, turn, delta))
        except Exception:  # an observer's bug must not fail the turn it watches
            failed = True

    return tell
