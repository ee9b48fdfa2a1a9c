"""``plait check WORKFLOW``: load a workflow file and report every problem with its line.

Problems (every pass, governance flows included) exit 2, one line each. Warnings (a flow
guard reading a key nothing declares it writes, or one that can never hold) are printed
the same way, marked ``warning:``, after the problems if there are any; alone they leave
the exit code at 0. ``--json`` lists them under ``warnings`` (inside ``error`` when the
file also has problems).

A workflow with MCP tools has its servers asked what they offer, as a run's start does:
a server that does not start or answer, or a tool it does not offer, is PLAIT-E004
(``--offline`` skips this). ``tools: "*"`` entries count as the tools they stand for.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

import typer
from rich.markup import escape

from plait.cli.common import JsonOption
from plait.cli.output import Output
from plait.tools.mcp import fetch_catalogue
from plait.workflow.definition import Workflow
from plait.workflow.loader import load_with_warnings
from plait.workflow.pinning import with_catalogue
from plait.workflow.plan_hash import plan_hash


def check(
    workflow: Annotated[str, typer.Argument(metavar="WORKFLOW", help="A workflow file.")],
    json_output: JsonOption = False,
    model: Annotated[
        str | None,
        typer.Option("--model", metavar="SPEC", help="The model to run with (replaces llm.model)."),
    ] = None,
    offline: Annotated[
        bool,
        typer.Option("--offline", help="Do not ask MCP servers what they offer."),
    ] = False,
) -> None:
    """Check a workflow file: one line per problem, FILE:LINE: PLAIT-Ennn message."""
    out = Output(json_output)
    with out.reporting():
        wf, warnings = load_with_warnings(workflow, model)
        if not offline:
            wf = _with_servers(wf)
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


def _with_servers(wf: Workflow) -> Workflow:
    """``wf`` with what its MCP servers offer now (PLAIT-E004 naming what went wrong)."""
    if not any(tool.mcp is not None for tool in wf.tools.values()):
        return wf
    catalogue = asyncio.run(fetch_catalogue(wf))
    filled = with_catalogue(wf, catalogue)
    filled.plan()  # a server's tool names, expanded from tools: "*", are checked too
    return filled
