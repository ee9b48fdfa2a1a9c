"""How long a person waits for the ``plait`` command (issue #22, target 4).

Each call is a fresh process, as when a person types it. plait's verbs are timed next to
the same kind of call to a minimal two-command typer application, in the same run:

- ``plait --help``  against  ``minimal --help``;
- ``plait runs --json``, ``plait asks --json`` and ``plait show RUN --json`` (on a small
  SQLite store with one finished run)  against  ``minimal hello`` (prints a line);
- ``plait asks --json`` on a copy of the committed fixture store, where five runs are
  parked (their checkpoints are read for their asks)  against  ``minimal hello``.

The target: every verb ≤ 1.5× the minimal application. The calls take turns, round after
round, and the median of ``--repeat`` rounds (after one warm-up round) is reported: the
wall time a person waits, and the CPU time of the process (user + system), which a
loaded machine disturbs less. Each ratio is against the minimal call of the same kind.

    .venv/bin/python bench/cli_start.py [--repeat 15] [--instructions] [--before OLD/src]

plait's modules are compiled to bytecode first (``compileall``, what ``pip install`` does),
as typer's already are: where ``PYTHONDONTWRITEBYTECODE`` is set, an editable checkout
would otherwise compile every module of plait from source in every call, a cost no
installed plait pays (``--no-compile`` measures that way).

``--instructions`` also counts each call's instructions under valgrind's callgrind,
which a loaded machine does not move. ``--before`` times the same verbs from another
source tree in the same rounds (a before/after on one machine state), e.g. main's:
``mkdir /tmp/old && git archive main src | tar -x -C /tmp/old`` then ``--before /tmp/old/src``.
"""

from __future__ import annotations

import argparse
import compileall
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

MINIMAL = textwrap.dedent(
    """
    import typer

    app = typer.Typer(add_completion=False)


    @app.command()
    def hello() -> None:
        \"\"\"Print a line.\"\"\"
        print("hello")


    @app.command()
    def bye() -> None:
        \"\"\"Print another line.\"\"\"
        print("bye")


    app()
    """
)

FIXTURE = Path(__file__).parents[1] / "tests" / "fixtures" / "journals" / "runs.db"
"""Runs of every kind recorded by older code, five of them parked (copied, never written)."""
RUN_ID = "bench-cli-start"
ORDER = '{"order_id": "A-1001"}'


def once(argv: list[str], env: dict[str, str] | None = None) -> tuple[float, float]:
    """Wall and CPU seconds (user + system of the child) of ``argv`` as a fresh process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, check=False, env=env)
    wall = time.perf_counter() - began
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{argv} exited {done.returncode}: {done.stderr or done.stdout}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def instructions(argv: list[str], env: dict[str, str] | None, out: Path) -> int:
    """Instructions callgrind counts for one whole process: the same on a busy machine."""
    subprocess.run(
        ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *argv],
        check=True,
        capture_output=True,
        env=env,
    )
    match = re.search(r"^summary:\s+(\d+)", out.read_text(), re.MULTILINE)
    if match is None:
        raise SystemExit(f"no summary line in {out}")
    return int(match.group(1))


def medians(
    calls: dict[str, list[str]], repeat: int, envs: dict[str, dict[str, str]]
) -> dict[str, tuple[float, float]]:
    """Median wall and CPU seconds of each call. The calls take turns, round after round
    (after one warm-up round), so a load that comes and goes weighs on all of them alike."""
    walls: dict[str, list[float]] = {name: [] for name in calls}
    cpus: dict[str, list[float]] = {name: [] for name in calls}
    for round_ in range(repeat + 1):
        for name, argv in calls.items():
            wall, cpu = once(argv, envs.get(name))
            if round_:
                walls[name].append(wall)
                cpus[name].append(cpu)
    return {n: (statistics.median(walls[n]), statistics.median(cpus[n])) for n in calls}


def seed_store(plait: str, db: str, env: dict[str, str] | None = None) -> None:
    """One finished run of the orders example, so show/runs/asks read real rows (written
    by the tree that reads them: older code does not read a newer engine epoch's run)."""
    workflow = Path(__file__).parents[1] / "examples" / "orders" / "workflow.yaml"
    subprocess.run(
        [plait, "run", str(workflow), "--db", db, "--run-id", RUN_ID, "--input", ORDER],
        check=True,
        capture_output=True,
        env=env,
    )


def compile_sources(*roots: str) -> None:
    """Bytecode for each source tree's ``plait`` package, as an installed package has it."""
    for root in roots:
        compileall.compile_dir(str(Path(root) / "plait"), quiet=1)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument(
        "--before",
        metavar="SRC",
        help="also time the verbs with PYTHONPATH=SRC (e.g. an older checkout's src/)",
    )
    parser.add_argument(
        "--no-compile",
        action="store_true",
        help="leave plait's bytecode as it is (with PYTHONDONTWRITEBYTECODE set and no"
        " __pycache__, every call compiles plait from source, as earlier rounds measured)",
    )
    parser.add_argument(
        "--instructions",
        action="store_true",
        help="also count each call's instructions once under valgrind (callgrind)",
    )
    args = parser.parse_args(argv)
    plait = str(Path(sys.executable).with_name("plait"))
    import plait as package  # the tree the plait command imports (its root is lazy)

    if not args.no_compile:
        compile_sources(str(Path(package.__file__).parents[1]), *filter(None, [args.before]))
    with tempfile.TemporaryDirectory() as tmp:
        minimal = Path(tmp, "minimal.py")
        minimal.write_text(MINIMAL)
        db = f"sqlite:///{tmp}/cli.db"
        seed_store(plait, db)
        parked = Path(tmp, "parked.db")
        shutil.copyfile(FIXTURE, parked)
        os.environ.pop("PLAIT_DB", None)
        python = sys.executable
        calls = {
            "minimal --help": [python, str(minimal), "--help"],
            "minimal hello": [python, str(minimal), "hello"],
            "plait --help": [plait, "--help"],
            "plait runs --json": [plait, "runs", "--json", "--db", db],
            "plait asks --json": [plait, "asks", "--json", "--db", db],
            "plait show RUN --json": [plait, "show", RUN_ID, "--json", "--db", db],
            "plait asks --json (parked)": [plait, "asks", "--json", "--db", f"sqlite:///{parked}"],
        }
        envs: dict[str, dict[str, str]] = {}
        if args.before:  # the same verbs from another source tree, in the same rounds
            earlier = {**os.environ, "PYTHONPATH": args.before}
            old_db = f"sqlite:///{tmp}/cli-before.db"
            seed_store(plait, old_db, earlier)
            for name in [n for n in calls if n.startswith("plait ")]:
                calls[f"before: {name}"] = [old_db if a == db else a for a in calls[name]]
                envs[f"before: {name}"] = earlier
        took = medians(calls, args.repeat, envs)
        counted = {}
        if args.instructions:
            out = Path(tmp, "callgrind.out")
            counted = {
                name: instructions(argv, envs.get(name), out) for name, argv in calls.items()
            }
    load = os.getloadavg()[0]
    print(f"CLI start, median of {args.repeat} rounds, load {load:.1f} (target: ≤ 1.5×)")
    print(f"  {'call':<38} {'wall ms':>8} {'ratio':>6} {'CPU ms':>8} {'ratio':>6}", end="")
    print(f" {'M instr':>8} {'ratio':>6}" if counted else "")
    for name, (wall, cpu) in took.items():
        base = "minimal --help" if name.endswith("--help") else "minimal hello"  # same kind
        base_wall, base_cpu = took[base]
        line = (
            f"  {name:<38} {wall * 1000:8.1f} {wall / base_wall:5.2f}×"
            f" {cpu * 1000:8.1f} {cpu / base_cpu:5.2f}×"
        )
        if counted:
            line += f" {counted[name] / 1e6:8.1f} {counted[name] / counted[base]:5.2f}×"
        print(line)


if __name__ == "__main__":
    main()
