"""Instructions per superstep of the durable loop, counted by valgrind: plait and LangGraph.

Wall time on a shared machine moves from run to run; an instruction count does not: the
same program on the same input executes the same instructions whatever else the machine
is doing. Each side runs the counting loop of ``durable_loop.py`` (a fresh SQLite file,
WAL, ``synchronous=NORMAL``; LangGraph with ``SqliteSaver`` and ``durability="sync"``) in
a fresh process under ``valgrind --tool=callgrind``, once with a short and once with a
long loop; the difference of the two totals divided by the difference in supersteps is
the cost of one superstep, with interpreter start-up, imports and the first run's set-up
taken out.

    .venv/bin/python bench/instructions.py [--short 200] [--long 1000] [--side plait]
        [--side floor]  # the hand-written floor (durable_loop.floor_loop_once)
        [--side verify]  # Runtime.verify of a loop driven into a file beforehand

``--side verify`` counts a re-drive (issue #22 target 3): the loop is driven into a file
by a process that is not counted, then the counted process opens that file and calls
``Runtime.verify`` on the run in one process (``workers=1``: callgrind does not follow the
children that verify on every core forks); its figure is set beside ``plait``'s, the drive.

Needs ``valgrind`` on the PATH. Takes a few minutes: callgrind runs Python ~50x slower.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
SIDES = ("plait", "langgraph", "floor", "verify")
GROW_AT = (100, 200, 900, 1000)
"""``--grow``: lengths of the growing loop counted; per-step slopes between them."""


def child(side: str, n: int, path: str | None = None) -> None:
    """Run one loop of ``n`` iterations on a fresh file (the measured process); for
    ``verify``, verify the run the file at ``path`` holds instead."""
    sys.path.insert(0, str(HERE))
    import durable_loop

    if side == "verify":
        from plait import Runtime

        assert path is not None
        with Runtime(f"sqlite:///{path}", principal="bench") as rt:
            (run,) = rt.store.list_runs()
            report = rt.verify(run.run_id, workers=1)  # one process: callgrind counts it all
        assert report.verified, report
        return
    if side == "drive-into":  # not counted: the run ``verify`` then re-drives
        assert path is not None
        _, _, rt, _ = durable_loop.run_plait(durable_loop.plait_loop(n), Path(path))
        rt.close()
        return
    with tempfile.TemporaryDirectory() as tmp:
        if side == "plait-grow":
            workflow = durable_loop.plait_grow(n, [])
            _, _, rt, _ = durable_loop.run_plait(workflow, Path(tmp) / "p.db")
            rt.close()
        elif side == "plait":
            _, _, rt, _ = durable_loop.run_plait(durable_loop.plait_loop(n), Path(tmp) / "p.db")
            rt.close()
        elif side == "floor":  # the hand-written floor of durable_loop.py (no engine)
            durable_loop.floor_loop_once(n)
        else:
            _, conn = durable_loop.run_langgraph(n, Path(tmp) / "l.db", None)
            conn.close()


def total_instructions(side: str, n: int, out: Path) -> int:
    """Instructions callgrind counted for one whole process running a loop of ``n``
    (``verify``: verifying a loop of ``n`` driven beforehand, outside the count)."""
    extra: list[str] = []
    if side == "verify":
        db = out.parent / f"{out.name}.db"
        subprocess.run(
            [sys.executable, __file__, "--child", "drive-into", str(n), str(db)], check=True
        )
        extra = [str(db)]
    subprocess.run(
        ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
         sys.executable, __file__, "--child", side, str(n), *extra],
        check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    match = re.search(r"^summary:\s+(\d+)", out.read_text(), re.MULTILINE)
    if match is None:
        raise SystemExit(f"no summary line in {out}")
    return int(match.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--short", type=int, default=200, help="iterations of the short loop")
    parser.add_argument("--long", type=int, default=1000, help="iterations of the long loop")
    parser.add_argument("--side", choices=SIDES, action="append", help="only this side")
    parser.add_argument("--child", nargs="+", metavar="SIDE N [PATH]", help=argparse.SUPPRESS)
    parser.add_argument(
        "--grow",
        action="store_true",
        help="plait's growing loop (1 KB more context a step) instead: instructions per step"
        f" between {GROW_AT} steps, the last slope against the first",
    )
    args = parser.parse_args()
    if args.child:
        child(args.child[0], int(args.child[1]), *args.child[2:])
        return
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not on the PATH (Debian: apt install valgrind)")
    if args.grow:
        grow()
        return
    per_step: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for side in args.side or SIDES:
            short = total_instructions(side, args.short, Path(tmp) / f"{side}.short")
            long = total_instructions(side, args.long, Path(tmp) / f"{side}.long")
            per_step[side] = (long - short) / (args.long - args.short)
            print(f"  {side:10s} {per_step[side] / 1e6:6.3f} M instructions per superstep")
    if "plait" in per_step and "langgraph" in per_step:
        print(f"  ratio LangGraph/plait: {per_step['langgraph'] / per_step['plait']:.2f}x")
    if "plait" in per_step and "floor" in per_step:
        print(f"  ratio plait/floor: {per_step['plait'] / per_step['floor']:.2f}x")
    if "plait" in per_step and "verify" in per_step:
        print(f"  ratio verify/plait: {per_step['verify'] / per_step['plait']:.2f}x")


def grow() -> None:
    """Instructions per step of the growing loop: steps 100-200 against 900-1000."""
    with tempfile.TemporaryDirectory() as tmp:
        total = {n: total_instructions("plait-grow", n, Path(tmp) / f"g{n}") for n in GROW_AT}
    a, b, c, d = GROW_AT
    early, late = (total[b] - total[a]) / (b - a), (total[d] - total[c]) / (d - c)
    print(f"  growing loop: steps {a}-{b} {early / 1e6:6.3f} M instructions per step,")
    print(f"  steps {c}-{d} {late / 1e6:6.3f} M; last/early {late / early:.2f}x")


if __name__ == "__main__":
    main()
