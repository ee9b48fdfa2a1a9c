"""What ``plait verify`` costs next to the drive it re-does (issue #22, target 3).

1. **Re-drive vs drive, per superstep:** one run of an N-step counting loop
   (``step -> step`` while ``i < N``, default 2,000) driven on a fresh SQLite file, then
   verified (``Runtime.verify``, what ``plait verify RUN`` calls): the median of
   ``--repeats`` of each, as µs per superstep and the ratio (target: ≤ 0.2×).
2. **``verify --all`` on every core:** ``--runs`` runs of a 200-step loop, verified by
   ``plait verify --all --json`` (runs dealt out to one ``plait verify`` process per core
   after a one-second head start) against the same verbs in one process (``here`` only):
   wall seconds of each and the speed-up, with the number of cores.

    .venv/bin/python bench/verify_speed.py [--steps 2000] [--runs 40] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from durable_loop import plait_loop as loop  # the same counting loop
from plait import Runtime
from plait.cli.verify_all import cores, verify_all
from plait.driver.verbs import verify_report


def drive_and_verify(steps: int, repeats: int) -> tuple[float, float]:
    """Median µs per superstep of the drive and of its verify."""
    drives, verifies = [], []
    for _ in range(repeats):
        with tempfile.TemporaryDirectory() as tmp, Runtime(f"sqlite:///{tmp}/v.db") as rt:
            began = time.perf_counter()
            result = rt.run_sync(loop(steps), {"i": 0}, run_id="r")
            drove = time.perf_counter() - began
            began = time.perf_counter()
            report = rt.verify("r")
            verified = time.perf_counter() - began
            assert result.status == "completed" and report.verified
            supersteps = result.spent["supersteps"]
            drives.append(drove * 1e6 / supersteps)
            verifies.append(verified * 1e6 / supersteps)
    return statistics.median(drives), statistics.median(verifies)


def verify_store(runs: int, steps: int) -> tuple[float, float]:
    """Wall seconds of ``verify --all`` in one process and on every core."""
    with tempfile.TemporaryDirectory() as tmp:
        db = f"sqlite:///{Path(tmp, 'all.db')}"
        with Runtime(db) as rt:
            for index in range(runs):
                rt.run_sync(loop(steps), {"i": 0}, run_id=f"r{index:04d}")
            ids = [i.run_id for i in rt.store.list_runs()]

            def here(run_id: str) -> dict[str, Any]:
                return verify_report(rt, run_id)

            began = time.perf_counter()
            alone = verify_all(db, ids, None, here, processes=1)
            one = time.perf_counter() - began
            began = time.perf_counter()
            spread = verify_all(db, ids, None, here)
            every = time.perf_counter() - began
        assert alone == spread and all(r["verified"] for r in alone)
    return one, every


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    drive, verify = drive_and_verify(args.steps, args.repeats)
    print(f"verify: a {args.steps}-step loop, median of {args.repeats} (target: ≤ 0.2×)")
    print(f"  drive   {drive:8.1f} µs/superstep")
    print(f"  verify  {verify:8.1f} µs/superstep   {verify / drive:.2f}× the drive")
    one, every = verify_store(args.runs, 200)
    load = os.getloadavg()[0]
    print(f"verify --all: {args.runs} runs of 200 steps, {cores()} cores, load {load:.1f}")
    print(f"  one process   {one:6.2f} s")
    print(f"  every core    {every:6.2f} s   {one / every:.2f}× faster")


if __name__ == "__main__":
    main()
