"""``plait graph WORKFLOW``: the workflow as a Mermaid flowchart.

Shapes say what a node is: a tool node is a box, an abstract (LLM) node a
rounded box, an ask a hexagon, a timer a circle, a subgraph a framed box.
Edges carry their condition and ``max N``; bounded (loop) edges are dotted.
Each abstract node's governance flow follows as its own chart (``to_mermaid``), headed by
a ``%% flow of node '<id>'`` comment; ``--json`` gives them as ``flows: {node id: chart}``.
"""

from __future__ import annotations

from typing import Annotated

import typer

from plait.cli.common import JsonOption
from plait.cli.output import Output
from plait.governance import Flow, flow_from_dict, to_mermaid
from plait.workflow import NodeDef, Workflow, load_workflow

SHAPES = {
    "tool": ('["', '"]'),
    "abstract": ('("', '")'),
    "ask": ('{{"', '"}}'),
    "timer": ('(("', '"))'),
    "subgraph": ('[["', '"]]'),
}


def _escape(text: str) -> str:
    """Mermaid label text: entities for the characters that would end or mark up a label."""
    text = " ".join(str(text).split())
    for raw, entity in (("#", "#35;"), ('"', "#quot;"), ("<", "#lt;"), (">", "#gt;")):
        text = text.replace(raw, entity)
    return text


def _detail(node: NodeDef) -> str:
    if node.kind == "tool":
        return f"tool: {node.tool}"
    if node.kind == "ask":
        return "approval" if (node.ask or {}).get("approval") else "ask"
    if node.kind == "timer":
        return f"sleep {node.sleep_s:g}s" if node.sleep_s is not None else "sleep"
    if node.kind == "subgraph":
        return f"workflow: {node.workflow}"
    return "LLM"


def mermaid(wf: Workflow) -> str:
    """A ``flowchart TD`` of the workflow (node ids become n0, n1, ...: ids may hold anything)."""
    ids: dict[str, str] = {}
    lines = ["flowchart TD"]
    for i, node in enumerate(wf.nodes):
        ids.setdefault(node.id, f"n{i}")
        left, right = SHAPES.get(node.kind, SHAPES["tool"])
        label = f"{_escape(node.id)}<br/><small>{_escape(_detail(node))}</small>"
        lines.append(f"    n{i}{left}{label}{right}")
    for edge in wf.edges:
        src, dst = ids[edge.src], ids[edge.dst]
        parts = [edge.when] if edge.when is not None else []
        if edge.max_cycles is not None:
            parts.append(f"max {edge.max_cycles}")
        arrow = "-.->" if edge.max_cycles is not None else "-->"
        label = f'|"{_escape(" · ".join(parts))}"| ' if parts else " "
        lines.append(f"    {src} {arrow}{label}{dst}")
    return "\n".join(lines) + "\n"


def flow_charts(wf: Workflow) -> dict[str, str]:
    """Each abstract node's governance flow as a Mermaid chart, by node id, in node order."""
    charts: dict[str, str] = {}
    for node in wf.nodes:
        if node.kind == "abstract" and node.flow is not None:
            flow = node.flow if isinstance(node.flow, Flow) else flow_from_dict(node.flow)
            charts[node.id] = to_mermaid(flow)
    return charts


def graph(
    workflow: Annotated[str, typer.Argument(metavar="WORKFLOW", help="A workflow file.")],
    json_output: JsonOption = False,
) -> None:
    """Print the workflow as a Mermaid flowchart."""
    out = Output(json_output)
    with out.reporting():
        wf = load_workflow(workflow, require_model=False)
    chart = mermaid(wf)
    flows = flow_charts(wf)
    if json_output:
        out.data({"mermaid": chart, "flows": flows})
        return
    for node_id, flow_chart in flows.items():
        chart += f"\n%% flow of node '{_escape(node_id)}'\n{flow_chart}"
    out.text(chart)
