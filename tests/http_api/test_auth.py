"""Bearer-token authentication, the principal a request acts as, and `plait serve`'s token."""

from __future__ import annotations

import importlib
import io
import json
import socket
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from http_api.support import OWNER, TOKEN, Api
from plait.cli import app as cli_app
from plait.server import create_app
from plait.server.auth import TOKEN_ENV, Access, bearer, resolve_token

serve_verb = importlib.import_module("plait.cli.serve")  # the package attribute is the verb

API_ROUTES = [
    ("GET", "/runs"),
    ("GET", "/runs/r1"),
    ("GET", "/runs/r1/trace"),
    ("GET", "/runs/r1/graph"),
    ("GET", "/runs/r1/events"),
    ("POST", "/runs/r1/verify"),
    ("GET", "/asks"),
    ("GET", "/runs/r1/asks"),
    ("POST", "/runs/r1/asks/a1/respond"),
    ("POST", "/runs/r1/asks/a1/approve"),
    ("POST", "/runs/r1/asks/a1/deny"),
    ("POST", "/runs/r1/send"),
    ("POST", "/runs/r1/cancel"),
    ("POST", "/runs/r1/raise-budget"),
    ("POST", "/runs/r1/resume"),
    ("POST", "/runs/r1/fork"),
    ("POST", "/runs"),
    ("GET", "/workflows/graph?path=x.yaml"),
]


def assert_unauthenticated(response) -> None:
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == "Bearer"
    assert response.json()["error"]["code"] == "PLAIT-E029"
    assert TOKEN not in response.text


@pytest.mark.parametrize(("method", "path"), API_ROUTES)
def test_every_api_route_refuses_a_request_without_a_token(api: Api, method: str, path: str):
    assert_unauthenticated(api.client.request(method, path))


@pytest.mark.parametrize(
    "header",
    ["Bearer wrong", f"Bearer {TOKEN}x", f"Basic {TOKEN}", TOKEN, "Bearer ", f"Bearer{TOKEN}"],
)
def test_a_wrong_token_or_scheme_is_refused_with_401(api: Api, header: str):
    assert_unauthenticated(api.client.get("/runs", headers={"Authorization": header}))


def test_the_right_token_is_admitted_whatever_the_case_of_the_scheme(api: Api):
    response = api.client.get("/runs", headers={"Authorization": f"bearer {TOKEN}"})

    assert response.status_code == 200 and response.json() == {"runs": []}


def test_bearer_reads_the_token_of_a_bearer_header_only():
    assert bearer(f"Bearer {TOKEN}") == TOKEN
    assert bearer("Basic abc") is None and bearer(None) is None and bearer("Bearer  ") is None


def test_access_never_shows_its_token():
    assert TOKEN not in repr(Access(TOKEN, "bob", bound=True))


def test_an_open_token_acts_as_the_principal_a_request_names_else_the_servers():
    access = Access(TOKEN, "server-user")

    assert access.acting_as("bob") == "bob"
    assert access.acting_as(None) == "server-user"
    assert access.acting_as("  ") == "server-user"


def test_a_bound_token_acts_only_as_its_principal(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("PLAIT_PRINCIPAL", OWNER)
    app = create_app(TOKEN, db=f"sqlite:///{tmp_path}/plait.db", principal="bob", bound=True)
    client = TestClient(app)
    auth = {"Authorization": f"Bearer {TOKEN}"}

    response = client.post("/runs/r1/cancel", json={"as": "carol"}, headers=auth)

    assert response.status_code == 403
    assert response.json() == {
        "error": {
            "code": "PLAIT-E012",
            "message": "this token acts as 'bob' and cannot act as 'carol'",
        }
    }
    assert Access(TOKEN, "bob", bound=True).acting_as(None) == "bob"
    assert Access(TOKEN, "bob", bound=True).acting_as("bob") == "bob"


def test_token_comes_from_the_option_then_the_environment_then_is_generated():
    assert resolve_token("given", {TOKEN_ENV: "from-env"}) == ("given", False)
    assert resolve_token(None, {TOKEN_ENV: "from-env"}) == ("from-env", False)
    assert resolve_token("  ", {TOKEN_ENV: " "})[1] is True

    first, generated = resolve_token(None, {})
    second, _ = resolve_token(None, {})

    assert generated and first != second and len(first) >= 32


def test_serve_without_a_token_prints_a_generated_one_once_on_stderr():
    err = io.StringIO()

    token = serve_verb.server_token(None, {}, err)

    assert err.getvalue().count(token) == 1
    assert "PLAIT_SERVE_TOKEN" in err.getvalue()


def test_serve_with_a_token_prints_nothing():
    err = io.StringIO()

    assert serve_verb.server_token(None, {TOKEN_ENV: "mine"}, err) == "mine"
    assert err.getvalue() == ""


def test_serve_without_fastapi_tells_to_install_the_server_extra(monkeypatch):
    monkeypatch.setattr(serve_verb, "missing_server_modules", lambda: ["fastapi"])

    result = CliRunner().invoke(cli_app, ["serve", "--token", TOKEN])

    assert result.exit_code == 2
    assert "pip install 'plait[server]'" in result.stderr
    assert TOKEN not in result.output


@pytest.mark.parametrize("port", ["65536", "-1"])
def test_serve_on_a_port_out_of_range_is_a_usage_error(port):
    result = CliRunner().invoke(cli_app, ["serve", "--token", TOKEN, "--port", port, "--json"])

    assert result.exit_code == 2
    assert json.loads(result.stdout)["error"]["code"] == "PLAIT-E019"


def test_serve_on_an_address_it_cannot_have_is_refused_with_exit_2(tmp_path: Path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        db = f"sqlite:///{tmp_path}/plait.db"

        result = CliRunner().invoke(
            cli_app, ["serve", "--token", TOKEN, "--port", port, "--db", db, "--json"]
        )

    assert result.exit_code == 2  # not uvicorn's 3, which plait reserves for a parked run
    error = json.loads(result.stdout)["error"]
    assert error["code"] == "PLAIT-E019" and f"127.0.0.1:{port}" in error["message"]


@pytest.mark.parametrize(
    "raw",
    [b"{not json", b'{"message": "a", "message": "b"}', b'{"message": NaN}'],
)
def test_a_bad_body_without_a_token_is_refused_with_401_before_it_is_read(api: Api, raw: bytes):
    response = api.client.post(
        "/runs/r1/send", content=raw, headers={"Content-Type": "application/json"}
    )
    assert_unauthenticated(response)
