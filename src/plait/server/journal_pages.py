"""``GET /runs/{id}/journal?before=SEQ&limit=N``: a run's journal a page at a time,
newest first, so a run of 100,000 items opens as fast as one of 10 (the console loads
older pages as the reader scrolls). Items are shaped as the event stream sends them
(``events.item_json``, each effect with its loop pass where a checkpoint places it:
``driver.effect_passes``); ``next_before`` is the ``before`` of the next (older) page,
null once the first item was sent.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from plait.core.errors import PlaitError
from plait.server.bodies import ApiRoute
from plait.server.events import item_json, passes_of
from plait.server.replies import CanonicalJSON
from plait.server.settings import Settings
from plait.store.run_pages import MAX_PAGE

router = APIRouter(default_response_class=CanonicalJSON, route_class=ApiRoute)

DEFAULT_JOURNAL_PAGE = 200


@router.get("/runs/{run_id}/journal")
def journal(
    settings: Settings, run_id: str, before: int | None = None, limit: int = DEFAULT_JOURNAL_PAGE
) -> Any:
    """Up to ``limit`` items before seq ``before`` (default: the newest), newest first."""
    if not 1 <= limit <= MAX_PAGE:
        raise PlaitError("E019", f"limit {limit}: expected 1 to {MAX_PAGE}")
    if before is not None and before < 1:
        raise PlaitError("E019", f"before {before}: expected a journal seq (1 or more)")
    with settings.runtime() as rt:
        items = rt.store.journal_page(run_id, before, limit)
        passes = passes_of(rt.store, run_id, items)
    last = items[-1].seq if items else None
    return {
        "run_id": run_id,
        "items": [item_json(item, passes) for item in items],
        "next_before": last if len(items) == limit and last is not None and last > 1 else None,
    }
