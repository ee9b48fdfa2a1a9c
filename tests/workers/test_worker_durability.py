"""A worker honours the file's `durability: strict` of each run it drives (issue #17: runs
started over HTTP are queued for the server's driver, so the file's setting must travel with
the run): on a SQLite store opened with NORMAL sync, such a run is committed with FULL."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from plait import Runtime
from plait.driver.worker import Worker
from plait.workflow import load_workflow

FLOW = """\
name: durable
durability: {durability}
nodes: [{{id: only, tool: one}}]
edges: []
tools: {{one: {{python: "durable_tools:one"}}}}
"""


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "durable_tools.py").write_text("def one() -> dict:\n    return {'x': 1}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("durable_tools", None)
    return tmp_path


def queued_and_driven(folder: Path, durability: str) -> Worker:
    path = folder / f"{durability}.yaml"
    path.write_text(FLOW.format(durability=durability))
    with Runtime(f"sqlite:///{folder / 'runs.db'}", durability="normal") as rt:
        asyncio.run(rt.enqueue(load_workflow(path), run_id=f"run-{durability}"))
        worker = Worker(rt, once=True)
        report = worker.run()
        assert rt.show(f"run-{durability}").status == "completed"
        assert rt.verify(f"run-{durability}").verified
    assert report.to_json()["statuses"] == {"completed": 1}
    return worker


def test_a_strict_run_is_committed_with_full_sync_by_a_normal_worker(folder: Path):
    worker = queued_and_driven(folder, "strict")

    strict = worker._strict
    assert strict is not None  # the drive went through a store opened for this run's setting
    assert strict.store.durability == "strict"  # type: ignore[attr-defined]


def test_a_normal_run_is_driven_by_the_workers_own_store(folder: Path):
    worker = queued_and_driven(folder, "normal")

    assert worker._strict is None
