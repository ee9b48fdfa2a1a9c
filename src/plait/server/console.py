"""``GET /``: the web console, one static page (``console.html``) with its script inline.

The page is served without a token: it holds no data, asks for the token, keeps it in
``sessionStorage`` and sends it with every API call. It loads nothing from elsewhere
(no CDN, works offline), and the Content-Security-Policy below makes sure of it.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import HTMLResponse

PAGE = Path(__file__).with_name("console.html")

HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline';"
        " connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}

router = APIRouter()


@cache
def page() -> str:
    return PAGE.read_text(encoding="utf-8")


@router.get("/", response_class=HTMLResponse, include_in_schema=False)
async def console() -> HTMLResponse:
    return HTMLResponse(page(), headers=HEADERS)
