"""``plait check WORKFLOW``: load a workflow file and report every problem with its line."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape

from plait.cli.common import JsonOption
from plait.cli.output import Output
from plait.workflow import load_workflow


def check(
    workflow: Annotated[str, typer.Argument(metavar="WORKFLOW", help="A workflow file.")],
    json_output: JsonOption = False,
    model: Annotated[
        str | None,
        typer.Option("--model", metavar="SPEC", help="The model to run with (replaces llm.model)."),
    ] = None,
) -> None:
    """Check a workflow file: one line per problem, FILE:LINE: PLAIT-Ennn message."""
    out = Output(json_output)
    with out.reporting():
        wf = load_workflow(workflow, model)
    if json_output:
        summary = {"ok": True, "workflow": wf.name, "nodes": len(wf.nodes)}
        out.data(summary | {"edges": len(wf.edges), "tools": len(wf.tools)})
        return
    out.say(
        f"[green]✓[/] {escape(workflow)}: workflow [bold]{escape(wf.name)}[/] is valid"
        f" ({len(wf.nodes)} nodes, {len(wf.edges)} edges, {len(wf.tools)} tools)",
        markup=True,
    )
