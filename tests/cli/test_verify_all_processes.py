"""``plait verify --all`` on every core (issue #22, target 3): runs dealt out to ``plait
verify`` child processes give the same reports, in the same order, as verifying each run
here; a store verified within the head start never starts a child. Run on a copy of the
committed fixture store (finished, parked, forked, governed and agent runs)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from plait.cli.verify_all import verify_all
from plait.driver.runtime import Runtime
from plait.driver.verbs import verify_report

FIXTURE_DB = Path(__file__).parents[1] / "fixtures" / "journals" / "runs.db"


@pytest.fixture
def db(tmp_path: Path) -> str:
    copy = tmp_path / "runs.db"
    shutil.copyfile(FIXTURE_DB, copy)
    return f"sqlite:///{copy}"


def test_children_verify_every_run_as_this_process_does(db: str) -> None:
    with Runtime(db) as rt:
        ids = [i.run_id for i in rt.store.list_runs()]
        here_calls: list[str] = []
        done: list[int] = []

        def here(run_id: str) -> dict[str, Any]:
            here_calls.append(run_id)
            return verify_report(rt, run_id)

        spread = verify_all(db, ids, None, here, done.append, processes=2, head_start_s=0)
        assert here_calls == []  # every run was verified by a child
        assert sum(done) == len(ids)  # the progress bar reached the end
        alone = [verify_report(rt, run_id) for run_id in ids]
    assert spread == alone
    assert [r["run_id"] for r in spread] == ids
    assert len(ids) > 20 and all(r["verified"] for r in spread)


def test_a_store_verified_within_the_head_start_starts_no_child(db: str) -> None:
    with Runtime(db) as rt:
        ids = [i.run_id for i in rt.store.list_runs()][:3]
        here_calls: list[str] = []

        def here(run_id: str) -> dict[str, Any]:
            here_calls.append(run_id)
            return verify_report(rt, run_id)

        reports = verify_all(db, ids, None, here, processes=2, head_start_s=3600)
    assert here_calls == ids
    assert [r["run_id"] for r in reports] == ids


def test_verify_all_json_is_unchanged_in_shape(tmp_path: Path, db: str) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from plait.cli import main; sys.argv[0] = 'plait'; main()",
            *("verify", "--all", "--json", "--db", db),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    printed = json.loads(done.stdout)
    assert set(printed) == {"runs", "verified", "failed"}
    assert printed["failed"] == 0 and printed["verified"] == len(printed["runs"])
