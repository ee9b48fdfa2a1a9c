"""Store failures surface as PLAIT-E020 / PLAIT-E010 and never leave a half-written wave."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from plait import PlaitError, Runtime, Workflow
from plait.store.sqlite import SqliteStore

PLAIT = str(Path(sys.executable).parent / "plait")


def grow(i: int) -> dict:
    return {"i": i + 1, "log": [f"{i:04d}" + "x" * 3000]}


def end() -> dict:
    return {"end": True}


def growing_workflow() -> Workflow:
    return (
        Workflow.new("grow")
        .node("grow", tool=grow)
        .node("end", tool=end)
        .edge("grow", "grow", when="i < 40", max_cycles=50)
        .edge("grow", "end", when="i >= 40")
        .reducer("log", "extend")
    )


def ticking():
    ticks = iter(range(10_000, 10_000_000, 3))
    return lambda: next(ticks)


def test_disk_full_mid_run_is_e020_and_the_run_resumes_once_there_is_room(tmp_path):
    wf = growing_workflow()
    store = SqliteStore(str(tmp_path / "p.db"))
    pages = store._conn.execute("PRAGMA page_count").fetchone()[0]
    store._conn.execute(f"PRAGMA max_page_count = {pages + 12}")
    rt = Runtime(store=store, clock=ticking(), principal="p")
    with pytest.raises(PlaitError) as err:
        rt.run_sync(wf, {"i": 0}, run_id="full")
    assert err.value.code == "E020"
    assert "full" in str(err.value).lower()
    # Every committed wave is whole: the journal replays cleanly up to where it stopped.
    report = rt.verify("full", workflow=wf)
    assert report.verified and report.up_to.startswith("superstep")
    rt.close()
    with Runtime(f"sqlite:///{tmp_path}/p.db", clock=ticking(), principal="p") as roomy:
        result = roomy.resume_sync("full", workflow=wf)
        assert result.status == "completed" and result.context["i"] == 40
        assert roomy.verify("full", workflow=wf).verified


def test_a_read_only_database_is_e020_and_unchanged(tmp_path):
    wf = growing_workflow()
    with Runtime(f"sqlite:///{tmp_path}/p.db", clock=ticking(), principal="p") as rt:
        rt.run_sync(wf, {"i": 38}, run_id="before")
    before = (tmp_path / "p.db").read_bytes()
    store = SqliteStore(str(tmp_path / "p.db"), read_only=True)
    rt = Runtime(store=store, clock=ticking(), principal="p")
    with pytest.raises(PlaitError) as err:
        rt.run_sync(wf, {"i": 0}, run_id="after")
    assert err.value.code == "E020"
    rt.close()
    assert (tmp_path / "p.db").read_bytes() == before


def test_corrupted_checkpoint_bytes_are_e010_from_the_cli(tmp_path):
    db_path = tmp_path / "p.db"
    with Runtime(f"sqlite:///{db_path}", clock=ticking(), principal="p") as rt:
        rt.run_sync(growing_workflow(), {"i": 38}, run_id="r")
    conn = sqlite3.connect(db_path)
    rows = conn.execute("SELECT hash, data FROM nodes").fetchall()
    conn.executemany(
        "UPDATE nodes SET data = ? WHERE hash = ?",
        [(bytes(data).replace(b"xxxx", b"yyyy"), h) for h, data in rows],
    )
    conn.commit()
    conn.close()
    shown = subprocess.run(
        [PLAIT, "show", "r", "--db", f"sqlite:///{db_path}", "--json"],
        capture_output=True,
        text=True,
    )
    assert shown.returncode == 2
    assert json.loads(shown.stdout)["error"]["code"] == "PLAIT-E010"


def test_an_unreachable_database_path_is_e020_from_the_cli(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    done = subprocess.run(
        [PLAIT, "runs", "--db", f"sqlite:///{blocker}/sub/p.db", "--json"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2
    assert json.loads(done.stdout)["error"]["code"] == "PLAIT-E020"
