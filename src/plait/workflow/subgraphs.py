"""Subgraph files (§3.9): every workflow file a definition includes, judged before a run.

A subgraph node's file is otherwise read only when the node runs, after the parent's run
was written: a broken child would leave the parent ``running`` for ever, and a file that
includes itself (directly or through other files) would start children without end. So
every child file is loaded and judged, transitively, whenever its parent is (``plait
check``, ``load_workflow``, ``Workflow.plan``): each file at most once per judging, and a
file met again while it is being loaded closes a cycle, refused as PLAIT-E004.

A child's problems become problems of the parent, at the node's ``workflow`` key, keeping
the child's code and naming the child file (and its line). This module never judges a
definition itself; the loader does that for each child file.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from plait import files
from plait.core.errors import PlaitError, Problem
from plait.workflow.checks import NO_MODEL, Issue

if TYPE_CHECKING:
    from plait.workflow.definition import NodeDef, Workflow


@dataclass
class Trail:
    """What one judging of a workflow has met: the files being loaded (outermost first)
    and the problems of every child file judged already (none when it is valid)."""

    root_dir: Path
    """The folder the files of a cycle are named relative to (the outermost file's)."""
    require_model: bool = True
    """Whether an abstract node without a model is a problem (PLAIT-E006), as for the parent."""
    warn: bool = False
    """Whether the judging collects warnings too (``plait check``), child files' included."""
    loading: list[Path] = field(default_factory=list)
    judged: dict[Path, list[Problem]] = field(default_factory=dict)
    warned: dict[Path, list[Problem]] = field(default_factory=dict)

    def name(self, path: Path) -> str:
        return os.path.relpath(path, self.root_dir)


ChildLoader = Callable[[Path, "Trail"], "tuple[Workflow, list[Problem]]"]
"""Loads and judges a child file as part of a judging (``loader.load_child``)."""

_load_child: list[ChildLoader] = []
"""The loader, registered by ``plait.workflow.loader`` when it is imported (the package
imports it first): this module reads no file itself, and imports no loader."""


def use_loader(load_child: ChildLoader) -> None:
    """Judge child files with ``load_child`` (called once, by the loader module)."""
    _load_child[:] = [load_child]


def subgraph_issues(wf: Workflow, require_model: bool, trail: Trail | None = None) -> list[Issue]:
    """The problems of the child files ``wf``'s subgraph nodes include, each at its node's
    ``workflow`` key. ``trail``: the judging ``wf`` is part of (None: ``wf`` is the outermost).
    """
    if not any(node.kind == "subgraph" for node in wf.nodes):
        return []
    trail = trail if trail is not None else Trail(wf.base_dir.resolve(), require_model)
    here = wf.source.resolve() if wf.source is not None else None
    if here is not None:
        trail.loading.append(here)
    try:
        return [issue for i, node in enumerate(wf.nodes) for issue in _child(wf, i, node, trail)]
    finally:
        if here is not None:
            trail.loading.pop()


def _child(wf: Workflow, i: int, node: NodeDef, trail: Trail) -> list[Issue]:
    """The issues node ``i`` inherits from its child file (none for other nodes)."""
    if node.kind != "subgraph" or not isinstance(node.workflow, str):
        return []
    path = wf.base_dir / node.workflow
    if not files.is_regular_file(path):
        return []  # judged already: PLAIT-E004 not found, or PLAIT-E019 not a regular file
    place = ("nodes", i, "workflow")
    node_id = node.id if isinstance(node.id, str) else None
    where = f"node '{node_id}'" if node_id is not None else f"node #{i + 1}"
    full = path.resolve()
    if full in trail.loading:
        chain = [*trail.loading[trail.loading.index(full) :], full]
        cycle = " -> ".join(trail.name(f) for f in chain)
        why = f"workflow file '{node.workflow}' closes a cycle of workflow files: {cycle}"
        return [Issue("E004", f"{where}: {why}", place, node=node_id)]
    if full not in trail.judged:
        trail.judged[full] = _child_problems(path, trail)
    inside = f"{where}: workflow file '{node.workflow}'"
    return [
        Issue(p.code, f"{inside}{_line(p)}: {_for_a_child(p.message)}", place, node=node_id)
        for p in trail.judged[full]
    ]


def _for_a_child(message: str) -> str:
    """A child's problem as its parent reports it: ``--model`` names the top file's model
    only, so a child file without one is told to set its own."""
    return message.replace(f"{NO_MODEL} or pass --model", f"{NO_MODEL} in that file")


def _child_problems(path: Path, trail: Trail) -> list[Problem]:
    """Everything wrong with a child file (nothing when it is valid), its children included;
    its warnings go into ``trail.warned``."""
    try:
        _, warnings = _load_child[0](path, trail)
    except PlaitError as exc:
        trail.warned[path.resolve()] = list(getattr(exc, "warnings", ()))
        return list(exc.problems)
    trail.warned[path.resolve()] = warnings
    return []


def subgraph_warnings(wf: Workflow, trail: Trail) -> list[Issue]:
    """The warnings of the child files ``wf``'s subgraph nodes include (judged already, in
    ``trail``), each at its node's ``workflow`` key, naming the child file."""
    found: list[Issue] = []
    for i, node in enumerate(wf.nodes):
        if node.kind != "subgraph" or not isinstance(node.workflow, str):
            continue
        node_id = node.id if isinstance(node.id, str) else None
        where = f"node '{node_id}'" if node_id is not None else f"node #{i + 1}"
        inside = f"{where}: workflow file '{node.workflow}'"
        full = files.resolved(wf.base_dir / node.workflow)
        for w in trail.warned.get(full, ()) if full is not None else ():
            message = f"{inside}{_line(w)}: {w.message}"
            found.append(Issue(w.code, message, ("nodes", i, "workflow"), node=node_id))
    return found


def _line(problem: Problem) -> str:
    return f" line {problem.line}" if problem.line is not None else ""
