"""What ``plait verify`` costs next to the drive it re-does (issue #22, target 3).

1. **Re-drive vs drive, per superstep:** one run of an N-step counting loop
   (``step -> step`` while ``i < N``, default 2,000) driven on a fresh SQLite file, then
   verified (``Runtime.verify``, what ``plait verify RUN`` calls) in one process
   (``workers=1``) and on every core (the default: the run cut into segments, one forked
   child each but the first): the median of ``--repeats`` of each, as µs per superstep and
   the ratio (target: ≤ 0.2×), and the CPU time of the latter here and in its children.
2. **``verify --all`` on every core:** ``--runs`` runs of an ``--all-steps`` loop (by
   default a store one process verifies in several seconds, well past the one-second head
   start), verified by ``verify_all`` (``plait verify --all``: runs dealt out to ``plait
   verify`` child processes after the head start) against the same verbs in one process
   (each run with ``workers=1``: no run split over the cores either):
   wall seconds of each, the speed-up, with the number of cores; the CPU seconds of each
   (children included: what spreading costs, whatever the machine's load); how many runs this
   process verified in its head start and how many each child got; what starting one
   child costs (a ``plait verify`` of a one-step run, start to report).

    .venv/bin/python bench/verify_speed.py [--steps 2000] [--runs 100] [--all-steps 2000]
        [--repeats 3] [--only drive|all]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from durable_loop import plait_loop as loop  # the same counting loop
from plait import Runtime
from plait.cli import verify_all as spread_module
from plait.cli.verify_all import CHILD, cores, verify_all
from plait.driver.verbs import verify_report


def drive_and_verify(steps: int, repeats: int) -> dict[str, float]:
    """Median µs per superstep of the drive, of its verify in one process (``workers=1``)
    and on every core (the default), and the CPU µs per superstep of the latter in this
    process and in its children."""
    found: dict[str, list[float]] = {"drive": [], "one": [], "every": [], "cpu": [], "kids": []}
    for _ in range(repeats):
        with tempfile.TemporaryDirectory() as tmp, Runtime(f"sqlite:///{tmp}/v.db") as rt:
            began = time.perf_counter()
            result = rt.run_sync(loop(steps), {"i": 0}, run_id="r")
            drove = time.perf_counter() - began
            assert result.status == "completed"
            per_step = 1e6 / result.spent["supersteps"]
            found["drive"].append(drove * per_step)
            for name, workers in (("one", 1), ("every", None)):
                began, mine, kids = time.perf_counter(), _cpu(SELF), _cpu(CHILDREN)
                report = rt.verify("r", workers=workers)
                found[name].append((time.perf_counter() - began) * per_step)
                assert report.verified
            found["cpu"].append((_cpu(SELF) - mine) * per_step)
            found["kids"].append((_cpu(CHILDREN) - kids) * per_step)
    return {name: statistics.median(values) for name, values in found.items()}


SELF, CHILDREN = resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN


def _cpu(who: int) -> float:
    """CPU seconds (user and system) of this process, or of its children that ended."""
    used = resource.getrusage(who)
    return used.ru_utime + used.ru_stime


def verify_store(runs: int, steps: int) -> dict[str, Any]:
    """Wall seconds of ``verify --all`` in one process and on every core, and where the
    runs went: verified here (the head start) and dealt to each child."""
    with tempfile.TemporaryDirectory() as tmp:
        db = f"sqlite:///{Path(tmp, 'all.db')}"
        with Runtime(db) as rt:
            for index in range(runs):
                rt.run_sync(loop(steps), {"i": 0}, run_id=f"r{index:04d}")
            rt.run_sync(loop(1), {"i": 0}, run_id="tiny")
            ids = [i.run_id for i in rt.store.list_runs() if i.run_id != "tiny"]
            verified_here: list[str] = []

            def here(run_id: str) -> dict[str, Any]:
                verified_here.append(run_id)
                return verify_report(rt, run_id)

            def in_one_process(run_id: str) -> dict[str, Any]:  # no run split over cores
                return verify_report(rt, run_id, workers=1)

            began, cpu = time.perf_counter(), _cpu_seconds()
            alone = verify_all(db, ids, None, in_one_process, processes=1)
            one, one_cpu = time.perf_counter() - began, _cpu_seconds() - cpu
            verified_here.clear()
            batches = _dealt_batches()
            began, cpu = time.perf_counter(), _cpu_seconds()
            spread = verify_all(db, ids, None, here)
            every, every_cpu = time.perf_counter() - began, _cpu_seconds() - cpu
            start = _child_start(db)
        assert alone == spread and all(r["verified"] for r in alone)
    return {"one": one, "every": every, "here": len(verified_here), "one_cpu": one_cpu,
            "every_cpu": every_cpu, "batches": [len(b) for b in batches],
            "child_start": start}  # fmt: skip


def _cpu_seconds() -> float:
    """CPU seconds of this process and of its children that ended: what verifying cost
    in all, whatever else the machine ran meanwhile."""
    return _cpu(SELF) + _cpu(CHILDREN)


def _dealt_batches() -> list[list[str]]:
    """The batches ``verify_in_processes`` deals out next (recorded as it deals them)."""
    dealt: list[list[str]] = []
    deal = spread_module.verify_in_processes

    def recording(db: str, run_ids: Any, *args: Any, **kwargs: Any) -> Any:
        count = min(len(run_ids), args[1])  # processes
        dealt.extend(list(run_ids[i::count]) for i in range(count))
        spread_module.verify_in_processes = deal
        return deal(db, run_ids, *args, **kwargs)

    spread_module.verify_in_processes = recording
    return dealt


def _child_start(db: str) -> float:
    """Wall seconds of one ``plait verify`` child verifying a one-step run: what starting
    a child costs before it verifies anything (median of 3)."""
    env = {**os.environ, "PLAIT_DB": db}
    argv = [sys.executable, "-c", CHILD, "verify", "tiny", "--json"]
    times = []
    for _ in range(3):
        began = time.perf_counter()
        subprocess.run(argv, env=env, check=True, capture_output=True)
        times.append(time.perf_counter() - began)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--all-steps", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--only", choices=("drive", "all"))
    args = parser.parse_args(argv)
    if args.only != "all":
        found = drive_and_verify(args.steps, args.repeats)
        drive, one, every = found["drive"], found["one"], found["every"]
        print(f"verify: a {args.steps}-step loop, median of {args.repeats} (target: ≤ 0.2×),"
              f" {cores()} cores, load {os.getloadavg()[0]:.1f}")  # fmt: skip
        print(f"  drive          {drive:8.1f} µs/superstep")
        print(f"  verify, 1 core {one:8.1f} µs/superstep   {one / drive:.2f}× the drive")
        print(f"  verify, every  {every:8.1f} µs/superstep   {every / drive:.2f}× the drive")
        print(f"  CPU of verify on every core: {found['cpu']:.1f} µs/superstep here,"
              f" {found['kids']:.1f} in its children")  # fmt: skip
    if args.only == "drive":
        return
    found = verify_store(args.runs, args.all_steps)
    one, every = found["one"], found["every"]
    load = os.getloadavg()[0]
    print(f"verify --all: {args.runs} runs of {args.all_steps} steps, {cores()} cores,"
          f" load {load:.1f}")  # fmt: skip
    print(f"  one process   {one:6.2f} s")
    print(f"  every core    {every:6.2f} s   {one / every:.2f}× faster")
    print(f"  CPU in all    {found['one_cpu']:6.2f} s one process,"
          f" {found['every_cpu']:6.2f} s every core (children included)")  # fmt: skip
    print(f"  runs verified in the head start: {found['here']}; dealt to children:"
          f" {found['batches']}; a child's start: {found['child_start']:.2f} s")  # fmt: skip


if __name__ == "__main__":
    main()
