"""A driver in every server (issue #17 part 1): with real ``plait serve`` processes, on
SQLite and PostgreSQL, everything that can unblock a run — an answer, a child's answer,
a cancel, a raised budget, a message, a due timer, an expired ask — moves it on with no
resume call: the server's own driver claims it and drives it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from serve_driver.support import Served, copy_flows, served, wait_for


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/plait.db"
    return str(request.getfixturevalue("postgres_url"))


@pytest.fixture
def server(tmp_path: Path, store: str) -> Any:
    copy_flows(tmp_path)
    with served(tmp_path, store) as running:
        yield running


def feeds(server: Served, run_id: str) -> list[dict[str, Any]]:
    """The events of every feed the run's journal holds (its stream, read to its end)."""
    response = server.get(f"/runs/{run_id}/events")
    assert response.status_code == 200, response.text
    found = []
    for line in response.text.splitlines():
        if line.startswith("data: "):
            data = json.loads(line[len("data: ") :])
            if data.get("type") == "record" and data["kind"] == "feed":
                found.extend(data["body"]["events"])
    return found


def test_an_approval_completes_the_run_with_no_resume_call(server: Served):
    parked = server.start("approval", "r1")
    assert parked["status"] == "parked"

    server.approve(server.asks("r1")[0])

    done = server.wait_status("r1", "completed")
    assert done["context"]["branch"] == "approved"


def test_a_childs_answer_completes_its_parent(server: Served):
    parked = server.start("parent", "p1")
    (ask,) = server.asks("p1")  # the child's ask, listed under its parent
    assert parked["status"] == "parked"
    assert ask["run_id"] != "p1" and ask["run_id"].startswith("p1~")

    server.approve(ask)  # addressed to the child run itself

    done = server.wait_status("p1", "completed")
    assert done["context"]["finished"] is True
    assert server.run(ask["run_id"])["status"] == "completed"
    assert server.asks("p1") == []


def test_a_cancel_ends_a_parked_run(server: Served):
    server.start("question", "r1")

    assert server.post("/runs/r1/cancel", {"reason": "not needed"}).status_code == 200

    done = server.wait_status("r1", "canceled")
    assert done["outcome"]["kind"] == "canceled"


def test_a_raised_budget_drives_an_exhausted_run_on(server: Served):
    exhausted = server.start("loop", "r1")
    assert exhausted["status"] == "budget_exhausted"

    assert server.post("/runs/r1/raise-budget", {"supersteps": 50}).status_code == 200

    done = server.wait_status("r1", "completed")
    assert done["context"]["i"] == 10


def test_a_message_is_taken_by_a_parked_run(server: Served):
    server.start("question", "r1")

    assert server.post("/runs/r1/send", {"message": "also this"}).status_code == 200

    wait_for(lambda: {"input": "also this"} in feeds(server, "r1"), "the message to be fed")
    server.respond(server.asks("r1")[0], {"note": "fine"})
    done = server.wait_status("r1", "completed")
    assert done["context"]["$inbox"] == ["also this"]


def test_a_due_timer_wakes_the_run(server: Served):
    napping = server.start("nap", "r1")
    assert napping["status"] in ("parked", "completed")  # parked unless the second passed

    done = server.wait_status("r1", "completed")
    assert done["context"]["finished"] is True


def test_an_expired_ask_ends_the_run(server: Served):
    server.start("expiring", "r1")

    done = server.wait_status("r1", "failed")
    assert "expired" in done["outcome"]["detail"]
