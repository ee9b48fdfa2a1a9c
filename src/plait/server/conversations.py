"""Conversations over HTTP (docs/server.md "Conversations"): list them, start a turn.

``GET /conversations`` answers what ``plait conversations --json`` prints;
``POST /conversations/{conversation}/turns`` is ``POST /runs`` with the conversation
taken from the path (a body naming another one is refused, PLAIT-E031).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query
from fastapi.responses import Response

from plait.core.errors import PlaitError
from plait.driver.conversations import conversations as conversation_rows
from plait.server.bodies import ApiRoute
from plait.server.driving import MAX_WAIT_S, Start, start
from plait.server.replies import CanonicalJSON
from plait.server.settings import CallerOf, Settings

router = APIRouter(default_response_class=CanonicalJSON, route_class=ApiRoute)


@router.get("/conversations")
def conversations(settings: Settings) -> Any:
    """``plait conversations``: every conversation, latest update first."""
    with settings.runtime() as rt:
        return {"conversations": conversation_rows(rt.store)}


@router.get("/conversations/{conversation}")
def conversation(settings: Settings, conversation: str) -> Any:
    """One conversation's row (PLAIT-E017 when no run belongs to it)."""
    with settings.runtime() as rt:
        rows = conversation_rows(rt.store, conversation)
    if not rows:
        raise PlaitError("E017", f"unknown conversation '{conversation}'")
    return rows[0]


@router.post("/conversations/{conversation}/turns", status_code=202)
def turn(
    settings: Settings,
    caller: CallerOf,
    conversation: str,
    body: Start,
    response: Response,
    wait: Annotated[float | None, Query(ge=0, le=MAX_WAIT_S)] = None,
) -> Any:
    """The conversation's next turn: ``POST /runs`` with ``conversation`` set."""
    if body.conversation not in (None, conversation):
        raise PlaitError(
            "E031",
            f"the path names conversation '{conversation}', the body '{body.conversation}'",
        )
    return start(
        settings, caller, body.model_copy(update={"conversation": conversation}), response, wait
    )
