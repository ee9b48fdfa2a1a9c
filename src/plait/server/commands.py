"""Routes that journal what people decide: ``respond``, ``approve``, ``deny``, ``send``,
``cancel``, ``raise-budget``. None of them drives the run: each makes its top-level run
due and wakes the server's drivers, which drive it on (or ``resume``, or a worker).

Each answers with the object ``plait VERB --json`` prints. ``as`` names the principal
where the CLI takes ``--as``; the token decides whether it may (``auth.Caller``), and
the principal it acts as is journaled with every answer, cancel and raise.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field

from plait.core.errors import PlaitError
from plait.driver import verbs
from plait.server.bodies import ApiRoute
from plait.server.replies import CanonicalJSON
from plait.server.settings import CallerOf, Settings

router = APIRouter(default_response_class=CanonicalJSON, route_class=ApiRoute)


class Body(BaseModel):
    """A request body: unknown fields are refused (a typo must not pass silently), and so
    is a field of another type (``"detach": "yes"``, ``"at": "1"`` are not coerced)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, strict=True)


class Acting(Body):
    principal: str | None = Field(default=None, alias="as")


class Respond(Acting):
    result: Any = None
    deny: str | None = None


class Approve(Acting):
    reason: str | None = None


class Deny(Acting):
    reason: str


class Send(Body):
    message: str


class Cancel(Acting):
    reason: str = ""


@router.post("/runs/{run_id}/asks/{ask_id}/respond")
def respond(settings: Settings, caller: CallerOf, run_id: str, ask_id: str, body: Respond) -> Any:
    """``plait respond``: ``{"result": ...}`` answers, ``{"deny": "reason"}`` refuses."""
    given = body.model_fields_set
    if ("result" in given) == ("deny" in given and body.deny is not None):
        raise PlaitError("E028", "respond: give exactly one of 'result' or 'deny'")
    by = caller.acting_as(body.principal)
    with settings.runtime(by) as rt:
        if body.deny is not None:
            accepted = rt.respond(run_id, ask_id, deny=body.deny)
        else:
            accepted = rt.respond(run_id, ask_id, body.result)
    settings.drivers.wake()
    return accepted


@router.post("/runs/{run_id}/asks/{ask_id}/approve")
def approve(
    settings: Settings, caller: CallerOf, run_id: str, ask_id: str, body: Approve | None = None
) -> Any:
    """``plait approve``: the approver must not be the run's principal (PLAIT-E012)."""
    body = body or Approve()
    by = caller.acting_as(body.principal)
    with settings.runtime(by) as rt:
        accepted = rt.respond(run_id, ask_id, approve=True, reason=body.reason)
    settings.drivers.wake()
    return accepted


@router.post("/runs/{run_id}/asks/{ask_id}/deny")
def deny(settings: Settings, caller: CallerOf, run_id: str, ask_id: str, body: Deny) -> Any:
    """``plait deny``."""
    by = caller.acting_as(body.principal)
    with settings.runtime(by) as rt:
        accepted = rt.respond(run_id, ask_id, approve=False, reason=body.reason)
    settings.drivers.wake()
    return accepted


@router.post("/runs/{run_id}/send")
def send(settings: Settings, caller: CallerOf, run_id: str, body: Send) -> Any:
    """``plait send``: a steering message for the run's next superstep."""
    with settings.runtime(caller.principal) as rt:
        rt.send(run_id, body.message)
    settings.drivers.wake()
    return verbs.accepted(run_id)


@router.post("/runs/{run_id}/cancel")
def cancel(settings: Settings, caller: CallerOf, run_id: str, body: Cancel | None = None) -> Any:
    """``plait cancel``: journaled now, seen by the driver at its next step."""
    body = body or Cancel()
    by = caller.acting_as(body.principal)
    with settings.runtime(by) as rt:
        rt.cancel(run_id, body.reason)
    settings.drivers.wake()
    return verbs.accepted(run_id)


@router.post("/runs/{run_id}/raise-budget")
def raise_budget(settings: Settings, caller: CallerOf, run_id: str, body: dict[str, Any]) -> Any:
    """``plait raise-budget``: ``{"tokens": 400000, "usd": 5}`` (axes and units of the CLI)."""
    if not body:
        raise PlaitError("E019", 'raise-budget: give at least one axis, e.g. {"tokens": 1000}')
    raised = ceilings(body)
    with settings.runtime(caller.principal) as rt:
        accepted = verbs.raise_budget(rt, run_id, raised)
    settings.drivers.wake()
    return accepted


def ceilings(values: Mapping[str, Any]) -> dict[str, Any]:
    """``{axis: value}`` as manifest ceilings, checked as the CLI's ``AXIS=VALUE`` are."""
    return verbs.parse_budgets(f"{axis}={_number_text(value)}" for axis, value in values.items())


def _number_text(value: Any) -> str:
    """A JSON value as the VALUE of ``AXIS=VALUE``: numbers (or numeric text) only."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return repr(value)  # parse_budgets reports it as not a number
    return str(value)
