"""What a parked run costs at rest (ARCHITECTURE.md §1.5: "a parked run costs rows, not memory").

Parks N runs (default 10,000) of a three-node approval workflow
``start -> approve (an approval ask) -> finish`` through the Python API, in ONE process
with one ``Runtime`` (one store) on a fresh SQLite file, then reports:

- database bytes per parked run: ``store.stored_bytes()`` / N (payload bytes) and the
  file size / N (after ``PRAGMA wal_checkpoint(TRUNCATE)``, page overhead included);
- resident memory (VmRSS of /proc/self/status) before and after parking the N runs, and
  the delta per run (the target: nothing held per parked run);
- the time to answer and resume one parked run (approve by a second principal, then
  ``resume`` to completion): the median of 20, with the two halves shown apart;
- the time to park one run (start to parked), as a by-product.

    .venv/bin/python bench/parked_runs.py [--n 10000] [--db PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from plait import Runtime, Workflow

WARMUP = 50  # parked before the baseline, so imports and caches are not counted per run
ANSWERED = 20  # runs answered and resumed for the latency median


def start() -> dict[str, Any]:
    return {"order": 42, "amount": 1999}


def finish(approved: bool) -> dict[str, Any]:
    return {"shipped": approved}


def workflow() -> Workflow:
    return (
        Workflow.new("parked")
        .node("start", tool=start)
        .node("approve", ask={"prompt": "Ship order 42?", "approval": True})
        .node("finish", tool=finish)
        .edge("start", "approve")
        .edge("approve", "finish")
    )


def rss_kib() -> int:
    """Resident set size of this process, in KiB (VmRSS of /proc/self/status)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS in /proc/self/status (Linux only)")


def settled_rss_kib() -> int:
    gc.collect()
    return rss_kib()


def file_bytes(path: Path) -> int:
    """The database file after folding the WAL back into it (plus whatever WAL is left)."""
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return sum(p.stat().st_size for p in (path, Path(f"{path}-wal")) if p.exists())


async def park(rt: Runtime, wf: Workflow, run_id: str) -> dict[str, Any]:
    result = await rt.start(wf, {}, run_id=run_id)
    assert result.status == "parked", (run_id, result.status, result.outcome)
    assert len(result.asks) == 1
    return result.asks[0]


async def bench(n: int, db_path: Path) -> dict[str, Any]:
    wf = workflow()
    wf.plan()
    figures: dict[str, Any] = {"n": n}
    with Runtime(f"sqlite:///{db_path}", principal="owner") as rt:
        for i in range(WARMUP):
            await park(rt, wf, f"warm-{i:06d}")
        bytes_before = rt.store.stored_bytes()
        file_before = file_bytes(db_path)
        rss_before = settled_rss_kib()

        asks: dict[str, str] = {}
        began = time.perf_counter()
        for i in range(n):
            run_id = f"run-{i:06d}"
            ask = await park(rt, wf, run_id)
            if i < ANSWERED:
                asks[run_id] = ask["ask_id"]
        parked_s = time.perf_counter() - began

        rss_after = settled_rss_kib()
        figures["park_ms"] = parked_s * 1000 / n
        figures["stored_per_run"] = (rt.store.stored_bytes() - bytes_before) / n
        figures["file_per_run"] = (file_bytes(db_path) - file_before) / n
        figures["rss_before_kib"] = rss_before
        figures["rss_after_kib"] = rss_after
        figures["rss_per_run"] = (rss_after - rss_before) * 1024 / n
        figures["parked_listed"] = len(rt.store.list_runs("parked")) - WARMUP

        respond_ms: list[float] = []
        resume_ms: list[float] = []
        total_ms: list[float] = []
        for run_id, ask_id in asks.items():
            t0 = time.perf_counter()
            rt.respond(run_id, ask_id, approve=True, by="approver")
            t1 = time.perf_counter()
            done = await rt.resume(run_id, workflow=wf)
            t2 = time.perf_counter()
            assert done.status == "completed", (run_id, done.status, done.outcome)
            respond_ms.append((t1 - t0) * 1000)
            resume_ms.append((t2 - t1) * 1000)
            total_ms.append((t2 - t0) * 1000)
        figures["respond_ms"] = statistics.median(respond_ms)
        figures["resume_ms"] = statistics.median(resume_ms)
        figures["answer_resume_ms"] = statistics.median(total_ms)
        figures["rss_end_kib"] = settled_rss_kib()
    return figures


def report(f: dict[str, Any]) -> None:
    rows = [
        ("parked runs", f"{f['n']:,}"),
        ("  still listed as parked", f"{f['parked_listed']:,}"),
        ("time to park one run", f"{f['park_ms']:.2f} ms"),
        ("stored_bytes() per parked run", f"{f['stored_per_run']:,.0f} B"),
        ("database file per parked run", f"{f['file_per_run']:,.0f} B"),
        ("RSS before parking", f"{f['rss_before_kib'] / 1024:,.1f} MiB"),
        ("RSS after parking", f"{f['rss_after_kib'] / 1024:,.1f} MiB"),
        ("RSS delta per parked run", f"{f['rss_per_run']:,.1f} B"),
        (f"answer + resume one run (median of {ANSWERED})", f"{f['answer_resume_ms']:.2f} ms"),
        ("  of which respond (journal the answer)", f"{f['respond_ms']:.2f} ms"),
        ("  of which resume (drive to completion)", f"{f['resume_ms']:.2f} ms"),
    ]
    width = max(len(name) for name, _ in rows)
    print(f"{'parked runs on SQLite':<{width}}  value")
    print("-" * (width + 14))
    for name, value in rows:
        print(f"{name:<{width}}  {value:>12}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000, help="runs to park (default 10,000)")
    parser.add_argument("--db", type=Path, help="SQLite file to create (default: a temp dir)")
    args = parser.parse_args()
    if args.n < ANSWERED:
        parser.error(f"--n must be at least {ANSWERED}")
    if args.db is not None:
        if args.db.exists():
            parser.error(f"{args.db} exists; give a new file")
        report(asyncio.run(bench(args.n, args.db)))
        return
    with tempfile.TemporaryDirectory(prefix="plait-parked-") as tmp:
        report(asyncio.run(bench(args.n, Path(tmp) / "parked.db")))


if __name__ == "__main__":
    main()
