"""A workflow as a Mermaid flowchart (``plait graph``, the HTTP API and the web console).

Shapes say what a node is: a tool node is a box, an abstract (LLM) node a
rounded box, an ask a hexagon, a timer a circle, a subgraph a framed box.
Edges carry their condition and ``max N``; bounded (loop) edges are dotted.
Each abstract node's governance flow is a chart of its own (``to_mermaid``).

A chart is drawn from a loaded definition or from the definition a run pinned in
its manifest (``pinned_chart``), so a run's graph never needs its file, its tool
modules or its model.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from plait.governance import Flow, flow_from_dict, to_mermaid
from plait.workflow.definition import EdgeDef, NodeDef, Workflow

SHAPES = {
    "tool": ('["', '"]'),
    "abstract": ('("', '")'),
    "ask": ('{{"', '"}}'),
    "timer": ('(("', '"))'),
    "subgraph": ('[["', '"]]'),
}


def escape_label(text: str) -> str:
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
        label = f"{escape_label(node.id)}<br/><small>{escape_label(_detail(node))}</small>"
        lines.append(f"    n{i}{left}{label}{right}")
    for edge in wf.edges:
        src, dst = ids[edge.src], ids[edge.dst]
        parts = [edge.when] if edge.when is not None else []
        if edge.max_cycles is not None:
            parts.append(f"max {edge.max_cycles}")
        arrow = "-.->" if edge.max_cycles is not None else "-->"
        label = f'|"{escape_label(" · ".join(parts))}"| ' if parts else " "
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


def graph_object(wf: Workflow) -> dict[str, Any]:
    """``plait graph --json``: ``{"mermaid": chart, "flows": {node id: chart}}``."""
    return {"mermaid": mermaid(wf), "flows": flow_charts(wf)}


def pinned_chart(pinned: Mapping[str, Any]) -> Workflow:
    """The drawable part of a manifest's ``workflow`` (nodes and edges), as a ``Workflow``.

    Only what ``mermaid`` and ``flow_charts`` read is rebuilt; the result is for drawing,
    never for running (it has no tools and is not checked).
    """
    nodes = []
    for entry in pinned.get("nodes", ()):
        executor = entry.get("executor") or {}
        spec = executor.get("spec") or {}
        kind = str(entry.get("kind"))
        sleep_ms = spec.get("sleep_ms")
        nodes.append(
            NodeDef(
                id=str(entry.get("id")),
                kind=kind,
                tool=executor.get("name") if kind == "tool" else None,
                ask=spec if kind == "ask" else None,
                sleep_s=sleep_ms / 1000 if kind == "timer" and sleep_ms is not None else None,
                workflow=spec.get("workflow") if kind == "subgraph" else None,
                flow=spec.get("flow") if kind == "abstract" else None,
            )
        )
    edges = [
        EdgeDef(str(e["from"]), str(e["to"]), e.get("when"), e.get("max_cycles"))
        for e in pinned.get("edges", ())
    ]
    return Workflow(str(pinned.get("name", "")), nodes=tuple(nodes), edges=tuple(edges))
