"""How an error becomes an HTTP answer: one status per ``PLAIT-Ennn`` code, and the body
``{"error": {"code", "message"}}`` the CLI prints with ``--json``.

The statuses follow the CLI's exit-code semantics (CONTRACT.md): a refusal is a 4xx
naming what was wrong with the request, storage trouble is 503. A code missing from
the table is a bug (a test checks the whole catalogue is covered); it answers 500.
"""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response

from plait.core.errors import PlaitError
from plait.server.replies import error_reply

BAD_REQUEST = 400
UNAUTHENTICATED = 401
FORBIDDEN = 403
NOT_FOUND = 404
CONFLICT = 409
UNPROCESSABLE = 422
UNAVAILABLE = 503

STATUS: dict[str, int] = {
    # a request or a file the server cannot use as given (load errors, bad values)
    "E002": BAD_REQUEST,
    "E003": BAD_REQUEST,
    "E004": BAD_REQUEST,
    "E005": BAD_REQUEST,
    "E006": BAD_REQUEST,
    "E019": BAD_REQUEST,
    "E025": BAD_REQUEST,
    "E027": BAD_REQUEST,
    "E032": BAD_REQUEST,
    "E037": BAD_REQUEST,  # the workflow's decision backend cannot run on this server
    "E038": BAD_REQUEST,
    # who is asking
    "E029": UNAUTHENTICATED,
    "E012": FORBIDDEN,
    "E033": FORBIDDEN,
    # where: a file outside the served folder, a model override not admitted
    "E034": FORBIDDEN,
    "E035": FORBIDDEN,
    # what is asked about does not exist
    "E017": NOT_FOUND,
    # the run's state refuses the request: a settled or expired ask, a duplicate run id,
    # a resume it cannot do, a lease another driver holds, a run that cannot go on
    "E011": CONFLICT,
    "E016": CONFLICT,
    "E008": CONFLICT,
    "E010": CONFLICT,
    "E021": CONFLICT,
    "E026": CONFLICT,
    "E001": CONFLICT,
    "E007": CONFLICT,
    "E009": CONFLICT,
    "E013": CONFLICT,
    "E015": CONFLICT,
    "E024": CONFLICT,
    "E030": CONFLICT,
    "E031": CONFLICT,
    # an answer that does not match the ask's schema
    "E028": UNPROCESSABLE,
    # the store cannot be reached, read or written
    "E020": UNAVAILABLE,
}


def status_of(error: PlaitError) -> int:
    return STATUS.get(error.code, 500)


def install(app: FastAPI) -> None:
    """Answer a PlaitError, and a request FastAPI could not read, with the error object."""

    async def plait_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, PlaitError)
        status = status_of(exc)
        headers = {"WWW-Authenticate": "Bearer"} if status == UNAUTHENTICATED else None
        return error_reply(exc, status, headers)

    async def unreadable(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestValidationError)
        return error_reply(PlaitError("E019", describe_invalid(exc)), BAD_REQUEST)

    app.add_exception_handler(PlaitError, plait_error)
    app.add_exception_handler(RequestValidationError, unreadable)


def describe_invalid(exc: RequestValidationError) -> str:
    """One line per problem FastAPI found in the request: where, and what was wrong."""
    lines = []
    for problem in exc.errors():
        where = ".".join(str(part) for part in problem.get("loc", ()))
        lines.append(f"{where}: {problem.get('msg', 'invalid')}")
    return "invalid request: " + "; ".join(lines)
