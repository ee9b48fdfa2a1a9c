"""How long a person waits for the ``plait`` command (issue #22, target 4).

Each call is a fresh process, as when a person types it. plait's verbs are timed next to
the same kind of call to a minimal two-command typer application, in the same run:

- ``plait --help``  against  ``minimal --help``;
- ``plait runs --json``, ``plait asks --json`` and ``plait show RUN --json`` (on a small
  SQLite store with one finished run)  against  ``minimal hello`` (prints a line).

The target: every verb ≤ 1.5× the minimal application. The calls take turns, round after
round, and the median of ``--repeat`` rounds (after one warm-up round) is reported: the
wall time a person waits, and the CPU time of the process (user + system), which a
loaded machine disturbs less. Each ratio is against the minimal call of the same kind.

    .venv/bin/python bench/cli_start.py [--repeat 15]
"""

from __future__ import annotations

import argparse
import os
import resource
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

RUN_ID = "bench-cli-start"
ORDER = '{"order_id": "A-1001"}'


def once(argv: list[str]) -> tuple[float, float]:
    """Wall and CPU seconds (user + system of the child) of ``argv`` as a fresh process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - began
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{argv} exited {done.returncode}: {done.stderr or done.stdout}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def medians(calls: dict[str, list[str]], repeat: int) -> dict[str, tuple[float, float]]:
    """Median wall and CPU seconds of each call. The calls take turns, round after round
    (after one warm-up round), so a load that comes and goes weighs on all of them alike."""
    walls: dict[str, list[float]] = {name: [] for name in calls}
    cpus: dict[str, list[float]] = {name: [] for name in calls}
    for round_ in range(repeat + 1):
        for name, argv in calls.items():
            wall, cpu = once(argv)
            if round_:
                walls[name].append(wall)
                cpus[name].append(cpu)
    return {n: (statistics.median(walls[n]), statistics.median(cpus[n])) for n in calls}


def seed_store(plait: str, db: str) -> None:
    """One finished run of the orders example, so show/runs/asks read real rows."""
    workflow = Path(__file__).parents[1] / "examples" / "orders" / "workflow.yaml"
    subprocess.run(
        [plait, "run", str(workflow), "--db", db, "--run-id", RUN_ID, "--input", ORDER],
        check=True,
        capture_output=True,
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args(argv)
    plait = str(Path(sys.executable).with_name("plait"))
    with tempfile.TemporaryDirectory() as tmp:
        minimal = Path(tmp, "minimal.py")
        minimal.write_text(MINIMAL)
        db = f"sqlite:///{tmp}/cli.db"
        seed_store(plait, db)
        os.environ.pop("PLAIT_DB", None)
        python = sys.executable
        calls = {
            "minimal --help": [python, str(minimal), "--help"],
            "minimal hello": [python, str(minimal), "hello"],
            "plait --help": [plait, "--help"],
            "plait runs --json": [plait, "runs", "--json", "--db", db],
            "plait asks --json": [plait, "asks", "--json", "--db", db],
            "plait show RUN --json": [plait, "show", RUN_ID, "--json", "--db", db],
        }
        took = medians(calls, args.repeat)
    load = os.getloadavg()[0]
    print(f"CLI start, median of {args.repeat} rounds, load {load:.1f} (target: ≤ 1.5×)")
    print(f"  {'call':<24} {'wall ms':>8} {'ratio':>6} {'CPU ms':>8} {'ratio':>6}")
    for name, (wall, cpu) in took.items():
        base = "minimal --help" if name.endswith("--help") else "minimal hello"
        base_wall, base_cpu = took[base]
        print(
            f"  {name:<24} {wall * 1000:8.1f} {wall / base_wall:5.2f}×"
            f" {cpu * 1000:8.1f} {cpu / base_cpu:5.2f}×"
        )


if __name__ == "__main__":
    main()
