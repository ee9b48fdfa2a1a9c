"""Schedule slots per second sustained by one worker, on SQLite and on PostgreSQL.

``K`` schedules, each ``--every 1s`` (``overlap: allow``), on a fresh store; the worker's
clock is moved one second at a time (``Runtime(clock=...)``: no waiting for real seconds),
so every step makes ``K`` slots due at once. Two figures per store:

- **fire only**: ``scheduling.fire_due`` alone, what a worker does before it claims: per
  slot, the workflow file (cached), the manifest, and ONE transaction holding the slot
  row, the run row, its manifest and the schedule's next slot. Slots per second.
- **fire and drive**: one ``Worker(once=True)`` (what ``plait worker --once`` runs) per
  step: it fires the ``K`` slots, claims the ``K`` queued runs and drives each (one tool
  node) to completion, ``--concurrency`` at a time. Slots per second, end to end.

    .venv/bin/python bench/schedules.py [--schedules K] [--steps T] [--concurrency C] [--pg URL]

PostgreSQL: a fresh database on the server ``--pg`` names (default: the local server,
user postgres), dropped afterwards. DBOS's ``@DBOS.scheduled`` fires one workflow per
cron slot per process-wide scheduler thread; it has no equivalent of a slot throughput to
set beside this, so no peer is measured here.
"""

from __future__ import annotations

import argparse
import os
import secrets
import statistics
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from plait import Runtime
from plait.driver import scheduling
from plait.driver.worker import Worker
from plait.workflow.schedule_spec import make_spec

T0 = 1_800_000_000_000
FLOW = """name: tick
nodes:
  - id: tick
    tool: tick
tools:
  tick: {python: "benchticks:tick"}
"""
TOOLS = "def tick() -> dict:\n    return {'ticked': True}\n"


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> int:
        return self.now


def measure(db: str, folder: Path, schedules: int, steps: int, concurrency: int) -> dict:
    flow = folder / "tick.yaml"
    flow.write_text(FLOW)
    (folder / "benchticks.py").write_text(TOOLS)
    clock = Clock()
    with Runtime(db, clock=clock, principal="bench") as rt:
        for i in range(schedules):
            spec = make_spec(f"s{i:04d}", str(flow), every="1s", overlap="allow")
            scheduling.add_schedule(rt, spec)
        worker = Worker(rt, once=True, concurrency=concurrency)  # caches the file, as a worker
        fire_rates = []
        for _ in range(steps):  # fire only
            clock.now += 1000
            start = time.perf_counter()
            scheduling.fire_due(rt)
            fire_rates.append(schedules / (time.perf_counter() - start))
            worker.run()  # drain (not timed) so the next step starts clean
            worker = Worker(rt, once=True, concurrency=concurrency)
        drive_rates = []
        for _ in range(steps):  # fire and drive
            clock.now += 1000
            start = time.perf_counter()
            report = Worker(rt, once=True, concurrency=concurrency).run()
            elapsed = time.perf_counter() - start
            assert report.statuses["completed"] == schedules, report.to_json()
            drive_rates.append(schedules / elapsed)
        fired = len(scheduling.schedules_of(rt).schedule_slots())
        assert fired == schedules * steps * 2, fired
    return {
        "fire_only_slots_per_s": statistics.median(fire_rates),
        "fire_and_drive_slots_per_s": statistics.median(drive_rates),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--schedules", type=int, default=200)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument(
        "--pg",
        default=os.environ.get("PLAIT_TEST_POSTGRES", "postgresql://postgres@127.0.0.1/postgres"),
    )
    args = parser.parse_args()
    print(
        f"{args.schedules} schedules every 1s, {args.steps} steps, concurrency {args.concurrency}"
    )
    print(f"cpus {os.cpu_count()}, load {os.getloadavg()[0]:.2f}, python {sys.version.split()[0]}")
    with tempfile.TemporaryDirectory() as tmp:
        sqlite = measure(f"sqlite:///{tmp}/plait.db", Path(tmp), args.schedules, args.steps,
                         args.concurrency)  # fmt: skip
    print(f"sqlite:     {sqlite}")
    try:
        import psycopg
    except ImportError:
        print("postgresql: not measured (psycopg is not installed)")
        return
    name = f"bench_sched_{secrets.token_hex(3)}"
    try:
        with psycopg.connect(args.pg, autocommit=True) as admin:
            admin.execute(f'CREATE DATABASE "{name}"')
    except psycopg.Error as exc:
        print(f"postgresql: not measured ({exc})")
        return
    parts = urlsplit(args.pg)
    url = urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, ""))
    try:
        with tempfile.TemporaryDirectory() as tmp:
            pg = measure(url, Path(tmp), args.schedules, args.steps, args.concurrency)
        print(f"postgresql: {pg}")
    finally:
        with psycopg.connect(args.pg, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


if __name__ == "__main__":
    main()
