"""``plait runs --limit`` and ``GET /runs?limit``: one page of runs, with what an operator
scans a list for — how each ended and why, how long it took, what it spent against its
budget, and what a parked run waits for.

A page is a keyset page (``store.run_pages``): its ``next_cursor`` is an opaque string
naming where the next page starts, so paging stays one indexed read however deep it
goes. The rows keep every field of ``plait runs --json`` (CONTRACT.md) and add their own.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from plait.core.errors import PlaitError
from plait.store.records import RunInfo
from plait.store.run_pages import MAX_PAGE, RunQuery

if TYPE_CHECKING:
    from plait.driver.runtime import Runtime

DEFAULT_LIMIT = 50


@dataclass(frozen=True)
class Filters:
    """What a caller asked for, as given (the cursor still encoded)."""

    limit: int = DEFAULT_LIMIT
    status: str | None = None
    workflow: str | None = None
    text: str | None = None
    since_ms: int | None = None
    cursor: str | None = None


def encode_cursor(at: tuple[int, int]) -> str:
    return f"{at[0]}.{at[1]}"


def decode_cursor(cursor: str, option: str) -> tuple[int, int]:
    """The ``(created_ms, order)`` a cursor names; PLAIT-E019 for one no page gave."""
    created, _, order = cursor.partition(".")
    if not (created.isascii() and created.isdigit() and order.isascii() and order.isdigit()):
        raise PlaitError("E019", f"{option} {cursor!r}: not a cursor a page of runs gave")
    return int(created), int(order)


def parse_since(text: str, option: str) -> int:
    """``--since``: an ISO 8601 date or date and time (UTC unless it names its zone), as ms
    since the epoch; PLAIT-E019 for anything else."""
    try:
        moment = datetime.datetime.fromisoformat(text.strip())
    except ValueError:
        raise PlaitError(
            "E019", f"{option} {text!r}: expected an ISO 8601 date or time (2026-12-04T18:00)"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return int(moment.timestamp() * 1000)


def check_limit(limit: int, option: str) -> None:
    if not 1 <= limit <= MAX_PAGE:
        raise PlaitError("E019", f"{option} {limit}: expected 1 to {MAX_PAGE}")


def query_of(filters: Filters, *, cursor_option: str = "cursor") -> RunQuery:
    """The store query for ``filters``; PLAIT-E019 for a limit out of range or a bad cursor."""
    check_limit(filters.limit, "limit")
    after = None if not filters.cursor else decode_cursor(filters.cursor, cursor_option)
    return RunQuery(
        limit=filters.limit,
        status=filters.status,
        workflow=filters.workflow,
        text=filters.text or None,
        since_ms=filters.since_ms,
        after=after,
    )


def runs_page_object(rt: Runtime, filters: Filters, row: Any) -> dict[str, Any]:
    """``{"runs": [...], "next_cursor"}``: each run as ``row(info)`` builds it (the
    ``plait runs --json`` fields), with ``summary(...)``'s fields added."""
    page = rt.store.page_runs(query_of(filters))
    return {
        "runs": [row(info) | summary(rt, info) for info in page.runs],
        "next_cursor": None if page.next is None else encode_cursor(page.next),
    }


def summary(rt: Runtime, info: RunInfo) -> dict[str, Any]:
    """``outcome`` (how a finished run ended, and why), ``duration_ms``, ``parent_run_id``,
    ``spent`` and ``budgets`` (as of the latest checkpoint), and for a parked run
    ``waiting``: the prompts of the asks it waits on, parked since ``updated_ms``."""
    # a paged list only: plain `runs` never loads the state or the view
    from plait.driver.run_result import contract_outcome
    from plait.driver.run_view import RunView

    out: dict[str, Any] = {
        "outcome": contract_outcome(info.outcome),
        "duration_ms": info.updated_ms - info.created_ms,
        "parent_run_id": info.parent_run_id,
    }
    view = RunView(rt.store, info.run_id, now_ms=rt.clock())
    state = view.state
    out["budgets"] = view.manifest.get("budgets")
    out["spent"] = None if state is None else state.spent.to_json()
    if info.status == "parked":
        out["waiting"] = [
            {
                "ask_id": ask.get("ask_id"),
                "node": ask.get("node"),
                "prompt": ask.get("prompt"),
                "approval": ask.get("approval"),
            }
            for ask in view.asks()
        ]
    return out
