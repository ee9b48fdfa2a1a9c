"""``plait schedule``: start runs of a workflow on a cron expression or an interval.

Workers (``plait worker``, and the server's drivers) fire the slots; these verbs only
keep the schedules in the store (``plait.driver.scheduling``).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

import typer

from plait.cli.common import DbOption, JsonOption, runtime
from plait.cli.inputs import parse_input
from plait.cli.output import EXIT_OK, JsonUsageGroup, Output
from plait.driver import scheduling
from plait.workflow.schedule_spec import make_spec, option_label

schedule_app = typer.Typer(
    name="schedule",
    cls=JsonUsageGroup,
    help="Start runs of a workflow on a schedule (fired by workers).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

NameArgument = Annotated[str, typer.Argument(metavar="NAME", help="The schedule's name.")]


def _when(ms: int | None) -> str:
    if ms is None:
        return "-"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _print(out: Output, obj: dict[str, Any], line: str) -> None:
    if out.json_mode:
        out.data(obj)
    else:
        out.say(line)
    raise typer.Exit(EXIT_OK)


@schedule_app.command("add")
def add(
    name: NameArgument,
    workflow: Annotated[
        str, typer.Option("--workflow", metavar="FILE", help="The workflow file to run.")
    ],
    cron: Annotated[
        str | None, typer.Option("--cron", metavar="EXPR", help="A cron expression.")
    ] = None,
    every: Annotated[
        str | None,
        typer.Option("--every", metavar="DURATION", help="An interval: 30s, 15m, 1h, 1d."),
    ] = None,
    input: Annotated[
        str | None, typer.Option("--input", help="Input JSON of every run, or @FILE.")
    ] = None,
    timezone: Annotated[
        str | None,
        typer.Option("--timezone", metavar="TZ", help="The cron expression's zone (default UTC)."),
    ] = None,
    overlap: Annotated[
        str | None,
        typer.Option("--overlap", help="skip (default): no run while the last is unfinished."),
    ] = None,
    catch_up: Annotated[
        str | None,
        typer.Option("--catch-up", help="After downtime: one (default) missed slot, or none."),
    ] = None,
    db: DbOption = None,
    json_output: JsonOption = False,
) -> None:
    """Add a schedule: workers start a run of FILE at every slot."""
    out = Output(json_output)
    with out.reporting():
        value = parse_input(input)
        source = scheduling.checked_workflow(workflow)
        spec = make_spec(
            name,
            source,
            cron=cron,
            every=every,
            input=value,
            timezone=timezone,
            overlap=overlap,
            catch_up=catch_up,
            label=option_label,
        )
        with runtime(db) as rt:
            result = scheduling.add_schedule(rt, spec)
    _print(out, result, f"schedule {name} added; next slot {_when(result['next_ms'])}")


@schedule_app.command("list")
def list_(db: DbOption = None, json_output: JsonOption = False) -> None:
    """List the schedules, their next slot and last run."""
    out = Output(json_output)
    with out.reporting(), runtime(db) as rt:
        result = scheduling.list_schedules(rt)
    lines = []
    for s in result["schedules"]:
        when = s.get("cron") or f"every {s.get('every_ms')} ms"
        state = "paused" if s["paused"] else f"next {_when(s['next_ms'])}"
        last = f"; last run {s['last_run_id']}" if s["last_run_id"] else ""
        error = f"; last error {s['last_error']}" if s["last_error"] else ""
        lines.append(f"{s['name']}  {when}  {state}{last}{error}  ({s['workflow']})")
    _print(out, result, "\n".join(lines) or "no schedules")


@schedule_app.command("pause")
def pause(name: NameArgument, db: DbOption = None, json_output: JsonOption = False) -> None:
    """Pause a schedule: no slot fires until it is resumed."""
    out = Output(json_output)
    with out.reporting(), runtime(db) as rt:
        result = scheduling.pause_schedule(rt, name)
    _print(out, result, f"schedule {name} paused")


@schedule_app.command("resume")
def resume(name: NameArgument, db: DbOption = None, json_output: JsonOption = False) -> None:
    """Resume a paused schedule from its next slot (slots passed while paused do not run)."""
    out = Output(json_output)
    with out.reporting(), runtime(db) as rt:
        result = scheduling.resume_schedule(rt, name)
    _print(out, result, f"schedule {name} resumed; next slot {_when(result['next_ms'])}")


@schedule_app.command("delete")
def delete(name: NameArgument, db: DbOption = None, json_output: JsonOption = False) -> None:
    """Delete a schedule (its runs stay)."""
    out = Output(json_output)
    with out.reporting(), runtime(db) as rt:
        result = scheduling.delete_schedule(rt, name)
    _print(out, result, f"schedule {name} deleted")


@schedule_app.command("sync")
def sync(
    workflow: Annotated[str, typer.Argument(metavar="FILE", help="A workflow file.")],
    db: DbOption = None,
    json_output: JsonOption = False,
) -> None:
    """Make the store's schedules of FILE match its `schedules:` list."""
    out = Output(json_output)
    with out.reporting(), runtime(db) as rt:
        result = scheduling.sync_schedules(rt, workflow)
    counts = ", ".join(
        f"{len(result[k])} {k}" for k in ("added", "updated", "unchanged", "removed")
    )
    _print(out, result, f"schedules of {result['workflow']}: {counts}")
