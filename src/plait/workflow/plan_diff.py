"""The difference between two plans by meaning (``plait diff``).

Both sides are pinned definitions (``Workflow.to_manifest()`` shape: a file's, or the
version a run pinned), compared less what is for people (``plan_hash.semantic_plan``).
Nodes match by id, edges by their ends, tools and reducers by name; a governance flow
is reported on its own besides the node that carries it. Pure: no file is read here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from plait.workflow.plan_hash import plan_hash, semantic_plan

PARTS = ("nodes", "edges", "reducers", "tools", "flows")
"""The parts listed with ``added``, ``removed`` and ``changed`` (nodes, tools and reducers
by name, edges as ``FROM -> TO``, flows by their node); other keys are settings."""


def diff_plans(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    """``{"equal", "old", "new", "nodes", "edges", "reducers", "tools", "flows",
    "settings"}``: each part's ``added``, ``removed`` and ``changed`` names, sorted;
    ``settings``: the other top-level keys whose value changed (name, budgets, llm, ...)."""
    a, b = semantic_plan(old), semantic_plan(new)
    found: dict[str, Any] = {
        "equal": a == b,
        "old": plan_hash(old),
        "new": plan_hash(new),
        "nodes": _compare(_by_id(a.get("nodes")), _by_id(b.get("nodes"))),
        "edges": _compare(_by_ends(a.get("edges")), _by_ends(b.get("edges"))),
        "reducers": _compare(dict(a.get("reducers") or {}), dict(b.get("reducers") or {})),
        "tools": _compare(dict(a.get("tools") or {}), dict(b.get("tools") or {})),
        "flows": _compare(_flows(a.get("nodes")), _flows(b.get("nodes"))),
    }
    shared = ("nodes", "edges", "reducers", "tools")
    keys = sorted((set(a) | set(b)) - set(shared))
    found["settings"] = {"changed": [k for k in keys if a.get(k) != b.get(k)]}
    return found


def described(found: Mapping[str, Any]) -> list[str]:
    """The difference in words, one line each (none when the plans are equal)."""
    lines: list[str] = []
    for part in PARTS:
        what = "flow of node" if part == "flows" else part[:-1]
        for verb in ("added", "removed", "changed"):
            lines += [f"{what} '{name}' {verb}" for name in found[part][verb]]
    lines += [f"setting '{key}' changed" for key in found["settings"]["changed"]]
    return lines


def _compare(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, list[str]]:
    return {
        "added": sorted(k for k in b if k not in a),
        "removed": sorted(k for k in a if k not in b),
        "changed": sorted(k for k in a if k in b and a[k] != b[k]),
    }


def _by_id(nodes: Any) -> dict[str, Any]:
    return {str(n["id"]): n for n in nodes or ()}


def _by_ends(edges: Any) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for e in edges or ():
        key = f"{e['from']} -> {e['to']}"
        found[key] = [*found.get(key, []), e]  # parallel edges stay one entry
    return found


def _flows(nodes: Any) -> dict[str, Any]:
    """The governance flow of each abstract node that has one, by node."""
    return {
        str(n["id"]): n["executor"]["spec"]["flow"]
        for n in nodes or ()
        if isinstance(n.get("executor", {}).get("spec", {}).get("flow"), dict)
    }
