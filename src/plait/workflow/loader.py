"""Loading a workflow file: YAML or JSON into a checked ``Workflow``, problems by line.

Theory of operation: the file is parsed (``plait.workflow.documents``) into
mappings and lists that remember the line of every key and item; ``_Reader``
turns them into definition objects, keeping whatever it cannot make sense of as
it is written and noting problems of shape it meets on the way; the checks
(``plait.workflow.checks``) then judge the definition, naming each problem by
its place in the document, and the reader turns places into lines. The files of
subgraph nodes are loaded the same way (``plait.workflow.subgraphs``), their problems
reported at the node that includes them. Every problem of a file is reported at
once, in one ``WorkflowError``, each rendered as ``FILE:LINE: PLAIT-Ennn message``.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from plait import files
from plait.core.errors import PlaitError, Problem
from plait.tools.python import PYTHON_SPEC, resolve_python
from plait.workflow.checks import (
    EDGE_KEYS,
    NODE_KEYS,
    TOOL_KEYS,
    TOP_KEYS,
    Issue,
    flow_warnings,
    hint,
    judge,
    node_kind,
)
from plait.workflow.definition import (
    EdgeDef,
    NodeDef,
    ToolDef,
    Workflow,
    WorkflowError,
    remember_plan,
    tool_def,
)
from plait.workflow.documents import flow_file, parse_file
from plait.workflow.located import Place, line_at, plain, show
from plait.workflow.subgraphs import Trail, subgraph_issues, subgraph_warnings, use_loader


def load_workflow(
    path: str | os.PathLike[str],
    model_override: str | None = None,
    *,
    require_model: bool = True,
) -> Workflow:
    """Read, check and return a workflow file (YAML or JSON; ``.json`` is read as JSON).

    Raises one WorkflowError (``source`` = ``path`` as given) carrying every
    problem, each with its line. ``model_override`` replaces ``llm.model`` (the
    CLI's ``--model``); ``require_model=False`` skips PLAIT-E006 (for drawing).
    """
    return _load(path, model_override, require_model, warn=False)[0]


def load_with_warnings(
    path: str | os.PathLike[str],
    model_override: str | None = None,
    *,
    require_model: bool = True,
) -> tuple[Workflow, list[Problem]]:
    """``load_workflow`` plus the warnings of the file, each with its line (``plait check``):
    what a governance flow's guards read that nothing writes, or that can never hold.

    A file with errors raises them as ``load_workflow`` does, carrying its warnings too
    (``WorkflowError.warnings``), so ``check`` reports every problem together.
    """
    return _load(path, model_override, require_model, warn=True)


def load_child(path: Path, trail: Trail) -> tuple[Workflow, list[Problem]]:
    """Load a subgraph node's file as part of the judging ``trail`` (its parent's), so its
    own children are judged too, each file once, and a file including itself is refused;
    with its warnings when the judging collects them."""
    return _load(path, None, trail.require_model, warn=trail.warn, trail=trail)


use_loader(load_child)


def _load(
    path: str | os.PathLike[str],
    model_override: str | None,
    require_model: bool,
    warn: bool,
    trail: Trail | None = None,
) -> tuple[Workflow, list[Problem]]:
    source = Path(path)
    doc, found = parse_file(source)
    reader = _Reader(source, doc)
    for line, message in found:
        reader.issues.append(Issue("E019", message, line=line))
    fatal = doc is None and bool(found)
    wf = None if fatal else reader.workflow(model_override)
    issues = reader.issues
    plan_issues: list[Issue] = []
    plan = None
    if wf is not None:
        judged, plan_judged, plan = judge(wf, require_model)
        issues += [reader.locate(i, model_override) for i in judged]
        plan_issues = [reader.locate(i, model_override) for i in plan_judged]
        if trail is None:
            trail = Trail(wf.base_dir.resolve(), require_model, warn=warn)
        children = subgraph_issues(wf, require_model, trail)
        issues += [reader.locate(i, model_override) for i in children]
    warnings = (
        [
            reader.locate(i, model_override).problem()
            for i in (*flow_warnings(wf), *subgraph_warnings(wf, trail))
        ]
        if warn and wf is not None and trail is not None
        else []
    )
    if issues or plan_issues:
        issues.sort(key=lambda i: (i.line is None, i.line or 0))
        raise WorkflowError(
            [i.problem() for i in (*issues, *plan_issues)], files.shown(path), warnings
        )
    assert wf is not None
    if require_model and plan is not None:
        remember_plan(wf, plan)  # judged whole just now: a run does not judge it again
    return wf, warnings


class _Reader:
    """Turns a parsed document into a Workflow, noting shape problems with their lines."""

    def __init__(self, source: Path, doc: Any) -> None:
        self.source = source
        self.doc = doc
        self.issues: list[Issue] = []
        self.node_origin: list[int] = []
        self.edge_origin: list[int] = []
        self.flow_files: dict[int, str] = {}  # node's place in the file -> its flow file

    def add(self, code: str, message: str, place: Place) -> None:
        self.issues.append(Issue(code, message, place, line_at(self.doc, place)))

    def locate(self, issue: Issue, model_override: str | None) -> Issue:
        """The issue with its place translated to the file and its line filled in."""
        place = issue.place
        if place[:1] == ("nodes",) and len(place) > 1 and isinstance(place[1], int):
            place = ("nodes", self.node_origin[place[1]], *place[2:])
        elif place[:1] == ("edges",) and len(place) > 1 and isinstance(place[1], int):
            place = ("edges", self.edge_origin[place[1]], *place[2:])
        node = place[1] if place[:1] == ("nodes",) and len(place) > 2 else None
        flow_file = self.flow_files.get(node) if isinstance(node, int) else None
        if flow_file is not None and place[2] == "flow" and "flow file" not in issue.message:
            # A flow kept in its own file: the line is the node's ``flow:`` key, so say where
            # the flow itself lives.
            issue = dataclasses.replace(issue, message=f"{issue.message} (flow file '{flow_file}')")
        if model_override is not None and place[:2] == ("llm", "model"):
            return dataclasses.replace(
                issue, place=place, message=issue.message + " (from --model)"
            )
        return dataclasses.replace(issue, place=place, line=line_at(self.doc, place))

    def entry(self, value: Any, keys: Sequence[str], where: str, place: Place) -> bool:
        """A mapping entry: unknown keys and keys without a value are problems."""
        if not isinstance(value, Mapping):
            self.add("E019", f"{where}: must be a mapping, got {show(value)}", place)
            return False
        for key, item in value.items():
            if key not in keys:
                self.add("E019", f"{where}: unknown key '{key}'{hint(key, keys)}", (*place, key))
            elif item is None:
                self.add("E019", f"{where}: '{key}' has no value", (*place, key))
        return True

    def section(self, doc: Mapping[str, Any], key: str, kind: type) -> Any:
        value = doc.get(key)
        if value is None:
            return None
        if not isinstance(value, kind):
            wanted = "a list" if kind is list else "a mapping"
            self.add("E019", f"{key} must be {wanted}, got {show(value)}", (key,))
            return None
        return value

    def workflow(self, model_override: str | None) -> Workflow | None:
        doc = self.doc
        if not isinstance(doc, Mapping):
            self.add("E019", "the file must hold a mapping with at least name and nodes", ())
            return None
        for key in doc:
            if key not in TOP_KEYS:
                self.add("E019", f"unknown top-level key '{key}'{hint(key, TOP_KEYS)}", (key,))
        if doc.get("name") is None:
            self.add("E019", "missing required key 'name'", ("name",))
        llm = self.section(doc, "llm", Mapping)
        if model_override is not None:
            llm = {**(llm or {}), "model": model_override}
        return Workflow(
            name=doc.get("name"),  # type: ignore[arg-type]  # judged below
            nodes=self.nodes(self.section(doc, "nodes", list) or []),
            edges=self.edges(self.section(doc, "edges", list) or []),
            reducers=plain(self.section(doc, "reducers", Mapping) or {}),
            tools=self.tools(self.section(doc, "tools", Mapping) or {}),
            description=doc.get("description") or "",
            durability=doc.get("durability") or "normal",
            llm=plain(llm) if llm is not None else None,
            budgets=plain(self.section(doc, "budgets", Mapping) or {}),
            asks=plain(self.section(doc, "asks", Mapping) or {}),
            on_dangling=doc.get("on_dangling") or "redeliver",
            source=self.source,
            retry=plain(doc["retry"]) if doc.get("retry") is not None else None,
            schedules=tuple(plain(self.section(doc, "schedules", list) or ())),
        )

    def nodes(self, items: list[Any]) -> tuple[NodeDef, ...]:
        nodes = []
        for i, item in enumerate(items):
            node_id = item.get("id") if isinstance(item, Mapping) else None
            where = f"node '{node_id}'" if isinstance(node_id, str) else f"node #{i + 1}"
            if not self.entry(item, NODE_KEYS, where, ("nodes", i)):
                continue
            if item.get("id") is None:  # a null id was reported as a key without a value
                if "id" not in item:
                    self.add("E019", f"{where}: missing required key 'id'", ("nodes", i))
                continue
            flow = item.get("flow")
            if isinstance(flow, str):
                self.flow_files[i] = flow
                flow, found, code = flow_file(flow, self.source.parent)
                for _, message in found:
                    self.add(code, f"{where}: {message}", ("nodes", i, "flow"))
            settings = {key: plain(item.get(key)) for key in NODE_KEYS if key not in ("id", "flow")}
            for key in ("tools", "writes", "agents", "handoffs"):
                if isinstance(settings[key], list):
                    settings[key] = tuple(settings[key])
            settings["retries"] = 0 if settings["retries"] is None else settings["retries"]
            settings["writes"] = () if settings["writes"] is None else settings["writes"]
            kind = node_kind(
                settings["tool"], settings["ask"], settings["sleep_s"], settings["workflow"]
            )
            nodes.append(NodeDef(id=item["id"], kind=kind, flow=plain(flow), **settings))
            self.node_origin.append(i)
        return tuple(nodes)

    def edges(self, items: list[Any]) -> tuple[EdgeDef, ...]:
        edges = []
        for i, item in enumerate(items):
            ends = (item.get("from"), item.get("to")) if isinstance(item, Mapping) else (None, None)
            where = (
                f"edge '{ends[0]} -> {ends[1]}'"
                if all(isinstance(e, str) for e in ends)
                else f"edge #{i + 1}"
            )
            if not self.entry(item, EDGE_KEYS, where, ("edges", i)):
                continue
            for key in ("from", "to"):
                if key not in item:
                    self.add("E019", f"{where}: missing required key '{key}'", ("edges", i))
            if item.get("from") is not None and item.get("to") is not None:
                edges.append(
                    EdgeDef(item["from"], item["to"], item.get("when"), item.get("max_cycles"))
                )
                self.edge_origin.append(i)
        return tuple(edges)

    def tools(self, entries: Mapping[str, Any]) -> dict[str, ToolDef]:
        tools: dict[str, ToolDef] = {}
        for name, item in entries.items():
            place: Place = ("tools", name)
            if not self.entry(item, TOOL_KEYS, f"tool '{name}'", place):
                continue
            settings = {key: plain(item[key]) for key in TOOL_KEYS if item.get(key) is not None}
            for key in ("command", "writes"):
                if isinstance(settings.get(key), list):
                    settings[key] = tuple(settings[key])
            fn = None
            python = settings.get("python")
            single = sum(key in settings for key in ("python", "command", "mcp")) == 1
            if isinstance(python, str) and PYTHON_SPEC.match(python) and single:
                try:
                    fn = resolve_python(python, self.source.parent, tool=name)
                except PlaitError as exc:
                    self.add(exc.code, exc.detail, (*place, "python"))
            description = settings.pop("description", None)
            tools[name] = tool_def(name, fn, description=description, **settings)
        return tools
