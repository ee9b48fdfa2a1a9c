"""Names chosen by users: what a run id and a principal may be.

A run id names a run in every store, CLI line and URL; ``PARENT~…`` is reserved for the
child runs of subgraphs (cancel and gc follow it), so a user's id must not hold ``~``.
A principal is compared with another to refuse a self-approval (PLAIT-E012), so it has one
spelling only: no surrounding whitespace, no control character.
"""

from __future__ import annotations

from plait.core.errors import PlaitError
from plait.core.text import has_control_character

MAX_RUN_ID_BYTES = 256


def name_problem(name: str) -> str | None:
    """Why ``name`` cannot name a run or a conversation: blank, longer than 256 bytes, or
    holding a control character; None when it can."""
    if not name.strip():
        return "must not be blank"
    if len(name.encode("utf-8")) > MAX_RUN_ID_BYTES:
        return f"is longer than {MAX_RUN_ID_BYTES} bytes"
    if has_control_character(name):
        return "contains a control character"
    return None


def refuse_name(code: str, what: str, name: str, problem: str) -> PlaitError:
    """The error naming ``what`` (its value cut to 40 characters) and its ``problem``."""
    shown = name if len(name) <= 40 else name[:40] + "…"
    return PlaitError(code, f"{what} {shown!r} {problem}")


def check_run_id(run_id: str | None, what: str = "run id") -> None:
    """PLAIT-E019 for a run id that is blank, longer than 256 bytes, holds a control
    character, or holds ``~``; ``what`` names it in the message (``--run-id``)."""
    if run_id is None:
        return
    problem = name_problem(run_id)
    if problem is None and "~" in run_id:
        problem = "contains '~' (reserved for child runs: PARENT~…)"
    if problem is not None:
        raise refuse_name("E019", what, run_id, problem)


def check_principal(principal: str) -> str:
    """The principal, or PLAIT-E019 when it is blank, longer than 256 bytes, or holds
    surrounding whitespace or a control character (``" alice "`` must not pass as a second
    person approving alice's run)."""
    problem = None
    if not principal.strip():
        problem = "must not be blank"
    elif principal != principal.strip():
        problem = "has surrounding whitespace"
    elif len(principal.encode("utf-8")) > MAX_RUN_ID_BYTES:
        problem = f"is longer than {MAX_RUN_ID_BYTES} bytes"
    elif has_control_character(principal):
        problem = "contains a control character"
    if problem is not None:
        shown = principal if len(principal) <= 40 else principal[:40] + "…"
        raise PlaitError("E019", f"principal {shown!r} {problem}")
    return principal
