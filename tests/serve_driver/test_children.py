"""A child run's answer reaches its parent (issue #17 part 1): ``plait asks PARENT``
lists the child's pending ask with the child's run id, and a child resumed on its own
(``plait resume CHILD``) makes its root due, so a driver completes the parent."""

from __future__ import annotations

import json
from pathlib import Path

from plait.store import open_store
from serve_driver.support import cli, copy_flows


def test_asks_of_a_parent_lists_its_childs_ask_with_the_childs_run_id(tmp_path: Path):
    copy_flows(tmp_path)
    db = f"sqlite:///{tmp_path}/plait.db"
    started = cli("run", "parent.yaml", "--run-id", "p1", "--db", db, "--json", cwd=tmp_path)

    listed = cli("asks", "p1", "--db", db, "--json", cwd=tmp_path)

    assert started.returncode == 3, started.stdout + started.stderr
    (ask,) = json.loads(listed.stdout)["asks"]
    assert ask["run_id"].startswith("p1~") and ask["node"] == "approve"
    assert ask in json.loads(started.stdout)["asks"]


def test_resuming_a_child_on_its_own_makes_its_root_due_and_a_worker_completes_it(
    tmp_path: Path,
):
    copy_flows(tmp_path)
    db = f"sqlite:///{tmp_path}/plait.db"
    cli("run", "parent.yaml", "--run-id", "p1", "--db", db, "--json", cwd=tmp_path)
    (ask,) = json.loads(cli("asks", "p1", "--db", db, "--json", cwd=tmp_path).stdout)["asks"]
    child = ask["run_id"]
    approved = cli("approve", child, ask["ask_id"], "--as", "bob", "--db", db, cwd=tmp_path)
    assert approved.returncode == 0, approved.stdout + approved.stderr
    store = open_store(db)
    try:
        # The answer made the root due; a claim of the root whose drive was refused (the
        # child's lease held by this very resume) consumes that: only the child's drive
        # ending can tell the root now.
        store.set_wake("p1", None, replace=True)
        resumed = cli("resume", child, "--db", db, "--json", cwd=tmp_path)
        due = store.wake_of("p1")
    finally:
        store.close()
    worker = cli("worker", "--once", "--db", db, "--json", cwd=tmp_path)
    shown = json.loads(cli("show", "p1", "--db", db, "--json", cwd=tmp_path).stdout)

    assert resumed.returncode == 0 and json.loads(resumed.stdout)["status"] == "completed"
    assert due is not None
    assert worker.returncode == 0, worker.stdout + worker.stderr
    assert shown["status"] == "completed" and shown["context"]["finished"] is True
