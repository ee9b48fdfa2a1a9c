"""Storage per superstep as a run grows, and what one wave's commit costs (ARCHITECTURE.md §5.3).

Drives SqliteStore.commit the way the driver does, one transaction per wave (the wave's
result, the superstep's checkpoint, the next intent whose input is the whole context, a
clock record), for a context that gains one 1 KB document per step. Prints the bytes the
store newly holds at steps 10, 100, 500 and 1000 (flat, where full-state copies would
grow linearly) and the mean commit time; then the same loop with a small state, which is
the runtime's floor cost per superstep.

    .venv/bin/python bench/bench_store_growth.py [--steps 1000] [--durability normal|strict]
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from plait.core.canonical import dumpb
from plait.core.keys import JournalKey
from plait.store import (
    CheckpointWrite,
    IntentWrite,
    RecordWrite,
    ResultWrite,
    RunInfo,
    SqliteStore,
    Write,
)

REPORT_AT = (10, 100, 500, 1000)


def wave(run_id: str, step: int, context: dict[str, Any]) -> list[Write]:
    """One wave's group commit: result of step-1, checkpoint of step, intent of step+1."""
    done = JournalKey(run_id, "", "work", step, 0, "tool")
    upcoming = JournalKey(run_id, "", "work", step + 1, 0, "tool")
    state = {
        "scheduler": {"context": context, "superstep": step, "nodes": {"0": {"attempt": step}}},
        "decisions": {"superstep": step, "dispatched": [[0, step]], "edges": [[0, step, "Fired"]]},
    }
    return [
        RecordWrite("clock", {"unix_ms": 1_700_000_000_000 + step}),
        ResultWrite(done, {"Completed": {"result": {"n": step}, "usage": {}}}, step, 64),
        CheckpointWrite(step, dumpb(state), value=state),
        IntentWrite(upcoming, "tool:work", context, step + 1, step, f"idem-{step}"),
    ]


def drive(
    store: SqliteStore, run_id: str, steps: int, doc_bytes: int
) -> tuple[dict[int, int], list[float]]:
    store.create_run(RunInfo(run_id, "bench", "running", "bench", None, 0, 0), {"plan": "bench"})
    rng = random.Random(1)
    docs: list[str] = []
    added: dict[int, int] = {}
    timings: list[float] = []
    for step in range(1, steps + 1):
        if doc_bytes:
            docs.append(rng.randbytes(doc_bytes // 2).hex())
        context = {"docs": docs, "n": step}
        writes = wave(run_id, step, context)
        measure = step in REPORT_AT
        before = store.stored_bytes(run_id) if measure else 0
        start = time.perf_counter()
        store.commit(run_id, None, writes)
        timings.append(time.perf_counter() - start)
        if measure:
            added[step] = store.stored_bytes(run_id) - before
    return added, timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--durability", choices=("normal", "strict"), default="normal")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        store = SqliteStore(Path(folder) / "bench.db", durability=args.durability)
        try:
            added, timings = drive(store, "growing", args.steps, doc_bytes=1024)
            print(f"context grows 1 KB per step, {args.steps} steps, {args.durability} durability")
            print(f"{'step':>6} {'bytes stored by the step':>26} {'full state bytes':>18}")
            for step in sorted(added):
                full = 1024 * step * 2  # checkpoint + intent input, were each copied in full
                print(f"{step:>6} {added[step]:>26,} {full:>18,}")
            print(f"mean commit: {statistics.fmean(timings) * 1e3:.3f} ms per wave")
            _, small = drive(store, "small", args.steps, doc_bytes=0)
            print(f"mean commit, small state: {statistics.fmean(small) * 1e3:.3f} ms per wave")
            total = store.stored_bytes()
            print(f"database holds {total:,} payload bytes for both runs")
        finally:
            store.close()


if __name__ == "__main__":
    main()
