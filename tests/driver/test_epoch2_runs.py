"""Runs written by engine epoch 2 (whole-bytes checkpoint digests) under today's code.

``tests/fixtures/epoch2/runs.db`` was recorded by the code of ``main`` before epoch 3
(see the README there) and is never re-recorded. Each test works on a copy. Epoch 3 cuts
checkpoints in the core and digests them by their Merkle root; these runs keep their
epoch and their digests: they read, verify and resume exactly as before.
"""

from __future__ import annotations

import shutil
import sqlite3
import sys
from pathlib import Path

import pytest

from plait import Runtime
from plait.core.canonical import digest, dumpb
from plait.core.state import DecisionRecord, SchedulerState
from plait.driver.checkpoints import read_checkpoint
from plait.driver.defaults import ENGINE_EPOCH

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "epoch2"
sys.path.insert(0, str(FIXTURE))
import flows  # noqa: E402  (the fixture's workflows, by run id)

T0 = 1_767_225_600_000
LATER = T0 + 3_600_000  # past the crashed drive's lease


@pytest.fixture
def db(tmp_path: Path) -> str:
    shutil.copy(FIXTURE / "runs.db", tmp_path / "runs.db")
    return f"sqlite:///{tmp_path / 'runs.db'}"


def epoch_of(rt: Runtime, run_id: str) -> int:
    return int(rt.store.manifests(run_id)[0]["engine_epoch"])


@pytest.mark.parametrize("run_id", ["grow-done", "count-done", "grow-crashed"])
def test_an_epoch_2_run_verifies_and_its_checkpoints_keep_their_whole_digests(db, run_id):
    with Runtime(db) as rt:
        report = rt.verify(run_id)
        assert report.verified, report
        assert epoch_of(rt, run_id) == 2
        metas = rt.store.load_journal(run_id).checkpoints
        assert len(metas) > 5
        for meta in metas:
            data = rt.store.read_checkpoint(run_id, meta.seq)
            assert (digest(data), len(data)) == (meta.sha256, meta.size)
            state = read_checkpoint(rt.store, run_id, meta.seq).scheduler
            assert dumpb(SchedulerState.to_json(state)) in data


def test_a_crashed_epoch_2_run_resumes_as_epoch_2_and_verifies(db, monkeypatch):
    monkeypatch.setenv("PLAIT_NOW_MS", str(LATER))
    with Runtime(db) as rt:
        before = len(rt.store.load_journal("grow-crashed").checkpoints)
        result = rt.resume_sync("grow-crashed", workflow=flows.workflow("grow-crashed"))
        assert result.status == "completed", result
        assert len(result.context["log"]) == 40
        assert epoch_of(rt, "grow-crashed") == 2
        metas = rt.store.load_journal("grow-crashed").checkpoints
        assert len(metas) > before
        for meta in metas[before:]:  # written by today's code, the epoch-2 way
            data = rt.store.read_checkpoint("grow-crashed", meta.seq)
            assert digest(data) == meta.sha256
        assert rt.verify("grow-crashed").verified


def test_a_new_run_of_the_same_workflow_is_of_today_s_epoch_with_merkle_digests(db, monkeypatch):
    monkeypatch.setenv("PLAIT_NOW_MS", str(T0))  # the clock grow-done was recorded at
    with Runtime(db) as rt:
        rt.run_sync(flows.workflow("grow-done"), {"i": 0}, run_id="grow-new")
        assert epoch_of(rt, "grow-new") == ENGINE_EPOCH == 4
        new = rt.store.load_journal("grow-new").checkpoints
        old = rt.store.load_journal("grow-done").checkpoints
        # the same states, fewer bytes (epoch 4 leaves out fields at their default), other
        # digests: only the digest's definition and the checkpoint's form moved
        for a, b in zip(old, new, strict=True):
            before = read_checkpoint(rt.store, "grow-done", a.seq)
            after = read_checkpoint(rt.store, "grow-new", b.seq)
            assert dumpb(before.scheduler.to_json()).replace(b"grow-done", b"grow-new") == dumpb(
                after.scheduler.to_json()
            )
            assert DecisionRecord.from_json(before.decisions) == DecisionRecord.from_json(
                after.decisions
            )
            assert b.size < a.size
            assert a.sha256 != b.sha256
        assert rt.verify("grow-new").verified
    conn = sqlite3.connect(db.removeprefix("sqlite:///"))
    try:
        (payload,) = conn.execute(
            "SELECT payload FROM journal WHERE run_id = 'grow-new' AND item = 'checkpoint'"
            " ORDER BY seq DESC LIMIT 1"
        ).fetchone()
    finally:
        conn.close()
    assert digest(payload) == new[-1].sha256  # the digest of the root naming the nodes
