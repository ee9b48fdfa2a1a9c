"""SIGTERM stops a server with drivers cleanly: it stops claiming, lets the drive in
flight finish (it is not cut between waves), then exits by the signal."""

from __future__ import annotations

import json
import shutil
import signal
from pathlib import Path

from serve_driver.support import cli, served, wait_for
from workers.support import FLOW_DIR


def test_sigterm_lets_the_drive_in_flight_finish_then_exits(tmp_path: Path):
    for item in FLOW_DIR.iterdir():
        if item.is_file():
            shutil.copy(item, tmp_path / item.name)
    db = f"sqlite:///{tmp_path}/plait.db"
    count = tmp_path / "count"
    with served(tmp_path, db, env={"WORKERTOOLS_BLOCK": "second"}) as server:
        body = {"workflow": server.flow("workflow"), "run_id": "r1"}
        body["input"] = {"count_file": str(count), "n": 1}
        assert server.post("/runs", body).status_code == 202
        wait_for(lambda: Path(f"{count}.blocked").exists(), "the second tool to block")
        server.proc.send_signal(signal.SIGTERM)
        Path(f"{count}.release").write_text("")
        exited = server.proc.wait(timeout=120)
        log = server.stop()
    shown = cli("show", "r1", "--db", db, "--json", cwd=tmp_path)

    assert exited == -signal.SIGTERM
    assert json.loads(shown.stdout)["status"] == "completed"
    assert "Traceback" not in log
    assert len(count.read_text().splitlines()) == 3  # each tool once
