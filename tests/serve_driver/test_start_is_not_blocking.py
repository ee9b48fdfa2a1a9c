"""Non-blocking start (issue #17 part 2), with real ``plait serve`` processes: ``POST
/runs`` answers 202 with the queued run at once; ``?wait=SECONDS`` answers 200 with the
run object once it parks or finishes, else 202 as it is; the run's event stream can be
opened before its first wave and follows it; an API-only server (``--workers 0``)
leaves the run queued for ``plait worker``."""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from serve_driver.support import TOKEN, cli, copy_flows, served


def stream_events(url: str, run_id: str) -> list[tuple[str, dict]]:
    """The run's event stream from its beginning to its ``end`` event."""
    events: list[tuple[str, dict]] = []
    headers = {"Authorization": f"Bearer {TOKEN}"}
    with httpx.stream("GET", f"{url}runs/{run_id}/events", headers=headers, timeout=120) as got:
        assert got.status_code == 200
        name = ""
        for line in got.iter_lines():
            if line.startswith("event: "):
                name = line[len("event: ") :]
            elif line.startswith("data: "):
                events.append((name, json.loads(line[len("data: ") :])))
    return events


def test_a_start_answers_202_queued_and_its_stream_follows_it_from_before_its_first_wave(
    tmp_path: Path,
):
    copy_flows(tmp_path)
    # The stream is opened at once: on a run that exists as queued (or already moving).
    with served(tmp_path, f"sqlite:///{tmp_path}/plait.db") as server:
        started = server.post("/runs", {"workflow": server.flow("approval"), "run_id": "r1"})
        events = stream_events(server.url, "r1")

    assert started.status_code == 202
    assert started.json()["run_id"] == "r1" and started.json()["status"] == "queued"
    assert started.json()["outcome"] is None
    kinds = [name for name, _ in events]
    assert kinds[0] != "end" and kinds[-1] == "end"
    assert events[-1][1] == {"run_id": "r1", "status": "parked", "after": events[-2][1]["seq"]}
    assert any(name == "intent" and data["key"]["node"] == "start" for name, data in events)


def test_wait_answers_200_with_the_parked_run_object_as_plait_show_prints_it(tmp_path: Path):
    copy_flows(tmp_path)
    db = f"sqlite:///{tmp_path}/plait.db"
    with served(tmp_path, db) as server:
        waited = server.post(
            "/runs", {"workflow": server.flow("approval"), "run_id": "r1"}, wait=120
        )
        shown = cli("show", "r1", "--db", db, "--json", cwd=tmp_path)

    assert waited.status_code == 200
    assert waited.json()["status"] == "parked"
    assert waited.json() == json.loads(shown.stdout)


def test_an_api_only_server_answers_202_queued_when_the_wait_runs_out(tmp_path: Path):
    copy_flows(tmp_path)
    db = f"sqlite:///{tmp_path}/plait.db"
    with served(tmp_path, db, "--workers", "0") as server:
        waited = server.post(
            "/runs", {"workflow": server.flow("approval"), "run_id": "r1"}, wait=0.2
        )
        queued_still = server.run("r1")["status"]
        worker = cli("worker", "--once", "--db", db, "--json", cwd=tmp_path)
        after = server.run("r1")

    assert waited.status_code == 202 and waited.json()["status"] == "queued"
    assert queued_still == "queued"  # nothing in the server drives it
    assert worker.returncode == 0, worker.stdout + worker.stderr
    assert after["status"] == "parked"


def test_detach_still_queues_and_a_wait_out_of_bounds_is_E019(tmp_path: Path):
    copy_flows(tmp_path)
    with served(tmp_path, f"sqlite:///{tmp_path}/plait.db", "--workers", "0") as server:
        body = {"workflow": server.flow("approval"), "run_id": "r1", "detach": True}
        detached = server.post("/runs", body, wait=60)  # detach: at once, whatever the wait
        refused = [
            server.post("/runs", {"workflow": server.flow("approval")}, wait=value)
            for value in (-1, 3601, "soon")
        ]

    assert detached.status_code == 202 and detached.json()["status"] == "queued"
    for response in refused:
        assert response.status_code == 400, response.text
        assert response.json()["error"]["code"] == "PLAIT-E019"
