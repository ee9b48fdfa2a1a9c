"""``plait check WORKFLOW``: load a workflow file and report every problem with its line.

Problems (every pass, governance flows included) exit 2, one line each. Warnings (a flow
guard reading a key nothing declares it writes, or one that can never hold) are printed
the same way, marked ``warning:``, after the problems if there are any; alone they leave
the exit code at 0. ``--json`` lists them under ``warnings`` (inside ``error`` when the
file also has problems).
"""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.markup import escape

from plait.cli.common import JsonOption
from plait.cli.output import Output
from plait.workflow.loader import load_with_warnings
from plait.workflow.plan_hash import plan_hash


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
        wf, warnings = load_with_warnings(workflow, model)
    if json_output:
        summary: dict[str, Any] = {"ok": True, "workflow": wf.name, "nodes": len(wf.nodes)}
        summary |= {"edges": len(wf.edges), "tools": len(wf.tools)}
        summary["plan_hash"] = plan_hash(wf.to_manifest())
        if warnings:
            summary["warnings"] = [
                {"code": f"PLAIT-{w.code}", "message": w.message, "line": w.line} for w in warnings
            ]
        out.data(summary)
        return
    for w in warnings:
        out.say(w.render(workflow, warning=True))
    noted = f", {len(warnings)} warning{'s' if len(warnings) != 1 else ''}" if warnings else ""
    out.say(
        f"[green]✓[/] {escape(workflow)}: workflow [bold]{escape(wf.name)}[/] is valid"
        f" ({len(wf.nodes)} nodes, {len(wf.edges)} edges, {len(wf.tools)} tools){escape(noted)}",
        markup=True,
    )
