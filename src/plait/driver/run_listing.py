"""``plait runs --limit`` and ``GET /runs?limit``: one page of runs, with what an operator
scans a list for — how each ended and why, how long it took, what it spent against its
budget, and what a parked run waits for. ``plait asks --limit`` and ``GET /asks?limit``:
the pending asks of one page of parked runs, those parked longest first.

A page is a keyset page (``store.run_pages``): its ``next_cursor`` is an opaque string
naming where the next page starts, so paging stays one indexed read however deep it
goes. Runs are sorted by creation or last update (``sort``), newest or oldest first
(``order``); a cursor names its sort, so it is refused (PLAIT-E019) with another one.
The rows keep every field of ``plait runs --json`` (CONTRACT.md) and add their own.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from plait.core.errors import PlaitError
from plait.store.records import RunInfo
from plait.store.run_pages import MAX_PAGE, SORT_COLUMNS, RunQuery

if TYPE_CHECKING:
    from plait.driver.runtime import Runtime

DEFAULT_LIMIT = 50
ORDERS = ("desc", "asc")


@dataclass(frozen=True)
class Filters:
    """What a caller asked for, as given (the cursor still encoded)."""

    limit: int = DEFAULT_LIMIT
    status: str | None = None
    workflow: str | None = None
    text: str | None = None
    since_ms: int | None = None
    cursor: str | None = None
    sort: str = "created"
    order: str = "desc"
    updated_since_ms: int | None = None


def encode_cursor(at: tuple[int, int], sort: str = "created", order: str = "desc") -> str:
    """``TIME.ROW`` for the default sort (newest created first), else ``SORT.ORDER.TIME.ROW``."""
    plain = f"{at[0]}.{at[1]}"
    return plain if (sort, order) == ("created", "desc") else f"{sort}.{order}.{plain}"


def decode_cursor(
    cursor: str, option: str, sort: str = "created", order: str = "desc"
) -> tuple[int, int]:
    """The ``(sort time, row order)`` a cursor names; PLAIT-E019 for one no page gave, or
    one a page of another sort or order gave."""
    *named, moment, row = cursor.split(".") if cursor.count(".") in (1, 3) else ["", ""]
    if not (moment.isascii() and moment.isdigit() and row.isascii() and row.isdigit()):
        raise PlaitError("E019", f"{option} {cursor!r}: not a cursor a page of runs gave")
    if named and named != [sort, order]:
        raise PlaitError(
            "E019",
            f"{option} {cursor!r}: a cursor of runs sorted by {'.'.join(named)!r},"
            f" not by {sort!r} {order!r}; start again without it",
        )
    if not named and (sort, order) != ("created", "desc"):
        raise PlaitError(
            "E019", f"{option} {cursor!r}: a cursor of runs sorted by 'created' 'desc'"
        )
    return int(moment), int(row)


def check_sort(sort: str, order: str, *, sort_option: str, order_option: str) -> None:
    """PLAIT-E019 for a sort or order no page knows."""
    if sort not in SORT_COLUMNS:
        raise PlaitError("E019", f"{sort_option} {sort!r}: expected one of created, updated")
    if order not in ORDERS:
        raise PlaitError("E019", f"{order_option} {order!r}: expected one of desc, asc")


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
    check_sort(filters.sort, filters.order, sort_option="sort", order_option="order")
    after = (
        None
        if not filters.cursor
        else decode_cursor(filters.cursor, cursor_option, filters.sort, filters.order)
    )
    return RunQuery(
        limit=filters.limit,
        status=filters.status,
        workflow=filters.workflow,
        text=filters.text or None,
        since_ms=filters.since_ms,
        updated_since_ms=filters.updated_since_ms,
        sort=filters.sort,
        descending=filters.order == "desc",
        after=after,
    )


def runs_page_object(rt: Runtime, filters: Filters, row: Any) -> dict[str, Any]:
    """``{"runs": [...], "next_cursor"}``: each run as ``row(info)`` builds it (the
    ``plait runs --json`` fields), with ``summary(...)``'s fields added."""
    page = rt.store.page_runs(query_of(filters))
    return {
        "runs": [row(info) | summary(rt, info) for info in page.runs],
        "next_cursor": (
            None if page.next is None else encode_cursor(page.next, filters.sort, filters.order)
        ),
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


ASKS_SORT = ("updated", "asc")
"""A page of asks lists parked runs by when they parked, longest waiting first: a queue
worked from its head (a run answered and parked again goes to the back)."""


def asks_page_object(
    rt: Runtime, limit: int | None, cursor: str | None, *, option: str = "cursor"
) -> dict[str, Any]:
    """``{"asks": [...], "next_cursor"}``: the pending asks of at most ``limit`` parked runs
    (the page counts runs, not asks: a run's asks are never split over two pages, and a
    page may hold fewer asks than runs, or none, when a run parks on a child or a budget),
    those that have waited longest first; PLAIT-E019 for a limit out of range or a cursor
    no page of asks gave. Each read is one indexed range read (``runs_by_status_updated``)
    and the pages' runs only, however many runs are parked."""
    from plait.driver.run_view import parked_asks  # reads checkpoints: a paged list only

    sort, order = ASKS_SORT
    limit = DEFAULT_LIMIT if limit is None else limit
    filters = Filters(limit, "parked", cursor=cursor, sort=sort, order=order)
    page = rt.store.page_runs(query_of(filters, cursor_option=option))
    return {
        "asks": parked_asks(rt.store, page.runs, now_ms=rt.clock()),
        "next_cursor": None if page.next is None else encode_cursor(page.next, sort, order),
    }
