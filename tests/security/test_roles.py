"""Principals with their own tokens against a real ``plait serve`` (issue #20, part 1):
each role may call exactly its routes, a token acts only as its principal, separation of
duties holds per person, a revoked token is refused at once, and every answer, cancel and
raise is journaled with the principal the token belongs to."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from plait.server import create_app
from plait.server.bodies import ApiRoute
from plait.server.roles import GRANTS, ROUTE_ACTIONS
from plait.store import open_store
from security.support import PRINCIPALS, Team, error_code, team
from serve_driver.support import cli, wait_for

ROLES = ("viewer", "operator", "approver", "admin")
# Every API route, with a request that names things that do not exist: an allowed role
# gets past authorization to a 4xx of the route itself (unknown run, bad file), never 403.
ROUTES: list[tuple[str, str, Any]] = [
    ("GET", "/me", None),
    ("GET", "/runs", None),
    ("GET", "/runs/nope", None),
    ("GET", "/runs/nope/trace", None),
    ("POST", "/runs/nope/verify", None),
    ("GET", "/asks", None),
    ("GET", "/runs/nope/asks", None),
    ("GET", "/runs/nope/graph", None),
    ("GET", "/runs/nope/events", None),
    ("GET", "/workflows/graph?path=missing.yaml", None),
    ("GET", "/schedules", None),
    ("GET", "/runs/nope/journal", None),
    ("GET", "/runs/nope/drawing", None),
    ("GET", "/workflows/input?path=missing.yaml", None),
    ("GET", "/conversations", None),
    ("GET", "/conversations/nope", None),
    ("POST", "/conversations/nope/turns", {"workflow": "missing.yaml"}),
    ("POST", "/runs", {"workflow": "missing.yaml"}),
    ("POST", "/runs/nope/resume", None),
    ("POST", "/runs/nope/fork", {}),
    ("POST", "/runs/nope/send", {"message": "hi"}),
    ("POST", "/runs/nope/cancel", {}),
    ("POST", "/schedules", {"name": "s", "workflow": "missing.yaml", "every": "1h"}),
    ("POST", "/schedules/sync", {"workflow": "missing.yaml"}),
    ("POST", "/schedules/nope/pause", None),
    ("POST", "/schedules/nope/resume", None),
    ("DELETE", "/schedules/nope", None),
    ("POST", "/runs/nope/asks/a1/respond", {"result": 1}),
    ("POST", "/runs/nope/asks/a1/approve", {}),
    ("POST", "/runs/nope/asks/a1/deny", {"reason": "no"}),
    ("POST", "/runs/nope/raise-budget", {"tokens": 10}),
]


def template(path: str) -> str:
    """The declared route of a concrete path (``/runs/nope`` -> ``/runs/{run_id}``)."""
    parts = path.split("?")[0].split("/")
    names = {2: "{run_id}", 4: "{ask_id}"}
    if parts[1] == "schedules" and len(parts) > 2 and parts[2] not in ("sync",):
        parts[2] = "{name}"
    elif parts[1] == "conversations" and len(parts) > 2:
        parts[2] = "{conversation}"
    elif parts[1] == "runs":
        parts = [names.get(i, p) if p in ("nope", "a1") else p for i, p in enumerate(parts)]
    return "/".join(parts)


@pytest.fixture(scope="module")
def crew(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Team]:
    with team(tmp_path_factory.mktemp("roles")) as running:
        yield running


def test_the_matrix_names_every_api_route_of_the_app(tmp_path: Path):
    app = create_app("t", db=f"sqlite:///{tmp_path}/p.db", workflows=tmp_path)
    declared = {(m, route.path) for route in api_routes(app.routes) for m in route.methods}

    assert declared == set(ROUTE_ACTIONS)
    assert {(m, template(p)) for m, p, _ in ROUTES} == set(ROUTE_ACTIONS)


@pytest.mark.parametrize("role", [*ROLES, "trusted"])
def test_each_role_may_call_exactly_its_routes(crew: Team, role: str):
    client = crew.as_role(role)
    granted = GRANTS["admin" if role == "trusted" else role]
    for method, path, body in ROUTES:
        response = (
            client.request(method, path, json=body)
            if body is not None
            else (client.request(method, path))
        )
        action = ROUTE_ACTIONS[(method, template(path))]
        if action in granted:
            assert response.status_code not in (401, 403), (method, path, response.text)
            assert response.status_code < 500, (method, path, response.text)
        else:
            assert response.status_code == 403, (method, path, response.text)
            assert error_code(response) == "PLAIT-E033"
            assert f"role '{role}'" in response.json()["error"]["message"]


def test_me_names_the_tokens_principal_and_role(crew: Team):
    for role, principal in PRINCIPALS.items():
        assert crew.as_role(role).get("/me").json() == {"principal": principal, "role": role}
    # the trusted token, not bound by --as: an admin naming nobody
    assert crew.as_role("trusted").get("/me").json() == {"principal": None, "role": "admin"}


def test_a_token_cannot_act_as_anyone_else_and_nothing_is_written(crew: Team):
    before = runs_and_journals(crew.db)

    spoofed = crew.as_role("operator").post(
        "/runs", json={"workflow": "question.yaml", "run_id": "spoof", "as": "ada"}
    )

    assert spoofed.status_code == 403
    assert spoofed.json()["error"] == {
        "code": "PLAIT-E033",
        "message": "this token belongs to 'olga' and cannot act as 'ada'",
    }
    assert runs_and_journals(crew.db) == before


def test_self_approval_is_refused_for_a_tokens_own_runs(crew: Team):
    admin, approver = crew.as_role("admin"), crew.as_role("approver")
    start(crew, "admin", "approval.yaml", "self-approve")
    ask = wait_asks(crew, "self-approve")[0]
    path = f"/runs/self-approve/asks/{ask['ask_id']}/approve"

    own = admin.post(path, json={})
    assert own.status_code == 403 and error_code(own) == "PLAIT-E012"

    other = approver.post(path, json={"reason": "looks right"})
    assert other.status_code == 200, other.text
    answers = records(crew.db, "self-approve", "answer")
    assert [a.get("by") for a in answers] == ["april"]


def test_cancel_and_raise_are_journaled_with_the_tokens_principal(crew: Team):
    start(crew, "operator", "question.yaml", "steered")
    wait_asks(crew, "steered")

    raised = crew.as_role("admin").post("/runs/steered/raise-budget", json={"tokens": 5000})
    canceled = crew.as_role("operator").post("/runs/steered/cancel", json={"reason": "done"})

    assert raised.status_code == 200 and canceled.status_code == 200
    assert [r["by"] for r in records(crew.db, "steered", "budget_raise")] == ["ada"]
    assert [r["by"] for r in records(crew.db, "steered", "cancel")] == ["olga"]


def test_a_revoked_token_is_refused_at_once(tmp_path: Path):
    with team(tmp_path) as running:
        viewer = running.as_role("viewer")
        assert viewer.get("/runs").status_code == 200

        done = cli("token", "revoke", "vera", "--db", running.db, cwd=tmp_path)
        assert done.returncode == 0, done.stderr

        refused = viewer.get("/runs")
        assert refused.status_code == 401 and error_code(refused) == "PLAIT-E029"
        assert running.as_role("operator").get("/runs").status_code == 200


# --- helpers ---


def api_routes(routes: list[Any]) -> Iterator[ApiRoute]:
    """Every route checked by ``ApiRoute`` (the console page is not one), routers included."""
    for route in routes:
        if hasattr(route, "original_router"):
            yield from api_routes(route.original_router.routes)
        elif isinstance(route, ApiRoute):
            yield route


def start(crew: Team, role: str, workflow: str, run_id: str) -> dict[str, Any]:
    response = crew.as_role(role).post(
        "/runs", json={"workflow": workflow, "run_id": run_id}, params={"wait": 120}
    )
    assert response.status_code in (200, 202), response.text
    body: dict[str, Any] = response.json()
    return body


def wait_asks(crew: Team, run_id: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []

    def parked() -> bool:
        found[:] = crew.as_role("viewer").get(f"/runs/{run_id}/asks").json()["asks"]
        return bool(found)

    wait_for(parked, f"run {run_id} to ask")
    return found


def records(db: str, run_id: str, kind: str) -> list[dict[str, Any]]:
    store = open_store(db)
    try:
        return [dict(r.body) for r in store.load_journal(run_id).records if r.kind == kind]
    finally:
        store.close()


def runs_and_journals(db: str) -> list[Any]:
    store = open_store(db)
    try:
        runs = store.list_runs()
        return [(r, store.load_journal(r.run_id)) for r in runs]
    finally:
        store.close()
