"""A worker's client cost per run on PostgreSQL, in instructions (callgrind) or a profile.

bench/workers.py's three-step run: N runs queued (not counted, another process), then one
process runs ``Worker(once=True)`` (``--concurrency`` runs in flight, 1 by default) under
callgrind. The difference between N = SHORT and N = LONG, divided by LONG - SHORT, is what
one more run costs the client, whatever the process's start-up and imports cost::

    .venv/bin/python bench/worker_instructions.py [--short 20] [--long 100]
    .venv/bin/python bench/worker_instructions.py --profile 200   # cProfile, top entries

Instruction counts do not move with the machine's load; the server's work is not in them.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import workers as bench  # noqa: E402  (the same flow, tools and databases)


def queue(url: str, runs: int, workdir: Path) -> None:
    """N runs queued on a fresh database (``Runtime.enqueue``), in this process."""
    bench.prepare("plait", url, runs, workdir)


def drive(url: str, workdir: str, profile: bool, concurrency: int = 1) -> None:
    """One ``Worker(once=True)`` over the queued runs (the measured process)."""
    sys.path.insert(0, workdir)
    import benchtools  # noqa: F401

    from plait import Runtime
    from plait.driver.worker import Worker

    with Runtime(url, principal="bench") as rt:
        worker = Worker(rt, concurrency=concurrency, once=True)
        if not profile:
            report = worker.run()
        else:
            import cProfile
            import pstats

            prof = cProfile.Profile()
            drive_one = worker._drive  # drives run in a pool thread: profile them there

            def profiled(claim: object) -> tuple[str, int]:
                prof.enable()
                try:
                    return drive_one(claim)  # type: ignore[arg-type]
                finally:
                    prof.disable()

            worker._drive = profiled  # type: ignore[method-assign]
            report = worker.run()
            stats = pstats.Stats(prof).sort_stats("cumulative")
            stats.print_stats(60)
            pstats.Stats(prof).sort_stats("tottime").print_stats(40)
        if report.errors or sum(report.statuses.values()) == 0:
            raise RuntimeError(f"worker: {report.errors[:3]} {report.statuses}")


def instructions(url: str, workdir: Path, runs: int, concurrency: int) -> int:
    """Callgrind's instruction count of a process driving ``runs`` queued runs."""
    dbname, db = bench.create_database("wins")
    try:
        queue(db, runs, workdir)
        out = workdir / f"cg.{runs}"
        cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"]
        cmd += [sys.executable, __file__, "--child", db, "--workdir", str(workdir)]
        cmd += ["--concurrency", str(concurrency)]
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise RuntimeError(done.stderr[-3000:])
        found = re.search(r"Collected : (\d+)", done.stderr)
        if found is None:
            raise RuntimeError(done.stderr[-3000:])
        return int(found.group(1))
    finally:
        bench.drop_database(dbname)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--short", type=int, default=20)
    parser.add_argument("--long", type=int, default=100)
    parser.add_argument("--profile", type=int, default=0)
    parser.add_argument("--concurrency", type=int, default=1, help="runs in flight")
    parser.add_argument("--child")
    parser.add_argument("--workdir")
    args = parser.parse_args()
    if args.child:
        drive(args.child, args.workdir, profile=False, concurrency=args.concurrency)
        return
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        (workdir / "benchtools.py").write_text(bench.TOOLS)
        (workdir / "flow.yaml").write_text(bench.FLOW)
        if args.profile:
            dbname, db = bench.create_database("wprof")
            try:
                queue(db, args.profile, workdir)
                drive(db, str(workdir), profile=True)
            finally:
                bench.drop_database(dbname)
            return
        short = instructions(bench.ADMIN_URL, workdir, args.short, args.concurrency)
        long = instructions(bench.ADMIN_URL, workdir, args.long, args.concurrency)
        per_run = (long - short) / (args.long - args.short)
        print(f"N={args.short}: {short:,}  N={args.long}: {long:,}")
        print(f"per run: {per_run / 1e6:.2f} M instructions")


if __name__ == "__main__":
    main()
