"""What a run pins: a definition as canonical JSON, and the plan and executors read back.

A run stores the manifest at start; resume, verify and fork rebuild the plan
and the node executors from it (``manifest_plan``, ``manifest_executors``) and
never reread the workflow file. File units become core units here (dollars to
integer micro-dollars, seconds to milliseconds, rounded half-up). Callables are
never pinned, only their ``module:function`` labels.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import MAX_EMAX, MAX_PREC, MIN_EMIN, ROUND_HALF_UP, Context, Decimal
from typing import TYPE_CHECKING, Any

from plait.core.env import DEFAULT_MAX_SUPERSTEPS, Budgets, NodeExecutor
from plait.core.plan import EdgeSpec, NodeSpec, Plan, build_plan
from plait.workflow.agent_checks import detached
from plait.workflow.located import plain

if TYPE_CHECKING:
    from plait.workflow.definition import EdgeDef, NodeDef, ToolDef, Workflow


EXACT = Context(prec=MAX_PREC, Emax=MAX_EMAX, Emin=MIN_EMIN, rounding=ROUND_HALF_UP)
"""Decimal arithmetic that never rounds a product and never overflows: a file or a CLI
may give any finite number (``max_usd: 1.0e+30``), and the default 28 digits would
either round it or raise."""


def half_up(value: float | Decimal, scale: int) -> int:
    """``value * scale`` rounded half-up, computed on the decimal text (2.675 stays 2.675)."""
    exact = value if isinstance(value, Decimal) else Decimal(repr(value))
    return int(EXACT.multiply(exact, Decimal(scale)).to_integral_value(ROUND_HALF_UP))


def budgets_of(wf: Workflow) -> Budgets:
    """The workflow's budget ceilings in core units (micro-dollars, milliseconds)."""
    b = wf.budgets
    usd, wall = b.get("max_usd"), b.get("max_wall_s")
    return Budgets(
        max_supersteps=b.get("max_supersteps", DEFAULT_MAX_SUPERSTEPS),
        max_tokens=b.get("max_tokens"),
        max_usd_micros=None if usd is None else half_up(usd, 1_000_000),
        max_wall_ms=None if wall is None else half_up(wall, 1000),
        max_storage_bytes=b.get("max_storage_bytes"),
    )


def manifest_of(wf: Workflow) -> dict[str, Any]:
    """The manifest of a valid workflow (``Workflow.to_manifest`` validates first)."""
    executors = [node_executor(wf, node) for node in wf.nodes]
    manifest: dict[str, Any] = {
        "name": wf.name,
        "durability": wf.durability,
        "on_dangling": wf.on_dangling,
        "nodes": [_node_manifest(wf, n, x) for n, x in zip(wf.nodes, executors, strict=True)],
        "edges": [_edge_manifest(e) for e in wf.edges],
        "reducers": dict(wf.reducers),
        "tools": {name: _tool_manifest(t) for name, t in wf.tools.items()},
        "budgets": budgets_of(wf).to_json(),
    }
    if wf.description:
        manifest["description"] = wf.description
    if wf.llm is not None:
        manifest["llm"] = plain(wf.llm)
        decide = manifest["llm"].get("decide")
        if isinstance(decide, dict) and isinstance(decide.get("calibration"), str):
            from plait.decide import read_calibration  # pinned by hash (docs/decide.md)

            decide["calibration"] = read_calibration(wf.base_dir / decide["calibration"])
    if wf.asks:
        manifest["asks"] = plain(wf.asks)
    if wf.retry is not None:
        manifest["retry"] = plain(wf.retry)
    return manifest


RETRY_DEFAULTS: dict[str, Any] = {
    "max_attempts": 3,
    "initial_s": 1,
    "multiplier": 2,
    "jitter": 0,
    "non_retryable": [],
}
"""What a ``retry:`` policy leaves out (``max_s``: no cap)."""
RETRY_KINDS = ("tool", "abstract")
"""The nodes a policy applies to: tool nodes (and their Send tasks), LLM nodes."""


def effective_retry(wf: Workflow, node: NodeDef) -> dict[str, Any] | None:
    """The policy a node runs under, complete, or None: the node's ``retry:`` over the
    workflow's over the defaults; ``retries: k`` alone keeps its meaning (k+1 attempts at
    once), and so does a workflow without any ``retry:`` (no entry, the bytes of old)."""
    if node.kind not in RETRY_KINDS:
        return None
    if node.retry is None and (node.retries or wf.retry is None):
        return None
    merged: dict[str, Any] = plain({**RETRY_DEFAULTS, **(wf.retry or {}), **(node.retry or {})})
    return merged


def _flow_json(flow: Any) -> Any:
    to_json = getattr(flow, "to_json", None)
    return to_json() if callable(to_json) else plain(flow)


def node_executor(wf: Workflow, node: NodeDef) -> NodeExecutor:
    """How a node runs: its kind, its executor's name and the spec pinned for it."""
    kind = node.kind
    if kind == "tool":
        # Only a node that declares ``output`` pins it: other runs' bytes stay as they were.
        output = {"output": node.output} if node.output is not None else {}
        return NodeExecutor("tool", node.tool or "", output)
    if kind == "ask":
        ask = node.ask or {}
        spec: dict[str, Any] = {"prompt": ask.get("prompt"), "approval": bool(ask.get("approval"))}
        if ask.get("output_schema") is not None:
            spec["output_schema"] = plain(ask["output_schema"])
        return NodeExecutor("ask", node.id, spec)
    if kind == "timer":
        return NodeExecutor("timer", node.id, {"sleep_ms": half_up(node.sleep_s or 0, 1000)})
    if kind == "subgraph":
        return NodeExecutor("subgraph", node.workflow or "", {"workflow": node.workflow})
    spec = {"tools": list(node.tools if node.tools is not None else wf.tools)}
    for key in ("instruction", "response_schema", "tool_results_into"):
        value = getattr(node, key)
        if value is not None:
            spec[key] = plain(value)
    if node.flow is not None:
        spec["flow"] = _flow_json(node.flow)
    for key in ("agents", "handoffs"):  # several agents: pinned only where used
        value = getattr(node, key)
        if value:
            spec[key] = list(value)
    if (node.agents or node.handoffs) and (wf.llm or {}).get("max_agent_depth") is not None:
        spec["max_depth"] = int((wf.llm or {})["max_agent_depth"])
    return NodeExecutor("abstract", node.id, spec)


def _node_manifest(wf: Workflow, node: NodeDef, executor: NodeExecutor) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "id": node.id,
        "kind": node.kind,
        "retries": node.retries,
        "executor": {"name": executor.name, "spec": dict(executor.spec)},
    }
    if node.writes:
        entry["writes"] = list(node.writes)
    retry = effective_retry(wf, node)
    if retry is not None:
        entry["retry"] = retry
    return entry


def _edge_manifest(edge: EdgeDef) -> dict[str, Any]:
    entry: dict[str, Any] = {"from": edge.src, "to": edge.dst}
    if edge.when is not None:
        entry["when"] = edge.when
    if edge.max_cycles is not None:
        entry["max_cycles"] = edge.max_cycles
    return entry


def _tool_manifest(tool: ToolDef) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "name": tool.name,
        "kind": tool.source_kind,
        "description": tool.description,
        "strict": tool.strict,
        "approval": tool.approval,
        "deferred": tool.deferred,
        "writes": list(tool.writes),
    }
    if tool.python is not None:
        entry["python"] = tool.python
    if tool.command is not None:
        entry["command"] = list(tool.command)
    if tool.mcp is not None:
        entry["mcp"] = plain(tool.mcp)
    if tool.input_schema is not None:
        entry["input_schema"] = plain(tool.input_schema)
    if tool.timeout_s is not None:
        entry["timeout_s"] = tool.timeout_s
    return entry


def manifest_plan(manifest: Mapping[str, Any]) -> Plan:
    """The plan of a pinned manifest (resume, verify and fork never reread the file)."""
    nodes = [NodeSpec(n["id"], n["kind"], n["retries"]) for n in manifest["nodes"]]
    edges = [
        EdgeSpec(e["from"], e["to"], e.get("when"), e.get("max_cycles")) for e in manifest["edges"]
    ]
    named = detached(n["executor"].get("spec") or {} for n in manifest["nodes"])
    return build_plan(nodes, edges, manifest.get("reducers", {}), detached=named)


def manifest_executors(manifest: Mapping[str, Any]) -> tuple[NodeExecutor, ...]:
    """The node executors of a pinned manifest, in node order."""
    return tuple(
        NodeExecutor(n["kind"], n["executor"]["name"], n["executor"]["spec"])
        for n in manifest["nodes"]
    )
