"""Runs written by engine epoch 3 (every scheduler field in each checkpoint) under today's code.

``tests/fixtures/epoch3/runs.db`` was recorded by the code of ``main`` before epoch 4 (see
the README there) and is never re-recorded. Each test works on a copy. Epoch 4 leaves
every field at a plain default out of a checkpoint; these runs keep their epoch and their
form: they read, verify and resume exactly as before, and new runs are of epoch 4.
"""

from __future__ import annotations

import importlib.util
import shutil
import sqlite3
from pathlib import Path

import pytest

from plait import Runtime
from plait.core.canonical import dumpb
from plait.core.merkle import merkle_digest
from plait.core.state import DecisionRecord
from plait.driver import verify_cores
from plait.driver.checkpoints import decode_checkpoint, read_checkpoint
from plait.driver.defaults import ENGINE_EPOCH

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "epoch3"
# The fixture's workflows, by run id: loaded by path, as module ``flows`` (the name their
# tools were pinned under), kept out of sys.modules where the epoch-2 fixture's ``flows`` is.
_spec = importlib.util.spec_from_file_location("flows", FIXTURE / "flows.py")
assert _spec is not None and _spec.loader is not None
flows = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(flows)

T0 = 1_767_225_600_000
LATER = T0 + 3_600_000  # past the crashed drive's lease
RUNS = ["grow-done", "grow-crashed", "count-done", "pay-done", "pay-parked"]
DEFAULTS = (b'"cancel":null', b'"exhausted":null', b'"failed":null')
"""What every epoch-3 checkpoint of these runs holds and no epoch-4 one does."""


@pytest.fixture
def db(tmp_path: Path) -> str:
    shutil.copy(FIXTURE / "runs.db", tmp_path / "runs.db")
    return f"sqlite:///{tmp_path / 'runs.db'}"


def epoch_of(rt: Runtime, run_id: str) -> int:
    return int(rt.store.manifests(run_id)[0]["engine_epoch"])


def checkpoints(rt: Runtime, run_id: str) -> list[bytes]:
    metas = rt.store.load_journal(run_id).checkpoints
    return [rt.store.read_checkpoint(run_id, meta.seq) for meta in metas]


@pytest.mark.parametrize("run_id", RUNS)
def test_an_epoch_3_run_verifies_and_its_checkpoints_keep_every_field(db, run_id):
    with Runtime(db) as rt:
        report = rt.verify(run_id)
        assert report.verified, report
        assert epoch_of(rt, run_id) == 3
        metas = rt.store.load_journal(run_id).checkpoints
        assert metas
        for meta in metas:
            data = rt.store.read_checkpoint(run_id, meta.seq)
            assert len(data) == meta.size
            assert all(field in data for field in DEFAULTS)
            checkpoint = read_checkpoint(rt.store, run_id, meta.seq)
            assert dumpb(checkpoint.scheduler.to_json()) in data
            assert dumpb(DecisionRecord.from_json(checkpoint.decisions).to_json()) in data


def test_the_epoch_3_runs_cover_cut_and_whole_checkpoints_and_a_parked_ask(db):
    grow = _payloads(db, "grow-done")
    assert any(not p.startswith('{"j":') for p in grow)  # cut into nodes
    assert all(p.startswith('{"j":') for p in _payloads(db, "count-done"))  # kept whole
    with Runtime(db) as rt:
        assert merkle_digest(grow[-1]) == rt.store.load_journal("grow-done").checkpoints[-1].sha256
        (parked,) = rt.asks("pay-parked")
        assert rt.store.get_run("pay-parked").status == "parked"
        assert parked["run_id"] == "pay-parked"


def _payloads(db: str, run_id: str) -> list[str]:
    conn = sqlite3.connect(db.removeprefix("sqlite:///"))
    try:
        rows = conn.execute(
            "SELECT payload FROM journal WHERE run_id = ? AND item = 'checkpoint' ORDER BY seq",
            (run_id,),
        ).fetchall()
    finally:
        conn.close()
    return [payload for (payload,) in rows]


def test_a_crashed_epoch_3_run_resumes_as_epoch_3_and_verifies(db, monkeypatch):
    monkeypatch.setenv("PLAIT_NOW_MS", str(LATER))
    with Runtime(db) as rt:
        before = len(rt.store.load_journal("grow-crashed").checkpoints)
        result = rt.resume_sync("grow-crashed", workflow=flows.workflow("grow-crashed"))
        assert result.status == "completed", result
        assert len(result.context["log"]) == 40
        assert epoch_of(rt, "grow-crashed") == 3
        written = checkpoints(rt, "grow-crashed")[before:]
        assert written  # by today's code, the epoch-3 way: every field
        assert all(all(field in data for field in DEFAULTS) for data in written)
        assert rt.verify("grow-crashed").verified
        # a resumed run is left to one process by verify on every core: the same report
        monkeypatch.setattr(verify_cores, "MIN_SEGMENT_FEEDS", 1)
        assert rt.verify("grow-crashed", workers=3) == rt.verify("grow-crashed", workers=1)


def test_a_parked_epoch_3_run_is_approved_resumes_as_epoch_3_and_verifies(db, monkeypatch):
    monkeypatch.setenv("PLAIT_NOW_MS", str(LATER))
    monkeypatch.chdir(FIXTURE)  # a workflow built in Python reads its model's file from here
    with Runtime(db, model=flows.model(), principal="alice") as rt:
        before = len(rt.store.load_journal("pay-parked").checkpoints)
        (ask,) = rt.asks("pay-parked")
        rt.respond("pay-parked", ask["ask_id"], approve=True, by="bob")
        result = rt.resume_sync("pay-parked", workflow=flows.workflow("pay-parked"))
        assert result.status == "completed", result
        assert epoch_of(rt, "pay-parked") == 3
        written = checkpoints(rt, "pay-parked")[before:]
        assert written
        assert all(all(field in data for field in DEFAULTS) for data in written)
        assert rt.verify("pay-parked").verified
        # a resumed run is left to one process by verify on every core: the same report
        monkeypatch.setattr(verify_cores, "MIN_SEGMENT_FEEDS", 1)
        assert rt.verify("pay-parked", workers=3) == rt.verify("pay-parked", workers=1)


@pytest.mark.parametrize(("run_id", "k"), [("count-done", 2), ("pay-done", 3)])
def test_a_new_run_of_the_same_workflow_is_epoch_4_and_leaves_the_defaults_out(
    db, monkeypatch, run_id, k
):
    monkeypatch.setenv("PLAIT_NOW_MS", str(T0 + 1000 * k))  # the clock it was recorded at
    monkeypatch.chdir(FIXTURE)  # a workflow built in Python reads its model's file from here
    new_id = run_id.replace("-done", "-new")
    with Runtime(db, model=flows.model(), principal="alice") as rt:
        result = rt.run_sync(flows.workflow(run_id), {"i": 0}, run_id=new_id)
        if result.status == "parked":
            rt.respond(new_id, result.asks[0]["ask_id"], approve=True, by="bob")
            result = rt.resume_sync(new_id, workflow=flows.workflow(run_id))
        assert result.status == "completed", result
        assert epoch_of(rt, new_id) == ENGINE_EPOCH == 4
        old, new = checkpoints(rt, run_id), checkpoints(rt, new_id)
        assert len(old) == len(new)
        for a, b in zip(old, new, strict=True):
            assert not any(field in b for field in DEFAULTS)
            assert len(b) < len(a)
            if run_id == "count-done":  # (a tool call's id follows from the run id)
                # the same states and records: only the form moved
                assert _full(b).replace(new_id.encode(), run_id.encode()) == _full(a)
        assert rt.verify(new_id).verified


def _full(data: bytes) -> bytes:
    """A checkpoint's bytes in the epoch-3 form (every field), through the decoders."""
    checkpoint = decode_checkpoint(data)
    record = DecisionRecord.from_json(checkpoint.decisions)
    return dumpb({"scheduler": checkpoint.scheduler.to_json(), "decisions": record.to_json()})
