"""The web console: pages and files under /console/, served without a token, loading
nothing from elsewhere (the browser tests in tests/console drive it)."""

from __future__ import annotations

import re

import pytest

from http_api.support import TOKEN, Api
from plait.core.errors import CATALOGUE
from plait.server.console import FILES
from plait.server.errors import STATUS

VIEWS = ("/console/runs", "/console/runs?status=parked", "/console/runs/r1", "/console/start")
ASSETS = sorted(p.name for p in FILES.iterdir() if p.suffix in (".js", ".css"))


def test_the_root_and_console_redirect_to_the_runs_view(api: Api):
    for path in ("/", "/console"):
        response = api.client.get(path, follow_redirects=False)
        assert response.status_code == 307
        assert response.headers["location"] == "console/runs"


@pytest.mark.parametrize("view", VIEWS)
def test_every_view_is_the_page_served_without_a_token(api: Api, view: str):
    response = api.client.get(view)

    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    assert "<title>plait console</title>" in response.text
    assert TOKEN not in response.text


def test_the_page_addresses_its_files_relative_to_the_view(api: Api):
    assert 'src="static/app.js"' in api.client.get("/console/runs").text
    assert 'src="../static/app.js"' in api.client.get("/console/runs/team%2Fr1").text
    assert (
        api.client.get("/console/static/app.js")
        .headers["content-type"]
        .startswith("text/javascript")
    )


@pytest.mark.parametrize("name", ["nope.js", "index.html", "..%2Fconsole.py", "%2E%2E%2Fapp.py"])
def test_only_the_consoles_script_and_style_files_are_served(api: Api, name: str):
    response = api.client.get(f"/console/static/{name}")
    assert response.status_code == 404
    assert "def " not in response.text


def test_the_console_loads_nothing_from_elsewhere(api: Api):
    texts = [api.client.get("/console/runs").text]
    texts += [api.client.get(f"/console/static/{name}").text for name in ASSETS]
    for text in texts:
        assert not re.search(r"https?://(?!www\.w3\.org/2000/svg)", text, re.I)
        assert "@import" not in text and "url(http" not in text
    policy = api.client.get("/console/runs").headers["content-security-policy"]
    assert "default-src 'none'" in policy and "script-src 'self'" in policy
    assert "unsafe-inline" not in policy and "unsafe-eval" not in policy


def test_the_console_keeps_the_token_in_session_storage_and_shows_data_as_text(api: Api):
    script = "".join(api.client.get(f"/console/static/{n}").text for n in ASSETS if ".js" in n)

    assert "sessionStorage" in script and "localStorage" not in script
    assert '"Bearer "' in script
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("):
        assert sink not in script, sink
    assert "prompt(" not in script and "alert(" not in script and "confirm(" not in script


def test_the_api_docs_pages_are_off(api: Api):
    assert api.client.get("/docs").status_code == 404
    assert api.client.get("/openapi.json").status_code == 404


def test_every_error_code_has_an_http_status():
    assert sorted(STATUS) == sorted(CATALOGUE)
    assert all(400 <= status < 600 for status in STATUS.values())
