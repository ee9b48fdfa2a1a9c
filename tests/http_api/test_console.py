"""The web console: one static page, served without a token, that loads nothing from elsewhere."""

from __future__ import annotations

import re

from http_api.support import TOKEN, Api
from plait.core.errors import CATALOGUE
from plait.server.errors import STATUS


def test_the_console_is_served_without_a_token(api: Api):
    response = api.client.get("/")

    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    assert "<title>plait console</title>" in response.text
    assert TOKEN not in response.text


def test_the_console_loads_nothing_from_elsewhere(api: Api):
    response = api.client.get("/")
    page = response.text

    assert not re.search(r"https?:|//[a-z0-9.-]+\.[a-z]{2,}", page, re.I)
    assert not re.search(r"<(link|img|iframe|object|embed)\b", page, re.I)
    assert not re.search(r"<script[^>]*\bsrc=", page, re.I)
    assert "@import" not in page and "url(" not in page
    policy = response.headers["content-security-policy"]
    assert "default-src 'none'" in policy and "connect-src 'self'" in policy


def test_the_console_keeps_the_token_in_session_storage_and_sends_it_as_a_bearer(api: Api):
    page = api.client.get("/").text

    assert "sessionStorage" in page and "localStorage" not in page
    assert '"Bearer "' in page
    assert "innerHTML" not in page  # API data is shown as text, never as markup


def test_the_console_calls_the_routes_it_needs(api: Api):
    page = api.client.get("/").text

    for route in ("runs", "/trace", "/graph", "/asks", "/events?after=", "/approve", "/deny"):
        assert route in page, route


def test_the_api_docs_pages_are_off(api: Api):
    assert api.client.get("/docs").status_code == 404
    assert api.client.get("/openapi.json").status_code == 404


def test_every_error_code_has_an_http_status():
    assert sorted(STATUS) == sorted(CATALOGUE)
    assert all(400 <= status < 600 for status in STATUS.values())
