"""``plait graph WORKFLOW``: the workflow as a Mermaid flowchart (drawn by
``plait.workflow.chart``, which the HTTP API shares).

Each abstract node's governance flow follows as its own chart, headed by a
``%% flow of node '<id>'`` comment; ``--json`` gives them as ``flows: {node id: chart}``.
"""

from __future__ import annotations

from typing import Annotated

import typer

from plait.cli.common import JsonOption
from plait.cli.output import Output
from plait.workflow import load_workflow
from plait.workflow.chart import escape_label, graph_object


def graph(
    workflow: Annotated[str, typer.Argument(metavar="WORKFLOW", help="A workflow file.")],
    json_output: JsonOption = False,
) -> None:
    """Print the workflow as a Mermaid flowchart."""
    out = Output(json_output)
    with out.reporting():
        wf = load_workflow(workflow, require_model=False)
    drawn = graph_object(wf)
    if json_output:
        out.data(drawn)
        return
    chart: str = drawn["mermaid"]
    for node_id, flow_chart in drawn["flows"].items():
        chart += f"\n%% flow of node '{escape_label(node_id)}'\n{flow_chart}"
    out.text(chart)
