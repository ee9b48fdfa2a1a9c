"""The PostgreSQL server's own instructions per superstep and per worker run (callgrind).

Timing the server on a shared machine moves with the load; counting does not. Point
``--pg`` at a private cluster run under callgrind, so that every backend it forks writes
its own count when it exits (autovacuum off: nothing else forks or exits meanwhile)::

    initdb -D /tmp/pgcg -A trust -U postgres        # as the postgres user
    valgrind --tool=callgrind --callgrind-out-file=/tmp/cgout/cg.%p.out \\
        postgres -D /tmp/pgcg -p 5482 -c autovacuum=off -c fsync=off
    .venv/bin/python bench/pg_server_instructions.py \\
        --pg postgresql://postgres@127.0.0.1:5482/postgres --out /tmp/cgout

Each measure sums the counts of the backends that exited during one phase (one admin
connection stays open throughout, so its backend is never among them):

- ``superstep``: bench/workers.py's counting loop (``plait_superstep_ms``) at S and at
  5S steps, each on a fresh database; the difference over 4S is one superstep's commit;
- ``worker``: N and 4N three-step runs queued (not counted), then one ``Worker(once=True)``
  (bench/worker_instructions.py's drive, ``--concurrency`` in flight) drives them; the
  difference over 3N is one run's server work (claim, manifest, journal, commits).
  ``--analyze`` runs ANALYZE once the runs are queued, as autovacuum's autoanalyze would
  on a production server: on one that never analyzes (autovacuum off), the claim's plan
  reads every unfinished run at every claim (docs/benchmarks.md, sixth round "pg").

The client is this process (its instructions are bench/instructions.py's and
bench/worker_instructions.py's business); only the server is counted here.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def children(postmaster: int) -> set[int]:
    """The server's processes (the postmaster's children) alive now."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat[stat.rindex(")") + 2 :].split()[1]) == postmaster:
                found.add(int(entry.name))
    return found


def quiet(postmaster: int, steady: set[int], out: Path) -> set[str]:
    """Wait until only the ``steady`` processes are left and every count file is whole;
    the count files then."""
    for _ in range(1200):
        if children(postmaster) <= steady:
            break
        time.sleep(0.1)
    else:
        raise RuntimeError("the server's backends did not exit")
    names = set()
    for path in out.glob("cg.*.out"):
        if Path(f"/proc/{path.name.split('.')[1]}").exists():
            continue  # a process still running (the postmaster): not counted
        for _ in range(600):  # a backend writes its file as it exits
            if re.search(r"^totals: \d+", path.read_text(errors="replace"), re.M):
                break
            time.sleep(0.1)
        else:
            raise RuntimeError(f"{path} was never completed")
        names.add(path.name)
    return names


def measured(postmaster: int, steady: set[int], out: Path, phase: Callable[[], None]) -> int:
    """The server instructions of ``phase``: every backend that exited during it (and
    nothing else exits while the server is quiet: autovacuum off)."""
    known = quiet(postmaster, steady, out)
    phase()
    total = 0
    for name in quiet(postmaster, steady, out) - known:
        text = (out / name).read_text(errors="replace")
        found = re.search(r"^totals: (\d+)", text, re.M)
        assert found is not None
        total += int(found.group(1))
    return total


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pg", required=True, help="a callgrind-run cluster (see above)")
    parser.add_argument("--out", required=True, help="its --callgrind-out-file directory")
    parser.add_argument("--scenario", choices=("superstep", "worker"), action="append")
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument(
        "--analyze", action="store_true", help="ANALYZE the queued runs (as autovacuum would)"
    )
    args = parser.parse_args()
    os.environ["PLAIT_BENCH_PG"] = args.pg
    import psycopg

    import worker_instructions
    import workers as bench

    out = Path(args.out)
    scenarios = args.scenario or ["superstep", "worker"]
    with psycopg.connect(args.pg, autocommit=True) as admin, tempfile.TemporaryDirectory() as tmp:
        row = admin.execute(
            "SELECT pid FROM pg_stat_activity WHERE backend_type = 'checkpointer'"
        ).fetchone()
        stat = Path(f"/proc/{row[0]}/stat").read_text()
        postmaster = int(stat[stat.rindex(")") + 2 :].split()[1])
        steady = children(postmaster)  # the server's own processes and this connection
        workdir = Path(tmp)
        (workdir / "benchtools.py").write_text(bench.TOOLS)
        (workdir / "flow.yaml").write_text(bench.FLOW)

        def loop(steps: int) -> int:
            dbname, url = bench.create_database("scg")
            try:
                return measured(
                    postmaster, steady, out, lambda: bench.plait_superstep_ms(url, steps)
                )
            finally:
                bench.drop_database(dbname)

        def worker(runs: int) -> int:
            dbname, url = bench.create_database("wcg")
            try:
                worker_instructions.queue(url, runs, workdir)
                if args.analyze:  # what autovacuum's autoanalyze gives the planner
                    with psycopg.connect(url, autocommit=True) as conn:
                        conn.execute("ANALYZE")
                return measured(
                    postmaster,
                    steady,
                    out,
                    lambda: worker_instructions.drive(
                        url, str(workdir), profile=False, concurrency=args.concurrency
                    ),
                )
            finally:
                bench.drop_database(dbname)

        if "superstep" in scenarios:
            short, long = args.steps, 5 * args.steps
            a, b = loop(short), loop(long)
            print(f"superstep: S={short} {a:,}  S={long} {b:,}")
            print(f"  server per superstep: {(b - a) / (long - short) / 1e6:.3f} M")
        if "worker" in scenarios:
            short, long = args.runs, 4 * args.runs
            a, b = worker(short), worker(long)
            print(f"worker (concurrency {args.concurrency}): N={short} {a:,}  N={long} {b:,}")
            print(f"  server per run: {(b - a) / (long - short) / 1e6:.3f} M")


if __name__ == "__main__":
    main()
