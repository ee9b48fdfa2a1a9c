"""The web console under ``/console/``: one page (``console/index.html``) for every view,
its script and style beside it, and ``/`` sending a browser there.

Each view has its own address (``/console/runs?status=parked``, ``/console/runs/ID``,
``/console/runs/ID#superstep-3``): the server answers every ``/console/...`` path with
the same page, whose script (``console/app.js``) reads the address and draws the view,
so reload and back/forward work. The page and its files are served without a token:
they hold no data; the script asks for the token, keeps it in ``sessionStorage`` and
sends it with every API call. Nothing is loaded from elsewhere (no CDN, works offline),
and the Content-Security-Policy below makes sure of it: scripts and styles only from
this server, no inline script, connections only back to it.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import HTMLResponse, RedirectResponse, Response

FILES = Path(__file__).with_name("console")
TYPES = {".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8"}

HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self';"
        " connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}

router = APIRouter()


@cache
def asset(name: str) -> str | None:
    """A file of the console by its name (``app.js``); None for any other name."""
    path = FILES / name
    if path.suffix not in TYPES or path.parent != FILES or not path.is_file():
        return None
    return path.read_text(encoding="utf-8")


@cache
def page() -> str:
    return (FILES / "index.html").read_text(encoding="utf-8")


@router.get("/", include_in_schema=False)
async def root() -> Response:
    return RedirectResponse("console/runs", status_code=307, headers=HEADERS)


@router.get("/console", include_in_schema=False)
async def console_root() -> Response:
    return RedirectResponse("console/runs", status_code=307, headers=HEADERS)


@router.get("/console/static/{name}", include_in_schema=False)
async def static(name: str) -> Response:
    text = asset(name)
    if text is None:
        return Response("not found", status_code=404, media_type="text/plain", headers=HEADERS)
    return Response(text, media_type=TYPES[Path(name).suffix], headers=HEADERS)


@router.get("/console/{view:path}", include_in_schema=False)
async def console(view: str) -> HTMLResponse:
    """The page, for every view; its files are addressed relative to the view's depth."""
    up = "../" * view.count("/")
    return HTMLResponse(page().replace("./static/", up + "static/"), headers=HEADERS)
