"""``plait migrate RUN_ID --workflow FILE``: move a run that is not being driven onto a
new version of its workflow (``Runtime.migrate``). Nothing is driven: a parked run stays
parked, a finished one is queued for ``resume`` or a worker."""

from __future__ import annotations

import asyncio
from typing import Annotated

import typer

from plait.cli.common import AsOption, DbOption, JsonOption, runtime
from plait.cli.output import EXIT_OK, Output
from plait.driver.verbs import parse_mapping
from plait.workflow import load_workflow


def migrate(
    run_id: Annotated[str, typer.Argument(metavar="RUN_ID")],
    workflow: Annotated[
        str, typer.Option("--workflow", metavar="FILE", help="The new version of the workflow.")
    ],
    mapping: Annotated[
        list[str] | None,
        typer.Option(
            "--map", metavar="OLD=NEW", help="A node renamed in the new version (repeatable)."
        ),
    ] = None,
    restart_at_entry: Annotated[
        bool,
        typer.Option(
            "--restart-at-entry", help="Keep the context and start the new plan at its entry."
        ),
    ] = False,
    principal: AsOption = None,
    db: DbOption = None,
    json_output: JsonOption = False,
) -> None:
    """Move a parked, failed, stalled, budget-exhausted or canceled run onto a new version."""
    out = Output(json_output)
    with out.reporting():
        renamed = parse_mapping(mapping or [])
        wf = load_workflow(workflow)
        with runtime(db, principal) as rt:
            moved = asyncio.run(
                rt.migrate(run_id, wf, mapping=renamed, restart_at_entry=restart_at_entry)
            )
    if json_output:
        out.data(moved)
    else:
        out.say(f"migrated {run_id}: {moved['from']} -> {moved['to']}")
    raise typer.Exit(EXIT_OK)
