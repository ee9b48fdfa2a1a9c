"""``plait run``, ``resume``, ``fork`` and ``cancel``: verbs that drive runs."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.status import Status

from plait.cli.common import AsOption, DbOption, JsonOption, runtime
from plait.cli.output import EXIT_FAILED, EXIT_OK, EXIT_PARKED, Output
from plait.core.canonical import CanonicalJSONError, loads
from plait.core.errors import PlaitError
from plait.core.state import SchedulerState
from plait.driver.run_ids import check_run_id
from plait.driver.verbs import accepted, parse_budgets
from plait.driver.wave import Observer, RunResult
from plait.workflow import load_workflow


def parse_input(value: str | None, option: str = "--input") -> Any:
    """``--input JSON`` or ``--input @FILE`` (``option`` names it in errors: PLAIT-E019);
    absent means no input ({})."""
    if value is None:
        return None
    text = value
    if value.startswith("@"):
        path = Path(value[1:])
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise PlaitError("E019", f"{option} {value}: cannot read the file: {exc}") from exc
    try:
        # Text no UTF-8 can hold (a lone surrogate escape) parses; the Runtime refuses it.
        return loads(text, unique_keys=True)
    except CanonicalJSONError as exc:
        raise PlaitError("E019", f"{option}: not valid JSON: {exc}") from exc


def status_exit(result: RunResult) -> int:
    if result.status == "completed":
        return EXIT_OK
    if result.status in ("parked", "running", "queued"):
        return EXIT_PARKED
    return EXIT_FAILED


def report(out: Output, result: RunResult) -> None:
    """Print a run's result and exit with the status's code."""
    if out.json_mode:
        out.data(result.to_json())
    else:
        describe(out, result)
    raise typer.Exit(status_exit(result))


OUTCOME_CODES = {"stalled": "E001", "budget_exhausted": "E007", "canceled": "E013"}
"""Run outcomes §13 gives a code (``--json`` carries the kind, as CONTRACT.md shows)."""


def describe(out: Output, result: RunResult) -> None:
    colour = {"completed": "green", "parked": "yellow", "running": "yellow"}.get(
        result.status, "red"
    )
    out.say(f"run [bold]{escape(result.run_id)}[/]: [{colour}]{result.status}[/]", markup=True)
    outcome = result.to_json()["outcome"]
    if outcome and outcome["kind"] != "completed":
        details = [f"{k}={v}" for k, v in outcome.items() if k != "kind"]
        code = OUTCOME_CODES.get(outcome["kind"])
        if code is not None:
            details.insert(0, f"PLAIT-{code}")  # docs/errors.md explains it
        out.say(f"  outcome: {outcome['kind']} ({', '.join(details)})")
    spent = result.spent
    out.say(
        f"  spent: {spent.get('supersteps', 0)} supersteps, {spent.get('wall_ms', 0)} ms wall,"
        f" {spent.get('storage_bytes', 0)} bytes journaled"
    )
    for ask in result.asks:
        out.say(f"  waiting for: {ask.get('ask_id')} ({ask.get('prompt', '')})")
    if result.redelivered:
        out.say(f"  redelivered {result.redelivered} effect(s) that were in flight")
    from plait.core.canonical import dumps

    text = dumps(result.context)
    out.say(f"  context: {text if len(text) < 400 else text[:400] + '…'}")


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
    model: Annotated[str | None, typer.Option("--model", metavar="SPEC")] = None,
    run_id: Annotated[str | None, typer.Option("--run-id", metavar="ID")] = None,
    principal: AsOption = None,
    detach: Annotated[bool, typer.Option("--detach", help="Enqueue for a worker.")] = False,
    db: DbOption = None,
    json_output: JsonOption = False,
) -> None:
    """Start a run of WORKFLOW and drive it until it finishes or parks."""
    out = Output(json_output)
    with out.reporting():
        check_run_id(run_id, "--run-id")
        wf = load_workflow(workflow, model)
        value = parse_input(input)
        if input is not None and value is None:  # `--input null`: a value, not "no input"
            value = {"input": None}
        if detach:  # a worker drives it (plait worker); exit 3: not finished
            with runtime(db, principal, durability=wf.durability) as rt:
                queued = asyncio.run(rt.enqueue(wf, value, run_id=run_id))
            report(out, queued)
        observer, status = progress(out)
        with runtime(db, principal, observer=observer, durability=wf.durability) as rt:
            if status is not None:
                with status:
                    result = asyncio.run(rt.start(wf, value, run_id=run_id))
            else:
                result = asyncio.run(rt.start(wf, value, run_id=run_id))
    report(out, result)


def resume(
    run_id: Annotated[str, typer.Argument(metavar="RUN_ID")],
    db: DbOption = None,
    json_output: JsonOption = False,
) -> None:
    """Continue a run from its last checkpoint (a finished run reports its outcome again)."""
    out = Output(json_output)
    with out.reporting():
        observer, status = progress(out)
        with runtime(db, observer=observer) as rt:
            if status is not None:
                with status:
                    result = asyncio.run(rt.resume(run_id))
            else:
                result = asyncio.run(rt.resume(run_id))
    report(out, result)


def fork(
    run_id: Annotated[str, typer.Argument(metavar="RUN_ID")],
    at: Annotated[int | None, typer.Option("--at", metavar="SUPERSTEP")] = None,
    workflow: Annotated[str | None, typer.Option("--workflow", metavar="FILE")] = None,
    budget: Annotated[list[str] | None, typer.Option("--budget", metavar="AXIS=VALUE")] = None,
    db: DbOption = None,
    json_output: JsonOption = False,
) -> None:
    """Start a new run from a checkpoint of RUN_ID (the base run is never touched)."""
    out = Output(json_output)
    with out.reporting():
        wf = load_workflow(workflow) if workflow else None
        budgets = parse_budgets(budget or [])
        with runtime(db) as rt:
            result = asyncio.run(rt.fork(run_id, at=at, workflow=wf, budgets=budgets or None))
    report(out, result)


def cancel(
    run_id: Annotated[str, typer.Argument(metavar="RUN_ID")],
    reason: Annotated[str, typer.Option("--reason", metavar="TEXT")] = "",
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
