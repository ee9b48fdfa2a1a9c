"""A confined server (issue #20, parts 2 and 3) against a real ``plait serve``: only the
workflow files of ``--workflows`` can be started, graphed, forked onto or scheduled — not
via ``..``, a link or an absolute path, and nothing outside is quoted; a model override
is refused unless ``--allow-model`` admits it; hostile paths (a FIFO, ``/dev/zero``, a
300-byte name, a NUL byte, a name that is not UTF-8) are PLAIT-E019/E034 at once, never a
hang or a 500; and none of it leaves a trace in the store."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from security.support import SECRET, Team, error_code, team
from security.test_roles import runs_and_journals, start, wait_asks


@pytest.fixture(scope="module")
def crew(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Team]:
    root = tmp_path_factory.mktemp("confined")
    with team(root, "--allow-model", "scripted:") as running:
        served = running.served
        os.mkfifo(served / "pipe.yaml")
        (served / "escape.yaml").symlink_to(running.outside / "question.yaml")
        (served / "shadow-link.yaml").symlink_to(running.outside / "shadow.yaml")
        (served / "zero.yaml").symlink_to("/dev/zero")
        (served / "notes.txt").write_text(SECRET)
        (served / "sub").mkdir()
        yield running


OUTSIDE = [
    "../outside/question.yaml",
    "sub/../../outside/question.yaml",
    "escape.yaml",  # a link inside pointing out
    "shadow-link.yaml",
    "/etc/passwd",
    "{outside}/question.yaml",  # absolute, outside
    "{outside}/shadow.yaml",
    "notes.txt",  # inside, but not a workflow file
    "zero.yaml",  # a link to a device outside
]
HOSTILE = {
    "pipe.yaml": "is a FIFO",
    "a" * 300 + ".yaml": "longer than 255 bytes",
    "nul\x00.yaml": "NUL byte",
    "sub": "not a workflow file",
}


def concrete(crew: Team, path: str) -> str:
    return path.replace("{outside}", str(crew.outside))


@pytest.mark.parametrize("path", OUTSIDE)
def test_files_outside_the_served_folder_are_refused_unopened(crew: Team, path: str):
    before = runs_and_journals(crew.db)
    operator = crew.as_role("operator")
    target = concrete(crew, path)

    for response in (
        operator.post("/runs", json={"workflow": target, "run_id": "out"}),
        operator.get("/workflows/graph", params={"path": target}),
        operator.get("/workflows/input", params={"path": target}),
        operator.post("/schedules", json={"name": "s", "workflow": target, "every": "1h"}),
        operator.post("/schedules/sync", json={"workflow": target}),
    ):
        assert response.status_code == 403, response.text
        assert error_code(response) == "PLAIT-E034"
        assert "do-not-quote-me" not in response.text and "root:" not in response.text
    assert runs_and_journals(crew.db) == before


def test_a_fork_cannot_move_onto_a_file_outside(crew: Team):
    start(crew, "operator", "question.yaml", "forked-base")
    wait_asks(crew, "forked-base")
    before = runs_and_journals(crew.db)

    response = crew.as_role("operator").post(
        "/runs/forked-base/fork", json={"workflow": "../outside/question.yaml"}
    )

    assert response.status_code == 403 and error_code(response) == "PLAIT-E034"
    assert runs_and_journals(crew.db) == before


@pytest.mark.parametrize("path", list(HOSTILE), ids=["fifo", "long", "nul", "folder"])
def test_hostile_paths_are_refused_at_once_with_a_code(crew: Team, path: str):
    before = runs_and_journals(crew.db)
    operator = crew.as_role("operator")

    started = operator.post("/runs", json={"workflow": path}, timeout=30)
    graphed = operator.get("/workflows/graph", params={"path": path}, timeout=30)

    for response in (started, graphed):
        assert response.status_code in (400, 403), response.text
        assert error_code(response) in ("PLAIT-E019", "PLAIT-E034")
        assert HOSTILE[path] in response.json()["error"]["message"]
    assert runs_and_journals(crew.db) == before
    assert crew.as_role("viewer").get("/runs").status_code == 200  # nothing is stuck


def test_a_model_override_is_refused_unless_admitted(crew: Team):
    before = runs_and_journals(crew.db)
    body: dict[str, Any] = {"workflow": "question.yaml", "run_id": "exfil"}

    refused = crew.as_role("operator").post(
        "/runs", json={**body, "model": "openai-compatible:http://attacker.example/v1:m"}
    )

    assert refused.status_code == 403 and error_code(refused) == "PLAIT-E035"
    assert "attacker.example" in refused.json()["error"]["message"]
    assert runs_and_journals(crew.db) == before


def test_an_admitted_override_prefix_passes(crew: Team):
    (crew.served / "answers.json").write_text("[]")

    admitted = crew.as_role("operator").post(
        "/runs",
        json={"workflow": "question.yaml", "run_id": "ok", "model": "scripted:answers.json"},
    )

    assert admitted.status_code == 202, admitted.text


def test_a_server_admits_no_override_by_default(tmp_path: Path):
    with team(tmp_path) as running:
        refused = running.as_role("admin").post(
            "/runs", json={"workflow": "question.yaml", "model": "scripted:x.json"}
        )

        assert refused.status_code == 403 and error_code(refused) == "PLAIT-E035"
        assert "admits overrides starting with none" in refused.json()["error"]["message"]


def test_a_relative_path_is_read_from_the_served_folder(crew: Team):
    graphed = crew.as_role("viewer").get("/workflows/graph", params={"path": "approval.yaml"})

    assert graphed.status_code == 200, graphed.text
    assert "approve" in graphed.json()["mermaid"]
