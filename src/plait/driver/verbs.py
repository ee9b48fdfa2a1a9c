"""What the verbs answer: the JSON objects of CONTRACT.md, built once for every surface.

The CLI prints these objects with ``--json`` and the HTTP API returns them, so the two
can never drift apart. Functions here read or journal through a ``Runtime`` and shape
the answer; they never print, never pick an exit code or an HTTP status, and never
drive a run (the caller decides where the event loop runs). Each imports what only it
needs when called, so ``plait runs`` loads none of what ``plait show`` reads with.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING, Any

from plait.core.errors import PlaitError
from plait.store.base import ScheduleStore
from plait.store.records import RUN_STATUSES, RunInfo

if TYPE_CHECKING:
    from plait.driver.runtime import Runtime
    from plait.driver.wave import RunResult
    from plait.workflow.run_definition import RunDefinition

BUDGET_AXES = {
    "supersteps": ("max_supersteps", 1),
    "tokens": ("max_tokens", 1),
    "usd": ("max_usd_micros", 1_000_000),
    "wall_ms": ("max_wall_ms", 1),
    "wall_s": ("max_wall_ms", 1000),
    "storage_bytes": ("max_storage_bytes", 1),
}
"""Budget axes as users name them -> (manifest ceiling, scale to its unit)."""


def parse_budgets(items: Iterable[str]) -> dict[str, Any]:
    """``AXIS=VALUE`` pairs as manifest ceilings (usd in dollars, stored as micro-dollars)."""
    from plait.workflow.checks import MAX_INTEGER
    from plait.workflow.manifest import half_up

    out: dict[str, Any] = {}
    for item in items:
        axis, sep, raw = item.partition("=")
        if not sep or axis not in BUDGET_AXES:
            raise PlaitError(
                "E019",
                f"budget {item!r}: expected AXIS=VALUE with AXIS one of {', '.join(BUDGET_AXES)}",
            )
        field, scale = BUDGET_AXES[axis]
        try:  # the decimal text, never a float: usd=1.0084395 is 1008440 micro-dollars
            number = Decimal(raw)
        except InvalidOperation:
            raise PlaitError("E019", f"budget {item!r}: {raw!r} is not a number") from None
        if not number.is_finite() or number < 0:  # NaN and Infinity too
            raise PlaitError("E019", f"budget {item!r}: must be a finite number >= 0")
        if scale == 1 and number != number.to_integral_value():  # a count has no fractions
            raise PlaitError("E019", f"budget {item!r}: {axis} must be a whole number")
        # Ceilings are compared with 64-bit counters (the first test keeps 1e999999999999
        # from overflowing the product).
        if number > MAX_INTEGER or number * scale > MAX_INTEGER:
            raise PlaitError("E019", f"budget {item!r}: {axis} must be <= {MAX_INTEGER // scale}")
        out[field] = half_up(number, scale)
    return out


def parse_mapping(items: Iterable[str]) -> dict[str, str]:
    """``OLD=NEW`` node renames (``plait migrate --map``); PLAIT-E019 for a malformed one."""
    out: dict[str, str] = {}
    for item in items:
        old, sep, new = item.partition("=")
        if not sep or not old or not new:
            raise PlaitError("E019", f"--map {item!r}: expected OLD=NEW (two node ids)")
        if old in out and out[old] != new:
            raise PlaitError("E019", f"--map {item!r}: node '{old}' is mapped twice")
        out[old] = new
    return out


def accepted(run_id: str, **extra: Any) -> dict[str, Any]:
    """``{"run_id", "accepted": true, ...}``: a command was journaled."""
    return {"run_id": run_id, "accepted": True, **extra}


def check_run_status(status: str | None, *, option: str = "--status") -> None:
    """PLAIT-E019 for a status no run can have (``option`` names the parameter)."""
    if status is not None and status not in RUN_STATUSES:
        raise PlaitError("E019", f"{option} {status!r}: expected one of {', '.join(RUN_STATUSES)}")


def runs_object(rt: Runtime, status: str | None, *, option: str = "--status") -> dict[str, Any]:
    """``plait runs``: ``{"runs": [...]}`` newest first, optionally of one status."""
    check_run_status(status, option=option)
    row = run_row(rt)
    return {"runs": [row(i) for i in rt.store.list_runs(status)]}


def run_row(rt: Runtime) -> Callable[[RunInfo], dict[str, Any]]:
    """What ``plait runs --json`` lists of each run (CONTRACT.md); a scheduled run names
    its schedule and slot."""
    store = rt.store
    slots = {}
    if isinstance(store, ScheduleStore):
        slots = {run: {"name": name, "slot_ms": slot} for name, slot, run in store.schedule_slots()}

    def row(i: RunInfo) -> dict[str, Any]:
        return {
            "run_id": i.run_id,
            "workflow": i.workflow,
            "status": i.status,
            "principal": i.principal,
            "created_ms": i.created_ms,
            "updated_ms": i.updated_ms,
        } | ({"schedule": slots[i.run_id]} if i.run_id in slots else {})

    return row


def show_object(rt: Runtime, run_id: str) -> tuple[RunResult, dict[str, Any]]:
    """``plait show``: the run and its object, with ``governance`` for governed nodes in flight."""
    from plait.driver.inspect_run import activity
    from plait.workflow.tool_code import changed_tool_sources

    view = rt.view(run_id)
    result = view.show()
    shown = result.to_json()
    changed = changed_tool_sources(view.manifest)
    if changed:  # tool code is live: the run goes on with today's functions
        shown["tool_code_changed"] = changed
    governance = view.explain()
    if governance:
        shown["governance"] = governance
    counted = activity(view.trace())
    if counted is not None:  # an agent's turns and tool calls, from the journal
        shown["activity"] = counted
    return result, shown


def trace_object(rt: Runtime, run_id: str) -> dict[str, Any]:
    """``plait trace``: ``{"run_id", "entries": [...]}`` in dispatch order."""
    return {"run_id": run_id, "entries": rt.trace(run_id)}


def verify_report(
    rt: Runtime, run_id: str, against: RunDefinition | None = None, workers: int | None = None
) -> dict[str, Any]:
    """One run's verify report, against the version it pinned or another (``against``,
    ``verify --workflow``); a run that cannot be replayed at all is a failed verification
    (an unknown run id stays PLAIT-E017). ``workers``: as ``Runtime.verify``."""
    from plait.driver.verify import verify_with

    try:
        if against is not None:
            return verify_with(rt.host, run_id, against).to_json()
        return rt.verify(run_id, workers=workers).to_json()
    except PlaitError as exc:
        if exc.code == "E017":
            raise
        return {
            "run_id": run_id,
            "verified": False,
            "checkpoints": 0,
            "up_to": "superstep 0",
            "error": str(exc),
        }


def asks_object(rt: Runtime, run_id: str | None) -> dict[str, Any]:
    """``plait asks``: the pending asks of one run (and its children), or of every parked run."""
    return {"asks": rt.asks(run_id)}


def raise_budget(rt: Runtime, run_id: str, raised: dict[str, Any]) -> dict[str, Any]:
    """Journal raised ceilings; the answer echoes them in the units they are kept in."""
    rt.raise_budget(run_id, raised)
    return accepted(run_id, budgets=raised)
