"""``RunResult``: where a run stands, as ``run``, ``resume``, ``fork`` and ``show`` answer.

Apart from the wave (``plait.driver.wave`` re-exports it) so that reading a run back
(``plait show``, ``plait asks``) does not import the step function and the event loop.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from plait.core.canonical import JSON
from plait.core.outcomes import outcome_kind
from plait.core.state import SchedulerState
from plait.workflow.plan_hash import plan_hash


@dataclass
class RunResult:
    """Where a drive stopped: finished (with an outcome) or parked (with asks)."""

    run_id: str
    status: str
    outcome: JSON | None
    context: dict[str, Any]
    spent: dict[str, int]
    asks: list[dict[str, Any]] = field(default_factory=list)
    folds: int = 0
    redelivered: int = 0
    migrated_from: list[str] = field(default_factory=list)
    """The versions (``plan_hash``) it lived on before, oldest first (``plait migrate``)."""
    schedule: dict[str, Any] | None = None
    """``{"name", "slot_ms"}`` for a run a schedule started (``plait schedule``)."""
    _plan_hash: str | None = field(default=None, repr=False, compare=False)
    _pinned: dict[str, Any] | None = field(default=None, repr=False, compare=False)
    """The pinned definition whose ``plan_hash`` is not computed yet (``on_version``)."""

    @property
    def plan_hash(self) -> str | None:
        """The plan the run is pinned to, by meaning (``workflow.plan_hash``); hashed when
        first asked for: a worker, which only reads a drive's status, never asks."""
        if self._pinned is not None:
            self._plan_hash, self._pinned = plan_hash(self._pinned), None
        return self._plan_hash

    @plan_hash.setter
    def plan_hash(self, value: str | None) -> None:
        self._plan_hash, self._pinned = value, None

    def on_version(self, manifest: dict[str, Any]) -> RunResult:
        """This result naming the version ``manifest`` pins and the ones it migrated from
        (and the schedule slot that started it). ``manifest`` is the drive's own (read for
        it, or a worker's): its pinned definition is not changed after the drive."""
        self._plan_hash, self._pinned = None, manifest["workflow"]
        self.migrated_from = list(manifest.get("migrated_from", ()))
        self.schedule = manifest.get("schedule")
        return self

    def __eq__(self, other: object) -> bool:
        """Field by field, the plan hash too (hashed if need be)."""
        if not isinstance(other, RunResult):
            return NotImplemented
        return _compared(self) == _compared(other)

    @staticmethod
    def of(state: SchedulerState, asks: Sequence[dict[str, Any]] = ()) -> RunResult:
        outcome = state.outcome()
        if outcome is not None:
            status = outcome_kind(outcome)
        elif state.is_parked():
            status = "parked"
        else:
            status = "running"
        spent = state.spent.to_json()
        spent["elapsed_ms"] = state.elapsed_ms + spent["wall_ms"]
        return RunResult(
            run_id=state.run_id,
            status=status,
            outcome=outcome,
            context=state.context,
            spent=spent,
            asks=list(asks),
            folds=state.folds,
        )

    def to_json(self) -> dict[str, Any]:
        """The CONTRACT.md shape of ``run``/``resume``/``fork``/``show`` output."""
        return {
            "run_id": self.run_id,
            "status": self.status,
            "outcome": contract_outcome(self.outcome),
            "context": self.context,
            "asks": self.asks,
            "spent": self.spent,
            "folds": self.folds,
        } | self._versions()

    def _versions(self) -> dict[str, Any]:
        """``plan_hash`` once known, and ``migrated_from`` for a run that was migrated."""
        out: dict[str, Any] = {} if self.plan_hash is None else {"plan_hash": self.plan_hash}
        out |= {"migrated_from": self.migrated_from} if self.migrated_from else {}
        return out | ({"schedule": self.schedule} if self.schedule is not None else {})


def _compared(result: RunResult) -> tuple[Any, ...]:
    """What two results must share to be equal."""
    return (
        result.run_id, result.status, result.outcome, result.context, result.spent,
        result.asks, result.folds, result.redelivered, result.plan_hash,
        result.migrated_from, result.schedule,
    )  # fmt: skip


def contract_outcome(outcome: JSON | None) -> dict[str, Any] | None:
    """``"Completed"`` / ``{"Failed": {...}}`` as ``{"kind": "failed", "node": ..., ...}``."""
    if outcome is None:
        return None
    kind = outcome_kind(outcome)
    fields = {} if isinstance(outcome, str) else dict(next(iter(outcome.values())))
    if kind == "canceled" and "detail" not in fields:
        # CONTRACT.md's outcome says what happened in ``detail``; by and reason stay too.
        reason = fields.get("reason")
        fields["detail"] = f"canceled by {fields.get('by')}" + (f": {reason}" if reason else "")
    return {"kind": kind, **fields}
