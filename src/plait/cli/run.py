"""``plait run``, ``resume``, ``fork`` and ``cancel``: verbs that drive runs."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Coroutine, Iterator
from types import FrameType
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.status import Status

from plait.cli.common import AsOption, DbOption, JsonOption, runtime
from plait.cli.inputs import parse_input
from plait.cli.output import EXIT_OK, Output
from plait.cli.results import report
from plait.cli.streaming import DeltaPrinter
from plait.core.errors import PlaitError
from plait.core.fork import edit_problem
from plait.core.state import SchedulerState
from plait.driver.admission import check_model
from plait.driver.forking import new_run_id_for_fork
from plait.driver.inprocess import new_run_id
from plait.driver.run_ids import check_run_id
from plait.driver.runtime import Runtime
from plait.driver.verbs import accepted, parse_budgets
from plait.driver.wave import Observer, RunResult
from plait.workflow import load_workflow
from plait.workflow.run_definition import definition_of


def parse_edits(items: list[str]) -> dict[str, Any]:
    """``--set KEY=JSON`` items as a fork's context edits (JSON may be ``@FILE``); an item
    without ``=``, with a blank, reserved or repeated key, or whose value is not JSON is
    PLAIT-E019 naming it, before the store is opened."""
    edits: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise PlaitError("E019", f"--set {item!r}: expected KEY=JSON (a context key)")
        if key in edits:
            raise PlaitError("E019", f"--set {item!r}: key {key!r} is set twice")
        edits[key] = parse_input(raw, f"--set {item!r}")
        problem = edit_problem(key, edits[key])
        if problem is not None:
            raise PlaitError("E019", f"--set {item!r}: {problem}")
    return edits


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


@contextlib.contextmanager
def interrupt_like_a_crash(out: Output, run_id: str) -> Iterator[None]:
    """Ctrl-C (SIGINT) while a run is driven ends the process by that signal, as a crash.

    The interrupt lands at once, even in a tool that blocks the event loop's thread
    (asyncio's own handler would only cancel the drive at its next await, which an
    inline tool never reaches), so the progress line is cleared and the lease released
    on the way out. What is journaled stays: the run is resumed like any interrupted run.
    Nothing is printed but, on a terminal without --json, how to go on.
    """
    if threading.current_thread() is not threading.main_thread():
        yield  # signals reach the main thread only (the CLI called from a thread)
        return
    previous = signal.signal(signal.SIGINT, _interrupt)  # asyncio.run leaves it in place
    try:
        yield
    except KeyboardInterrupt:
        if not out.json_mode and sys.stderr.isatty():
            sys.stderr.write(
                f"interrupted: run {run_id} stays as it was journaled;"
                f" `plait resume {run_id}` goes on\n"
            )
            sys.stderr.flush()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
        raise  # not reached: the signal ends the process
    finally:
        signal.signal(signal.SIGINT, previous)


def drive(
    out: Output,
    run_id: str,
    work: Callable[[Runtime], Coroutine[Any, Any, RunResult]],
    db: str | None,
    principal: str | None = None,
    durability: str | None = None,
    stream: bool = False,
) -> RunResult:
    """Drive a run on ``--db`` with the live progress line (on a terminal) until it
    finishes or parks; Ctrl-C stops it as a crash would (``interrupt_like_a_crash``).
    ``stream``: print each model turn as it comes (``DeltaPrinter``) instead of the line."""
    printer = DeltaPrinter(out) if stream else None
    observer, status = progress(out) if printer is None else (None, None)
    with (
        interrupt_like_a_crash(out, run_id),
        runtime(db, principal, observer=observer, durability=durability, deltas=printer) as rt,
        status if status is not None else contextlib.nullcontext(),
    ):
        try:
            return asyncio.run(work(rt))
        finally:
            if printer is not None:
                printer.finish()


def progress(out: Output) -> tuple[Observer | None, Status | None]:
    """A live line (superstep, effects in flight, spent) while a run works, on a terminal."""
    if out.json_mode or not sys.stderr.isatty():
        return None, None
    status = Status("starting…", console=Console(stderr=True))

    def observe(state: SchedulerState, in_flight: int) -> None:
        spent = state.spent
        status.update(
            f"superstep {state.superstep} · {in_flight} effect(s) in flight ·"
            f" {spent.wall_ms} ms wall · {spent.input_tokens + spent.output_tokens} tokens"
        )

    return observe, status


def run(
    workflow: Annotated[str, typer.Argument(metavar="WORKFLOW", help="A workflow file.")],
    input: Annotated[
        str | None, typer.Option("--input", help="Input JSON, or @FILE holding it.")
    ] = None,
    model: Annotated[
        str | None,
        typer.Option("--model", metavar="SPEC", help="Model for LLM nodes (overrides llm.model)."),
    ] = None,
    run_id: Annotated[
        str | None,
        typer.Option("--run-id", metavar="ID", help="The run's id (default: a new one)."),
    ] = None,
    principal: AsOption = None,
    conversation: Annotated[
        str | None,
        typer.Option(
            "--conversation",
            metavar="C",
            help="Run as the next turn of conversation C (goes on from its transcript).",
        ),
    ] = None,
    detach: Annotated[bool, typer.Option("--detach", help="Enqueue for a worker.")] = False,
    stream: Annotated[
        bool, typer.Option("--stream", help="Print the model's answers as they come.")
    ] = False,
    db: DbOption = None,
    json_output: JsonOption = False,
) -> None:
    """Start a run of WORKFLOW and drive it until it finishes or parks."""
    out = Output(json_output)
    with out.reporting():
        if stream and detach:
            raise PlaitError("E019", "--stream prints a run this command drives: not with --detach")
        check_run_id(run_id, "--run-id")
        wf = load_workflow(workflow, model)
        # Refused before the store (a new file) is opened.
        check_model(definition_of(wf), driven=not detach)
        value = parse_input(input)
        if input is not None and value is None:  # `--input null`: a value, not "no input"
            value = {"input": None}
        if detach:  # a worker drives it (plait worker); exit 3: not finished
            with runtime(db, principal, durability=wf.durability) as rt:
                queued = asyncio.run(
                    rt.enqueue(wf, value, run_id=run_id, conversation=conversation)
                )
            report(out, queued)
        new_id = run_id or new_run_id()  # known before it starts: Ctrl-C names it
        result = drive(
            out,
            new_id,
            lambda rt: rt.start(wf, value, run_id=new_id, conversation=conversation),
            db,
            principal,
            wf.durability,
            stream,
        )
    report(out, result)


def resume(
    run_id: Annotated[str, typer.Argument(metavar="RUN_ID")],
    stream: Annotated[
        bool, typer.Option("--stream", help="Print the model's answers as they come.")
    ] = False,
    db: DbOption = None,
    json_output: JsonOption = False,
) -> None:
    """Continue a run from its last checkpoint (a finished run reports its outcome again)."""
    out = Output(json_output)
    with out.reporting():
        result = drive(out, run_id, lambda rt: rt.resume(run_id), db, stream=stream)
    report(out, result)


def fork(
    run_id: Annotated[str, typer.Argument(metavar="RUN_ID")],
    at: Annotated[
        int | None,
        typer.Option(
            "--at", metavar="SUPERSTEP", help="Fork from this checkpoint (default: the last)."
        ),
    ] = None,
    workflow: Annotated[
        str | None,
        typer.Option("--workflow", metavar="FILE", help="Continue on this workflow file instead."),
    ] = None,
    budget: Annotated[
        list[str] | None,
        typer.Option(
            "--budget", metavar="AXIS=VALUE", help="Raise a ceiling of the fork (repeatable)."
        ),
    ] = None,
    edit: Annotated[
        list[str] | None,
        typer.Option(
            "--set",
            metavar="KEY=JSON",
            help="Replace a context key's value in the fork (repeatable; journaled).",
        ),
    ] = None,
    principal: AsOption = None,
    db: DbOption = None,
    json_output: JsonOption = False,
) -> None:
    """Start a new run from a checkpoint of RUN_ID (the base run is never touched)."""
    out = Output(json_output)
    with out.reporting():
        wf = load_workflow(workflow) if workflow else None
        budgets = parse_budgets(budget or [])
        edits = parse_edits(edit or [])
        fork_id = new_run_id_for_fork(run_id)
        result = drive(
            out,
            fork_id,
            lambda rt: rt.fork(
                run_id,
                at=at,
                workflow=wf,
                budgets=budgets or None,
                new_run_id=fork_id,
                edits=edits or None,
            ),
            db,
            principal,
        )
    report(out, result)


def cancel(
    run_id: Annotated[str, typer.Argument(metavar="RUN_ID")],
    reason: Annotated[str, typer.Option("--reason", metavar="TEXT", help="Why (journaled).")] = "",
    principal: AsOption = None,
    db: DbOption = None,
    json_output: JsonOption = False,
) -> None:
    """Cancel a run: journaled now, seen by the driver at its next step."""
    out = Output(json_output)
    with out.reporting(), runtime(db, principal) as rt:
        rt.cancel(run_id, reason)
    if json_output:
        out.data(accepted(run_id))
    else:
        out.say(f"cancel of {run_id} accepted")
    raise typer.Exit(EXIT_OK)
