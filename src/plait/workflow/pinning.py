"""What a run pinned at start, and the definition it resumes, forks and verifies with.

A run's manifest pins its definition (plan, executors, tools, budgets) and what its MCP
servers offered. Reading the definition back goes through here: the workflow the
caller gives, else the file the run was started from, checked against the pin, so a
changed workflow file can never silently change a run.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

from plait.core.errors import PlaitError
from plait.workflow.definition import Workflow
from plait.workflow.loader import load_workflow
from plait.workflow.plan_hash import same_plan

W = TypeVar("W", bound=Workflow)


def pinned_model(manifest: dict[str, Any]) -> str | None:
    """The model spec a run pinned at start (``--model`` included), None without one."""
    model = (manifest["workflow"].get("llm") or {}).get("model")
    return None if model is None else str(model)


def pinned_workflow(manifest: dict[str, Any], workflow: Workflow | None = None) -> Workflow:
    """The run's definition: the given one or its source file, checked against the pin."""
    if workflow is None:
        source = manifest.get("source")
        if not source:
            raise PlaitError(
                "E010",
                f"run '{manifest['run_id']}' was started from Python; pass its workflow"
                " (workflow=...) to resume or fork it",
            )
        # The model pinned at start wins (a run started with --model resumes with it).
        workflow = load_workflow(Path(source), pinned_model(manifest))
    # What the run's MCP servers offered was pinned at start; the servers are not asked again.
    workflow = with_catalogue(workflow, manifest.get("mcp_catalogue"))
    if not same_plan(workflow.to_manifest(), manifest["workflow"]):  # a cosmetic edit is not
        raise PlaitError(
            "E010",
            f"run '{manifest['run_id']}': the workflow no longer matches the one pinned at start"
            " (fork the run with --workflow to move it onto a new definition)",
        )
    return workflow


def with_catalogue(workflow: W, catalogue: Mapping[str, Mapping[str, Any]] | None) -> W:
    """``workflow`` with each MCP tool's missing description and input schema pinned.

    Declared values win (CONTRACT.md: MCP tools declare ``input_schema`` or take it
    from the server). Pure: the same catalogue always gives the same definition, so
    start, resume, verify and fork all see the manifest the run pinned.
    """
    if not catalogue:
        return workflow
    tools = dict(workflow.tools)
    groups: dict[str, list[str]] = {}
    for name, entry in catalogue.items():
        tool = tools.get(name)
        if tool is None or tool.mcp is None:
            continue
        if "tools" in entry:  # ``tools: "*"``: one tool per tool the server offered
            del tools[name]
            groups[name] = []
            for offered in entry["tools"]:
                member = dataclasses.replace(
                    tool,
                    name=member_name(name, str(offered["name"])),
                    mcp={**_without(tool.mcp, "tools"), "tool": offered["name"]},
                    description=str(offered.get("description") or ""),
                    input_schema=offered.get("input_schema"),
                )
                tools[member.name] = member
                groups[name].append(member.name)
            continue
        tools[name] = dataclasses.replace(
            tool,
            description=tool.description or str(entry.get("description") or ""),
            input_schema=(
                tool.input_schema if tool.input_schema is not None else entry.get("input_schema")
            ),
        )
    if not groups:
        return dataclasses.replace(workflow, tools=tools)
    nodes = tuple(
        node
        if node.tools is None
        else dataclasses.replace(
            node, tools=tuple(t for name in node.tools for t in groups.get(name, [name]))
        )
        for node in workflow.nodes
    )
    return dataclasses.replace(workflow, tools=tools, nodes=nodes)


def member_name(group: str, tool: str) -> str:
    """The name of one tool of a ``tools: "*"`` entry: ``GROUP_TOOL``, made a valid tool
    name (letters, digits, ``_``, ``-``; at most 64)."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", f"{group}_{tool}")[:64]


def _without(mapping: Mapping[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in mapping.items() if k != key}
