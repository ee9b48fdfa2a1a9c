"""A run's own version: its workflow rebuilt from the definition its manifest pinned.

A run resumes on the plan it started with, whatever its file says now (issue #16): when
the file changed in meaning, the definition is rebuilt from the manifest — nodes, edges,
reducers, tools with their bindings, asks, budgets, flows and model settings, all pinned
at start. Python tool code is live code (as DBOS has it): a ``python:`` binding is
resolved again in the file's folder, so the functions are those of today's code. The
rebuilt definition is accepted only if it pins exactly what the run pinned.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from plait.core.errors import PlaitError
from plait.tools.python import resolve_python
from plait.workflow.definition import EdgeDef, NodeDef, ToolDef, Workflow
from plait.workflow.plan_hash import same_plan


def workflow_from_pinned(manifest: Mapping[str, Any]) -> Workflow:
    """The workflow the run ``manifest`` belongs to pinned, its tools resolved in the folder
    of the run's source file; PLAIT-E010 when it cannot be rebuilt exactly."""
    pinned: Mapping[str, Any] = manifest["workflow"]
    source = Path(str(manifest["source"]))
    try:
        workflow = Workflow(
            name=str(pinned["name"]),
            nodes=tuple(_node(entry) for entry in pinned["nodes"]),
            edges=tuple(_edge(entry) for entry in pinned["edges"]),
            reducers=dict(pinned.get("reducers") or {}),
            tools={name: _tool(entry, source.parent) for name, entry in pinned["tools"].items()},
            description=str(pinned.get("description") or ""),
            durability=str(pinned.get("durability") or "normal"),
            llm=pinned.get("llm"),
            budgets=_budgets(pinned.get("budgets") or {}),
            asks=dict(pinned.get("asks") or {}),
            on_dangling=str(pinned.get("on_dangling") or "redeliver"),
            source=source,
            retry=pinned.get("retry"),
        )
        rebuilt = workflow.to_manifest()
    except PlaitError as exc:
        raise PlaitError(
            "E010",
            f"run '{manifest['run_id']}': its pinned version cannot be rebuilt here: {exc}",
        ) from exc
    if not same_plan(rebuilt, pinned):
        raise PlaitError(
            "E010", f"run '{manifest['run_id']}': its pinned version cannot be rebuilt exactly"
        )
    return workflow


def _node(entry: Mapping[str, Any]) -> NodeDef:
    kind = str(entry["kind"])
    executor = entry["executor"]
    spec = dict(executor.get("spec") or {})
    settings: dict[str, Any] = {
        "retries": int(entry.get("retries") or 0),
        "writes": tuple(entry.get("writes") or ()),
        "retry": entry.get("retry"),
    }
    if kind == "tool":
        settings["tool"] = executor["name"]
        if spec.get("output") is not None:
            settings["output"] = spec["output"]
    elif kind == "ask":
        settings["ask"] = spec
    elif kind == "timer":
        settings["sleep_s"] = int(spec["sleep_ms"]) / 1000
    elif kind == "subgraph":
        settings["workflow"] = spec["workflow"]
    else:
        settings["tools"] = tuple(spec.get("tools") or ())
        for key in ("agents", "handoffs"):
            if spec.get(key) is not None:
                settings[key] = tuple(spec[key])
        for key in ("instruction", "response_schema", "tool_results_into", "flow"):
            if spec.get(key) is not None:
                settings[key] = spec[key]
    return NodeDef(id=str(entry["id"]), kind=kind, **settings)


def _edge(entry: Mapping[str, Any]) -> EdgeDef:
    return EdgeDef(entry["from"], entry["to"], entry.get("when"), entry.get("max_cycles"))


def _tool(entry: Mapping[str, Any], folder: Path) -> ToolDef:
    python = entry.get("python")
    command = entry.get("command")
    return ToolDef(
        name=str(entry["name"]),
        python=python,
        command=tuple(command) if command is not None else None,
        mcp=entry.get("mcp"),
        callable=resolve_python(python, folder, tool=entry["name"]) if python else None,
        description=str(entry.get("description") or ""),
        input_schema=entry.get("input_schema"),
        strict=bool(entry.get("strict")),
        approval=bool(entry.get("approval")),
        deferred=bool(entry.get("deferred")),
        writes=tuple(entry.get("writes") or ()),
        timeout_s=entry.get("timeout_s"),
    )


def _budgets(pinned: Mapping[str, Any]) -> dict[str, Any]:
    """Ceilings as a workflow file writes them (dollars, seconds) from the core units."""
    budgets: dict[str, Any] = {}
    for key in ("max_supersteps", "max_tokens", "max_storage_bytes"):
        if pinned.get(key) is not None:
            budgets[key] = pinned[key]
    if pinned.get("max_usd_micros") is not None:
        budgets["max_usd"] = int(pinned["max_usd_micros"]) / 1_000_000
    if pinned.get("max_wall_ms") is not None:
        budgets["max_wall_s"] = int(pinned["max_wall_ms"]) / 1000
    return budgets
