"""What parking one run costs, in counts the machine's load does not move.

``parked_runs.py``'s workflow (``start -> approve (an ask) -> finish``) parked on a fresh
SQLite file by one ``Runtime``:

- the SQL statements and transactions of one park (SQLite's trace callback, after a few
  warm-up parks), and the stored bytes and file bytes per parked run over ``--n`` parks;
- with ``--instructions``: the instructions of one park, counted by valgrind's callgrind
  in two fresh processes parking ``--short`` and ``--long`` runs, the difference divided
  by the difference (start-up, imports and the first parks taken out).

    .venv/bin/python bench/park_cost.py [--n 500] [--instructions] [--short 20 --long 120]

For the tree before a change, run the same with ``PYTHONPATH=OLD/src``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import parked_runs  # noqa: E402  (the same workflow)


async def _park_many(db: Path, n: int, prefix: str = "run") -> None:
    from plait import Runtime

    wf = parked_runs.workflow()
    with Runtime(f"sqlite:///{db}", principal="owner") as rt:
        for i in range(n):
            await parked_runs.park(rt, wf, f"{prefix}-{i:06d}")


async def _counts(db: Path, n: int) -> dict[str, float]:
    from plait import Runtime

    wf = parked_runs.workflow()
    with Runtime(f"sqlite:///{db}", principal="owner") as rt:
        for i in range(5):
            await parked_runs.park(rt, wf, f"warm-{i}")
        statements: list[str] = []
        conn = rt.store._conn  # type: ignore[attr-defined]
        conn.set_trace_callback(statements.append)
        await parked_runs.park(rt, wf, "traced")
        conn.set_trace_callback(None)
        bytes_before = rt.store.stored_bytes()
        file_before = parked_runs.file_bytes(db)
        for i in range(n):
            await parked_runs.park(rt, wf, f"run-{i:06d}")
        stored = (rt.store.stored_bytes() - bytes_before) / n
        filed = (parked_runs.file_bytes(db) - file_before) / n
    begins = sum(1 for s in statements if s.startswith("BEGIN"))
    return {
        "statements": len(statements),
        "transactions": begins,
        "stored_per_run": stored,
        "file_per_run": filed,
    }


def _instructions(n: int) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "callgrind.out"
        subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                f"--callgrind-out-file={out}",
                sys.executable,
                __file__,
                "--child",
                str(n),
                "--db",
                str(Path(tmp) / "p.db"),
            ],
            check=True,
            capture_output=True,
            env={**os.environ, "PYTHONHASHSEED": "0"},
        )
        match = re.search(r"^summary:\s+(\d+)", out.read_text(), re.MULTILINE)
        if match is None:
            raise RuntimeError("no summary line in callgrind's output")
        return int(match.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=500, help="parks for the bytes per run")
    parser.add_argument("--instructions", action="store_true", help="count under callgrind")
    parser.add_argument("--short", type=int, default=20)
    parser.add_argument("--long", type=int, default=120)
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--db", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        asyncio.run(_park_many(Path(args.db), args.child))
        return
    with tempfile.TemporaryDirectory() as tmp:
        counts = asyncio.run(_counts(Path(tmp) / "p.db", args.n))
    print(f"SQL statements per park        {counts['statements']:>10}")
    print(f"transactions per park          {counts['transactions']:>10}")
    print(f"stored_bytes() per parked run  {counts['stored_per_run']:>10,.0f} B")
    print(f"database file per parked run   {counts['file_per_run']:>10,.0f} B")
    if args.instructions:
        if shutil.which("valgrind") is None:
            sys.exit("valgrind is not on the PATH")
        short, long = _instructions(args.short), _instructions(args.long)
        per = (long - short) / (args.long - args.short)
        print(f"instructions per park          {per / 1e6:>10.2f} M")


if __name__ == "__main__":
    main()
