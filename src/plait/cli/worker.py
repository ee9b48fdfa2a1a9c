"""``plait worker`` and ``plait gc``: operating a shared store (docs/architecture.md §11)."""

from __future__ import annotations

import os
import re
import signal
from types import FrameType
from typing import Annotated

import typer

from plait.cli.common import DbOption, JsonOption, runtime
from plait.cli.output import EXIT_OK, Output
from plait.core.errors import PlaitError
from plait.driver.worker import DEFAULT_POLL_MS, Worker, collect_garbage
from plait.workflow.checks import MAX_SECONDS

_UNITS_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000}
_DURATION = re.compile(r"^\s*(\d+)\s*(ms|s|m|h|d|w)\s*$")


def parse_duration(text: str) -> int:
    """``30d``, ``12h``, ``15m``, ``45s``, ``500ms``, ``2w`` -> milliseconds (PLAIT-E019)."""
    match = _DURATION.match(text)
    if match is None:
        raise PlaitError(
            "E019",
            f"--older-than {text!r}: expected a number and a unit (ms, s, m, h, d, w),"
            " like 30d or 12h",
        )
    ms = int(match.group(1)) * _UNITS_MS[match.group(2)]
    if ms > MAX_SECONDS * 1000:  # the store compares it with times kept as 64-bit integers
        raise PlaitError("E019", f"--older-than {text!r}: at most {MAX_SECONDS}s")
    return ms


def worker(
    concurrency: Annotated[
        int, typer.Option("--concurrency", metavar="N", help="Runs driven at once.")
    ] = 4,
    poll_ms: Annotated[
        int,
        typer.Option(
            "--poll-ms",
            metavar="MS",
            help="Claim at least this often (notifications wake a PostgreSQL worker sooner).",
        ),
    ] = DEFAULT_POLL_MS,
    once: Annotated[
        bool, typer.Option("--once", help="Drain what is runnable now, then exit.")
    ] = False,
    db: DbOption = None,
    json_output: JsonOption = False,
) -> None:
    """Claim runnable runs and drive them: queued, answered, due, or abandoned by a dead worker.

    SIGTERM (or Ctrl-C) stops claiming and lets the runs in flight finish or park; a
    second one exits at once (their leases lapse and another worker takes them over).
    """
    out = Output(json_output)
    with out.reporting(), runtime(db) as rt:
        work = Worker(
            rt,
            concurrency=concurrency,
            poll_ms=poll_ms,
            once=once,
            log=lambda line: out.say(line),
        )

        def on_signal(signum: int, frame: FrameType | None) -> None:
            if work.stopping:  # the second one: die by it, like a crash
                signal.signal(signum, signal.SIG_DFL)
                os.kill(os.getpid(), signum)
                return
            out.say("stopping: no new claims; waiting for the runs in flight")
            work.stop()

        previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
        try:
            out.say(
                f"worker pid {work.owner.pid} on {rt.db.split('@')[-1]}:"
                f" concurrency {concurrency}{', once' if once else ''}"
            )
            report = work.run()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
    summary = report.to_json()
    if json_output:
        out.data(summary)
    else:
        counts = ", ".join(f"{n} {status}" for status, n in summary["statuses"].items())
        out.say(
            f"worker done ({summary['stopped']}): {summary['driven']} drive(s)"
            + (f": {counts}" if counts else "")
            + (f"; {len(summary['errors'])} error(s)" if summary["errors"] else "")
        )
    raise typer.Exit(EXIT_OK)


def gc(
    older_than: Annotated[
        str,
        typer.Option(
            "--older-than", metavar="DURATION", help="Age of the last update: 30d, 12h, 15m."
        ),
    ],
    db: DbOption = None,
    json_output: JsonOption = False,
) -> None:
    """Delete finished runs not updated for DURATION (never parked, queued or running ones)."""
    out = Output(json_output)
    with out.reporting():
        age = parse_duration(older_than)
        with runtime(db) as rt:
            result = collect_garbage(rt, age)
    if json_output:
        out.data(result)
    else:
        out.say(f"deleted {result['deleted']} run(s)")
        for run_id in result["runs"]:
            out.say(f"  {run_id}")
    raise typer.Exit(EXIT_OK)
