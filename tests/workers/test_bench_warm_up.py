"""bench/workers.py's plait worker process warms up before its clock starts, as its
LangGraph process does: one run of its own, driven and deleted. The bench's figures hold
only if that warm-up leaves the queued bench runs exactly as they were (none claimed,
leased or driven) and leaves nothing of its own behind for the worker or the count."""

from __future__ import annotations

import asyncio
import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from plait import PlaitError, Runtime, load_workflow
from plait.driver.worker import Worker

BENCH = Path(__file__).resolve().parents[2] / "bench" / "workers.py"


@pytest.fixture
def bench(tmp_path: Path) -> Iterator[ModuleType]:
    """bench/workers.py as a module, with its flow and tools written to ``tmp_path``."""
    spec = importlib.util.spec_from_file_location("bench_workers", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    (tmp_path / "benchtools.py").write_text(module.TOOLS)
    (tmp_path / "flow.yaml").write_text(module.FLOW)
    sys.path.insert(0, str(tmp_path))
    try:
        yield module
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("benchtools", None)


def test_the_warm_up_leaves_the_queued_runs_to_the_measured_worker(
    db: str, tmp_path: Path, bench: ModuleType
) -> None:
    with Runtime(db, principal="bench") as rt:
        flow = load_workflow(tmp_path / "flow.yaml")

        async def queue() -> None:
            for i in range(3):
                await rt.enqueue(flow, {"n": i}, run_id=f"r{i}")

        asyncio.run(queue())
        worker = Worker(rt, concurrency=2, once=True)
        journals = [len(rt.store.load_journal(f"r{i}").items()) for i in range(3)]
        bench.warm_up(rt, tmp_path, "warm")
        with pytest.raises(PlaitError) as gone:
            rt.store.get_run("warm")
        assert gone.value.code == "E017"
        runs = rt.store.list_runs()
        assert {(i.run_id, i.status) for i in runs} == {(f"r{i}", "queued") for i in range(3)}
        assert [len(rt.store.load_journal(f"r{i}").items()) for i in range(3)] == journals
        report = worker.run()
        assert report.to_json()["statuses"] == {"completed": 3}
        assert report.errors == []
