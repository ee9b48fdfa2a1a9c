"""The definition model: what a workflow is, built in Python or loaded from YAML/JSON.

Both roads lead to the same frozen ``Workflow`` and through the same checks
(``Workflow.problems``), so a builder-made workflow and a file fail the same
way. A file adds one thing: every problem names the line it comes from, as
``FILE:LINE: PLAIT-Ennn message``. Every problem of a file is reported at once,
in one ``WorkflowError``.

Theory of operation for files: the text is parsed (YAML with a safe loader that
refuses duplicate keys, or JSON by a small position-keeping reader) into
mappings and lists that remember the line of every key and item; the reader
turns them into definition objects, keeping whatever it cannot make sense of
as it is written; ``Workflow.problems`` then judges the definition, naming each
problem by its place in the document (``("nodes", 3, "retries")``), and the
loader turns places into lines.

This module never runs a tool; it does import the modules of Python tools
(that is how ``plait check`` knows they exist).
"""

from __future__ import annotations

import bisect
import dataclasses
import difflib
import json
import math
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from plait.core.env import DEFAULT_MAX_SUPERSTEPS, Budgets, NodeExecutor
from plait.core.errors import PlaitError, Problem
from plait.core.plan import NODE_KINDS, EdgeSpec, NodeSpec, Plan, build_plan
from plait.core.reducers import REDUCERS
from plait.tools.python import PYTHON_SPEC, describe, input_schema, resolve_python

MAX_FILE_BYTES = 10_000_000
MAX_VALUES = 1_000_000
MAX_DEPTH = 100
DURABILITIES = ("normal", "strict")
ON_DANGLING = ("redeliver", "fail")
TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")

_KIND_KEYS = (("tool", "tool"), ("ask", "ask"), ("sleep_s", "timer"), ("workflow", "subgraph"))
_ABSTRACT_ONLY = ("instruction", "tools", "response_schema", "flow", "tool_results_into")

# ---------------------------------------------------------------------------
# The definition
# ---------------------------------------------------------------------------


class WorkflowError(PlaitError):
    """Everything wrong with one definition; ``source`` is the file it came from, if any."""

    def __init__(self, problems: Sequence[Problem], source: str | None = None) -> None:
        super().__init__(problems[0].code, problems[0].message, problems)
        self.source = source

    def lines(self) -> list[str]:
        """One ``FILE:LINE: PLAIT-Ennn message`` line per problem."""
        return [p.render(self.source) for p in self.problems]


@dataclass(frozen=True)
class ToolDef:
    """A tool: exactly one source (a Python function, a command or an MCP server tool)."""

    name: str
    python: str | None = None
    command: tuple[str, ...] | None = None
    mcp: Mapping[str, Any] | None = None
    callable: Callable[..., Any] | None = field(default=None, compare=False)
    description: str = ""
    input_schema: Mapping[str, Any] | None = None
    strict: bool = False
    approval: bool = False
    deferred: bool = False
    writes: tuple[str, ...] = ()
    timeout_s: float | None = None

    @property
    def source_kind(self) -> str:
        """``python``, ``command`` or ``mcp``: how the driver calls it."""
        if self.command is not None:
            return "command"
        if self.mcp is not None:
            return "mcp"
        return "python"


@dataclass(frozen=True)
class NodeDef:
    """A node; its kind follows from which of tool/ask/sleep_s/workflow it sets (none: abstract)."""

    id: str
    kind: str
    tool: str | None = None
    retries: int = 0
    instruction: str | None = None
    tools: tuple[str, ...] | None = None
    response_schema: Mapping[str, Any] | None = None
    flow: Any = None
    tool_results_into: str | None = None
    ask: Mapping[str, Any] | None = None
    sleep_s: float | None = None
    workflow: str | None = None
    writes: tuple[str, ...] = ()


@dataclass(frozen=True)
class EdgeDef:
    src: str
    dst: str
    when: str | None = None
    max_cycles: int | None = None


def node_kind(
    tool: object = None, ask: object = None, sleep_s: object = None, workflow: object = None
) -> str:
    """The kind a node's settings make it (the first set wins; setting several is a problem)."""
    given = {"tool": tool, "ask": ask, "sleep_s": sleep_s, "workflow": workflow}
    return next((kind for key, kind in _KIND_KEYS if given[key] is not None), "abstract")


@dataclass(frozen=True)
class Workflow:
    """A workflow definition: nodes (the first is the entry), edges, reducers and tools.

    Build one with ``Workflow.new(name)`` and its chainable methods (each returns
    a new Workflow), or load a file with ``load_workflow``. ``plan()`` validates
    it; ``to_manifest()`` is what a run pins.
    """

    name: str
    nodes: tuple[NodeDef, ...] = ()
    edges: tuple[EdgeDef, ...] = ()
    reducers: Mapping[str, str] = field(default_factory=dict)
    tools: Mapping[str, ToolDef] = field(default_factory=dict)
    description: str = ""
    durability: str = "normal"
    llm: Mapping[str, Any] | None = None
    budgets: Mapping[str, Any] = field(default_factory=dict)
    asks: Mapping[str, Any] = field(default_factory=dict)
    on_dangling: str = "redeliver"
    source: Path | None = None

    # -- building ----------------------------------------------------------

    @classmethod
    def new(
        cls,
        name: str,
        *,
        description: str = "",
        durability: str = "normal",
        on_dangling: str = "redeliver",
    ) -> Workflow:
        return cls(name, description=description, durability=durability, on_dangling=on_dangling)

    @property
    def base_dir(self) -> Path:
        """The folder relative paths are read from: the file's folder, else the current one."""
        if self.source is None:
            return Path.cwd()
        return Path(os.path.abspath(self.source)).parent

    def tool(
        self,
        fn: Callable[..., Any] | ToolDef | str,
        /,
        *,
        name: str | None = None,
        python: str | None = None,
        command: Sequence[str] | None = None,
        mcp: Mapping[str, Any] | None = None,
        description: str | None = None,
        input_schema: Mapping[str, Any] | None = None,
        strict: bool = False,
        approval: bool = False,
        deferred: bool = False,
        writes: Sequence[str] = (),
        timeout_s: float | None = None,
    ) -> Workflow:
        """Add a tool: a Python function (named after it), a ToolDef, or a name plus a source."""
        if isinstance(fn, ToolDef):
            return self._with_tool(fn)
        settings: dict[str, Any] = {
            "strict": strict,
            "approval": approval,
            "deferred": deferred,
            "writes": tuple(writes),
            "timeout_s": timeout_s,
            "input_schema": input_schema,
        }
        if isinstance(fn, str):
            callable_ = None
            if python is not None and command is None and mcp is None:
                callable_ = resolve_python(python, self.base_dir, tool=fn)
            return self._with_tool(
                _python_tool(
                    fn,
                    callable_,
                    python=python,
                    command=tuple(command) if command is not None else None,
                    mcp=dict(mcp) if mcp is not None else None,
                    description=description,
                    **settings,
                )
            )
        return self._with_tool(
            _python_tool(name or _function_name(fn), fn, description=description, **settings)
        )

    def _with_tool(self, tool: ToolDef) -> Workflow:
        known = self.tools.get(tool.name)
        if known is not None:
            if known.callable is not None and known.callable is tool.callable:
                return self
            raise WorkflowError(
                [Problem("E019", f"tool '{tool.name}': defined twice (tool names are unique)")]
            )
        return dataclasses.replace(self, tools={**self.tools, tool.name: tool})

    def _tool_name(self, tool: str | Callable[..., Any]) -> tuple[Workflow, str]:
        if isinstance(tool, str):
            return self, tool
        name = _function_name(tool)
        known = self.tools.get(name)
        if known is not None and known.callable is tool:
            return self, name
        return self.tool(tool), name

    def node(
        self,
        id: str,
        *,
        tool: str | Callable[..., Any] | None = None,
        retries: int = 0,
        instruction: str | None = None,
        tools: Sequence[str | Callable[..., Any]] | None = None,
        response_schema: Mapping[str, Any] | None = None,
        flow: Any = None,
        tool_results_into: str | None = None,
        ask: str | Mapping[str, Any] | None = None,
        sleep_s: float | None = None,
        workflow: str | None = None,
        writes: Sequence[str] = (),
    ) -> Workflow:
        """Add a node; a function given as ``tool`` (or in ``tools``) is registered as a tool."""
        wf = self
        tool_name = None
        if tool is not None:
            wf, tool_name = wf._tool_name(tool)
        tool_names = None
        if tools is not None:
            tool_names = []
            for item in tools:
                wf, item_name = wf._tool_name(item)
                tool_names.append(item_name)
        if isinstance(flow, str):
            flow = _flow_from_file(flow, wf.base_dir, f"node '{id}'")
        node = NodeDef(
            id=id,
            kind=node_kind(tool_name, ask, sleep_s, workflow),
            tool=tool_name,
            retries=retries,
            instruction=instruction,
            tools=tuple(tool_names) if tool_names is not None else None,
            response_schema=response_schema,
            flow=flow,
            tool_results_into=tool_results_into,
            ask={"prompt": ask} if isinstance(ask, str) else ask,
            sleep_s=sleep_s,
            workflow=workflow,
            writes=tuple(writes),
        )
        return dataclasses.replace(wf, nodes=(*wf.nodes, node))

    def edge(
        self, src: str, dst: str, *, when: str | None = None, max_cycles: int | None = None
    ) -> Workflow:
        return dataclasses.replace(self, edges=(*self.edges, EdgeDef(src, dst, when, max_cycles)))

    def reducer(self, key: str, name: str) -> Workflow:
        """Merge results for ``key`` with a named reducer (lww, append, extend, sum, ...)."""
        return dataclasses.replace(self, reducers={**self.reducers, key: name})

    def model(self, spec: str, **settings: Any) -> Workflow:
        """Set ``llm.model`` (and other ``llm`` settings such as ``max_tokens``)."""
        return dataclasses.replace(self, llm={**(self.llm or {}), "model": spec, **settings})

    def budget(self, **ceilings: Any) -> Workflow:
        """Set budget ceilings in file units: ``max_usd`` dollars, ``max_wall_s`` seconds, ..."""
        return dataclasses.replace(self, budgets={**self.budgets, **ceilings})

    # -- judging -----------------------------------------------------------

    def problems(self, *, require_model: bool = True) -> tuple[Problem, ...]:
        """Everything wrong with this definition (empty when it can run)."""
        issues, plan_issues, _ = _judge(self, require_model)
        return tuple(i.problem() for i in (*issues, *plan_issues))

    def plan(self) -> Plan:
        """The validated core plan; raises WorkflowError carrying every problem."""
        issues, plan_issues, plan = _judge(self, require_model=True)
        if issues or plan_issues or plan is None:
            source = str(self.source) if self.source is not None else None
            raise WorkflowError([i.problem() for i in (*issues, *plan_issues)], source)
        return plan

    # -- what a run pins -----------------------------------------------------

    def executors(self) -> tuple[NodeExecutor, ...]:
        """How each node runs, in node order (a valid workflow only)."""
        return tuple(_executor(self, node) for node in self.nodes)

    def to_budgets(self) -> Budgets:
        """The budget ceilings in core units (micro-dollars, milliseconds)."""
        b = self.budgets
        usd, wall = b.get("max_usd"), b.get("max_wall_s")
        return Budgets(
            max_supersteps=b.get("max_supersteps", DEFAULT_MAX_SUPERSTEPS),
            max_tokens=b.get("max_tokens"),
            max_usd_micros=None if usd is None else half_up(usd, 1_000_000),
            max_wall_ms=None if wall is None else half_up(wall, 1000),
            max_storage_bytes=b.get("max_storage_bytes"),
        )

    def to_manifest(self) -> dict[str, Any]:
        """A canonical-JSON description of the definition (no callables); validates first."""
        self.plan()
        executors = self.executors()
        manifest: dict[str, Any] = {
            "name": self.name,
            "durability": self.durability,
            "on_dangling": self.on_dangling,
            "nodes": [_node_manifest(n, x) for n, x in zip(self.nodes, executors, strict=True)],
            "edges": [_edge_manifest(e) for e in self.edges],
            "reducers": dict(self.reducers),
            "tools": {name: _tool_manifest(t) for name, t in self.tools.items()},
            "budgets": self.to_budgets().to_json(),
        }
        if self.description:
            manifest["description"] = self.description
        if self.llm is not None:
            manifest["llm"] = _plain(self.llm)
        if self.asks:
            manifest["asks"] = _plain(self.asks)
        return manifest


def _function_name(fn: Callable[..., Any]) -> str:
    name = getattr(fn, "__name__", None)
    if not isinstance(name, str) or not name.isidentifier():
        raise WorkflowError(
            [Problem("E019", f"tool {fn!r}: has no usable __name__; pass name=... to tool()")]
        )
    return name


def half_up(value: float, scale: int) -> int:
    """``value * scale`` rounded half-up, computed on the decimal text (2.675 stays 2.675)."""
    return int((Decimal(repr(value)) * scale).quantize(Decimal(1), rounding=ROUND_HALF_UP))


def _python_tool(
    name: str, fn: Callable[..., Any] | None, *, description: str | None, **settings: Any
) -> ToolDef:
    """A ToolDef whose missing description and input schema are read from ``fn``."""
    if fn is not None:
        if settings.get("python") is None:
            settings["python"] = f"{fn.__module__}:{fn.__qualname__}"
        if settings.get("input_schema") is None:
            settings["input_schema"] = input_schema(fn)
        if description is None:
            description = describe(fn)
    return ToolDef(name, callable=fn, description=description or "", **settings)


def _flow_json(flow: Any) -> Any:
    to_json = getattr(flow, "to_json", None)
    return to_json() if callable(to_json) else _plain(flow)


def _executor(wf: Workflow, node: NodeDef) -> NodeExecutor:
    kind = node.kind
    if kind == "tool":
        return NodeExecutor("tool", node.tool or "", {})
    if kind == "ask":
        ask = node.ask or {}
        spec: dict[str, Any] = {"prompt": ask.get("prompt"), "approval": bool(ask.get("approval"))}
        if ask.get("output_schema") is not None:
            spec["output_schema"] = _plain(ask["output_schema"])
        return NodeExecutor("ask", node.id, spec)
    if kind == "timer":
        return NodeExecutor("timer", node.id, {"sleep_ms": half_up(node.sleep_s or 0, 1000)})
    if kind == "subgraph":
        return NodeExecutor("subgraph", node.workflow or "", {"workflow": node.workflow})
    spec = {"tools": list(node.tools if node.tools is not None else wf.tools)}
    for key in ("instruction", "response_schema", "tool_results_into"):
        value = getattr(node, key)
        if value is not None:
            spec[key] = _plain(value)
    if node.flow is not None:
        spec["flow"] = _flow_json(node.flow)
    return NodeExecutor("abstract", node.id, spec)


def _node_manifest(node: NodeDef, executor: NodeExecutor) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "id": node.id,
        "kind": node.kind,
        "retries": node.retries,
        "executor": {"name": executor.name, "spec": dict(executor.spec)},
    }
    if node.writes:
        entry["writes"] = list(node.writes)
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
        entry["mcp"] = _plain(tool.mcp)
    if tool.input_schema is not None:
        entry["input_schema"] = _plain(tool.input_schema)
    if tool.timeout_s is not None:
        entry["timeout_s"] = tool.timeout_s
    return entry


def manifest_plan(manifest: Mapping[str, Any]) -> Plan:
    """The plan of a pinned manifest (resume, verify and fork never reread the file)."""
    nodes = [NodeSpec(n["id"], n["kind"], n["retries"]) for n in manifest["nodes"]]
    edges = [
        EdgeSpec(e["from"], e["to"], e.get("when"), e.get("max_cycles")) for e in manifest["edges"]
    ]
    return build_plan(nodes, edges, manifest.get("reducers", {}))


def manifest_executors(manifest: Mapping[str, Any]) -> tuple[NodeExecutor, ...]:
    """The node executors of a pinned manifest, in node order."""
    return tuple(
        NodeExecutor(n["kind"], n["executor"]["name"], n["executor"]["spec"])
        for n in manifest["nodes"]
    )


# ---------------------------------------------------------------------------
# Judging a definition
# ---------------------------------------------------------------------------

Place = tuple[str | int, ...]
"""Where a problem is, as a path into the document: ``("nodes", 3, "retries")``."""

Rule = Callable[[Any], str | None]
"""What a value must be: returns the complaint (``must be ..., got ...``) or None."""


@dataclass(frozen=True)
class _Issue:
    code: str
    message: str
    place: Place = ()
    line: int | None = None
    node: str | None = None
    edge: int | None = None

    def problem(self) -> Problem:
        return Problem(self.code, self.message, self.line, self.node, self.edge)


def _pinpoint(wf: Workflow, issues: list[_Issue]) -> list[_Issue]:
    """Name the node (by id) or edge (by index) each issue's place is about."""
    pinned = []
    for issue in issues:
        part, index = (*issue.place, "", "")[:2]
        node_id = wf.nodes[index].id if part == "nodes" and isinstance(index, int) else None
        pinned.append(
            dataclasses.replace(
                issue,
                node=node_id if isinstance(node_id, str) else None,
                edge=index if part == "edges" and isinstance(index, int) else None,
            )
        )
    return pinned


def _show(value: Any) -> str:
    """A value as the user wrote it, JSON-style and short."""
    try:
        text = json.dumps(value, ensure_ascii=False, default=repr)
    except ValueError:  # NaN, circular
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _hint(word: str, choices: Sequence[str]) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.75)
    if close:
        return f" (did you mean '{close[0]}'?)"
    return f" (expected one of: {', '.join(choices)})" if choices else ""


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _want(ok: Any, wanted: str, value: Any) -> str | None:
    return None if ok else f"must be {wanted}, got {_show(value)}"


def _rule(ok: Callable[[Any], Any], wanted: str) -> Rule:
    return lambda v: _want(ok(v), wanted, v)


def _integer(minimum: int) -> Rule:
    return _rule(lambda v: _is_int(v) and v >= minimum, f"an integer >= {minimum}")


def _number(above_zero: bool) -> Rule:
    def rule(v: Any) -> str | None:
        ok = isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
        ok = ok and (v > 0 if above_zero else v >= 0)
        return _want(ok, "a number > 0" if above_zero else "a number >= 0", v)

    return rule


def _one_of(*choices: str) -> Rule:
    return _rule(lambda v: v in choices, " or ".join(f"'{c}'" for c in choices))


def _strings(nonempty: bool) -> Rule:
    def rule(v: Any) -> str | None:
        ok = isinstance(v, list | tuple) and all(isinstance(x, str) and x for x in v)
        wanted = "a non-empty list of strings" if nonempty else "a list of strings"
        return _want(ok and (bool(v) or not nonempty), wanted, v)

    return rule


def _schema(v: Any) -> str | None:
    if not isinstance(v, Mapping):
        return _want(False, "a JSON Schema (a mapping)", v)
    try:
        jsonschema.validators.validator_for(v).check_schema(dict(v))
    except jsonschema.SchemaError as exc:
        return f"is not a valid JSON Schema: {exc.message}"
    return None


def _model(v: Any) -> str | None:
    provider, sep, rest = v.partition(":") if isinstance(v, str) else ("", "", "")
    return _want(provider and sep and rest, "'provider:model' (e.g. 'openai:gpt-4o-mini')", v)


_TEXT = _rule(lambda v: isinstance(v, str), "a string")
_NAME = _rule(lambda v: isinstance(v, str) and v.strip(), "a non-empty string")
_FLAG = _rule(lambda v: isinstance(v, bool), "true or false")
_MAPPING = _rule(lambda v: isinstance(v, Mapping), "a mapping")
_PYTHON = _rule(lambda v: isinstance(v, str) and PYTHON_SPEC.match(v), "'module:function'")
_FLOW = _rule(lambda v: not isinstance(v, str | int | float | list), "a mapping or a file path")


# What each key of each part of a definition must be (file keys = field names).
TOP_RULES: dict[str, Rule] = {
    "name": _NAME, "description": _TEXT, "durability": _one_of(*DURABILITIES),
    "on_dangling": _one_of(*ON_DANGLING),
}  # fmt: skip
NODE_RULES: dict[str, Rule] = {
    "tool": _NAME, "retries": _integer(0), "instruction": _TEXT, "tools": _strings(False),
    "response_schema": _schema, "flow": _FLOW, "tool_results_into": _NAME, "ask": _MAPPING,
    "sleep_s": _number(False), "workflow": _NAME, "writes": _strings(False),
}  # fmt: skip
TOOL_RULES: dict[str, Rule] = {
    "python": _PYTHON, "command": _strings(True), "mcp": _MAPPING, "description": _TEXT,
    "input_schema": _schema, "strict": _FLAG, "approval": _FLAG, "deferred": _FLAG,
    "writes": _strings(False), "timeout_s": _number(True),
}  # fmt: skip
ASK_RULES: dict[str, Rule] = {"prompt": _NAME, "approval": _FLAG, "output_schema": _schema}
MCP_RULES: dict[str, Rule] = {"command": _strings(True), "tool": _NAME}
LLM_RULES: dict[str, Rule] = {
    "model": _model, "max_tokens": _integer(1), "context_tokens": _integer(1),
    "tool_result_chars": _integer(1), "max_effects_per_attempt": _integer(1), "prices": _MAPPING,
}  # fmt: skip
PRICE_RULES: dict[str, Rule] = {"input_per_mtok": _number(False), "output_per_mtok": _number(False)}
BUDGET_RULES: dict[str, Rule] = {
    "max_supersteps": _integer(1), "max_tokens": _integer(0), "max_usd": _number(False),
    "max_wall_s": _number(True), "max_storage_bytes": _integer(0),
}  # fmt: skip
ASKS_RULES: dict[str, Rule] = {"ttl_s": _integer(1)}

TOP_KEYS = ("name", "description", "durability", "nodes", "edges", "reducers", "tools",
            "llm", "budgets", "asks", "on_dangling")  # fmt: skip
NODE_KEYS = ("id", *NODE_RULES)
EDGE_KEYS = ("from", "to", "when", "max_cycles")
TOOL_KEYS = tuple(TOOL_RULES)


class _Judge:
    """Collects issues about one definition."""

    def __init__(self) -> None:
        self.issues: list[_Issue] = []

    def add(self, code: str, message: str, place: Place) -> None:
        self.issues.append(_Issue(code, message, place))

    def fields(
        self,
        values: Any,
        rules: Mapping[str, Rule],
        where: str,
        place: Place,
        required: Sequence[str] = (),
    ) -> None:
        """A mapping's unknown keys, missing required keys, and values that break their rule."""
        prefix = f"{where}: " if where else ""
        if not isinstance(values, Mapping):
            self.add("E019", f"{prefix}must be a mapping, got {_show(values)}", place)
            return
        for key, value in values.items():
            rule = rules.get(key)
            if rule is None:
                self.add(
                    "E019", f"{prefix}unknown key '{key}'{_hint(key, list(rules))}", (*place, key)
                )
            elif (complaint := rule(value)) is not None:
                self.add("E019", f"{prefix}{key} {complaint}", (*place, key))
        for key in required:
            if key not in values:
                self.add("E019", f"{prefix}missing required key '{key}'", place)


def _set_fields(obj: Any, rules: Mapping[str, Rule]) -> dict[str, Any]:
    return {key: getattr(obj, key) for key in rules if getattr(obj, key) is not None}


def _judge(wf: Workflow, require_model: bool) -> tuple[list[_Issue], list[_Issue], Plan | None]:
    """(definition issues, plan issues, the plan when both are empty)."""
    j = _Judge()
    top = {"description": wf.description, "durability": wf.durability}
    top |= {"on_dangling": wf.on_dangling, **({} if wf.name is None else {"name": wf.name})}
    j.fields(top, TOP_RULES, "", ())
    for key, name in wf.reducers.items():
        if name not in REDUCERS:
            why = f"unknown reducer {_show(name)}{_hint(str(name), REDUCERS)}"
            j.add("E019", f"reducer for key '{key}': {why}", ("reducers", key))
    if wf.llm is not None:
        _judge_llm(j, wf.llm, wf.base_dir)
    j.fields(wf.budgets, BUDGET_RULES, "budgets", ("budgets",))
    j.fields(wf.asks, ASKS_RULES, "asks", ("asks",))
    for name, tool in wf.tools.items():
        _judge_tool(j, name, tool)
    if not wf.nodes:
        j.add("E019", "nodes: the workflow has no nodes (the first node is the entry)", ("nodes",))
    model = (wf.llm or {}).get("model")
    for i, node in enumerate(wf.nodes):
        _judge_node(j, wf, i, node)
        if node.kind == "abstract" and require_model and not model:
            message = "abstract (LLM) node without a model: set llm.model or pass --model"
            j.add("E006", f"node '{node.id}': {message}", ("nodes", i))
    edges = [_judge_edge(j, i, edge) for i, edge in enumerate(wf.edges)]
    plan_issues, plan = _plan(wf, edges)
    return _pinpoint(wf, j.issues), _pinpoint(wf, plan_issues), plan


def _judge_llm(j: _Judge, llm: Mapping[str, Any], base_dir: Path) -> None:
    j.fields(llm, LLM_RULES, "llm", ("llm",))
    model = llm.get("model")
    if isinstance(model, str) and model.startswith("scripted:"):
        script = model.partition(":")[2]
        if script and not (base_dir / script).is_file():
            j.add("E004", f"llm: scripted model file '{script}' not found", ("llm", "model"))
    prices = llm.get("prices")
    for spec, price in prices.items() if isinstance(prices, Mapping) else ():
        where = f"llm: price of '{spec}'"
        j.fields(price, PRICE_RULES, where, ("llm", "prices", spec), required=tuple(PRICE_RULES))


def _judge_tool(j: _Judge, name: str, tool: ToolDef) -> None:
    where, place = f"tool '{name}'", ("tools", name)
    if not TOOL_NAME.match(name):
        j.add("E019", f"{where}: a tool name is 1-64 letters, digits, '_' or '-'", place)
    values = _set_fields(tool, TOOL_RULES)
    if tool.callable is not None:
        values.pop("python", None)  # a function given directly: its spec is only a label
    j.fields(values, TOOL_RULES, where, place)
    sources = [key for key in ("python", "command", "mcp") if key in values]
    if len(sources) != 1 and not (not sources and tool.callable is not None):
        got = " and ".join(sources) or "none"
        j.add("E019", f"{where}: give exactly one of python, command or mcp (got {got})", place)
    if isinstance(tool.mcp, Mapping):
        j.fields(tool.mcp, MCP_RULES, f"{where}: mcp", (*place, "mcp"), required=tuple(MCP_RULES))
    if tool.approval is True and tool.deferred is True:
        message = f"{where}: a tool is either approval or deferred, not both"
        j.add("E019", message, (*place, "deferred"))


def _judge_node(j: _Judge, wf: Workflow, i: int, node: NodeDef) -> None:
    place: Place = ("nodes", i)
    where = f"node '{node.id}'" if isinstance(node.id, str) else f"node #{i + 1}"
    if not isinstance(node.id, str):
        why = f"id must be a string, got {_show(node.id)} (quote ids like yes, no, on, off)"
        j.add("E019", f"{where}: {why}", (*place, "id"))
    values = _set_fields(node, NODE_RULES)
    j.fields(values, NODE_RULES, where, place)
    kind_keys = [key for key, _ in _KIND_KEYS if key in values]
    if len(kind_keys) > 1:
        why = f"sets {' and '.join(kind_keys)}; a node sets one of tool, ask, sleep_s, workflow"
        j.add("E019", f"{where}: {why}", (*place, kind_keys[1]))
    elif node.kind != node_kind(node.tool, node.ask, node.sleep_s, node.workflow):
        j.add("E019", f"{where}: kind {_show(node.kind)} does not match its settings", place)
    for key in _ABSTRACT_ONLY if node.kind != "abstract" else ():
        if key in values:
            why = f"{key} is only for abstract (LLM) nodes; this is a {node.kind} node"
            j.add("E019", f"{where}: {why}", (*place, key))
    if isinstance(node.ask, Mapping):
        ask_place = (*place, "ask")
        j.fields(node.ask, ASK_RULES, f"{where}: ask", ask_place, required=("prompt",))
    named = [node.tool] if isinstance(node.tool, str) else []
    if isinstance(node.tools, list | tuple):
        named += [name for name in node.tools if isinstance(name, str)]
    for name in named:
        if name not in wf.tools:
            key = "tool" if name == node.tool else "tools"
            j.add("E004", f"{where}: unknown tool '{name}'{_tool_hint(name, wf)}", (*place, key))
    if isinstance(node.workflow, str) and not (wf.base_dir / node.workflow).is_file():
        j.add("E004", f"{where}: workflow file '{node.workflow}' not found", (*place, "workflow"))


def _tool_hint(name: str, wf: Workflow) -> str:
    return _hint(name, list(wf.tools)) if wf.tools else " (no tools are defined)"


def _judge_edge(j: _Judge, i: int, edge: EdgeDef) -> EdgeSpec | None:
    """Check an edge's values; return what the plan should see (None: leave it out)."""
    place: Place = ("edges", i)
    usable = isinstance(edge.src, str) and isinstance(edge.dst, str)
    where = f"edge '{edge.src} -> {edge.dst}'" if usable else f"edge #{i + 1}"
    j.fields({"from": edge.src, "to": edge.dst}, {"from": _NAME, "to": _NAME}, where, place)
    when = edge.when
    if when is not None and not isinstance(when, str):
        why = f"when must be a string (a condition), got {_show(when)}"
        j.add("E005", f"{where}: {why}", (*place, "when"))
        when = None
    max_cycles = edge.max_cycles
    complaint = _integer(1)(max_cycles) if max_cycles is not None else None
    if complaint is not None:
        j.add("E019", f"{where}: max_cycles {complaint}", (*place, "max_cycles"))
        max_cycles = 1  # judged already; a bound keeps the cycle check quiet about it
    return EdgeSpec(edge.src, edge.dst, when, max_cycles) if usable else None


def _plan(wf: Workflow, edges: list[EdgeSpec | None]) -> tuple[list[_Issue], Plan | None]:
    """Build the core plan from the usable parts; its problems become issues with places."""
    issues: list[_Issue] = []
    specs: list[NodeSpec] = []
    first: dict[str, int] = {}
    for i, node in enumerate(wf.nodes):
        if not isinstance(node.id, str):
            continue
        if node.id in first:
            why = f"duplicate node id (first defined as node #{first[node.id] + 1})"
            issues.append(_Issue("E019", f"node '{node.id}': {why}", ("nodes", i)))
            continue
        first[node.id] = i
        kind = node.kind if node.kind in NODE_KINDS else "abstract"
        retries = node.retries if _is_int(node.retries) and node.retries >= 0 else 0
        specs.append(NodeSpec(node.id, kind, retries))
    kept = [(i, e) for i, e in enumerate(edges) if e is not None]
    reducers = {k: v for k, v in wf.reducers.items() if v in REDUCERS}
    if not specs:
        return issues, None
    try:
        plan = build_plan(specs, [e for _, e in kept], reducers)
    except PlaitError as exc:
        for p in exc.problems:
            place: Place = ()
            if p.edge is not None:
                place = ("edges", kept[p.edge][0], *(("when",) if p.code == "E005" else ()))
            elif p.node is not None and p.node in first:
                place = ("nodes", first[p.node])
            issues.append(_Issue(p.code, p.message, place))
        return issues, None
    return issues, (plan if not issues else None)


# ---------------------------------------------------------------------------
# Reading files: values that remember their lines
# ---------------------------------------------------------------------------


class _Map(dict[str, Any]):
    """A mapping read from a file, with the line of itself and of each key."""

    def __init__(self, line: int) -> None:
        super().__init__()
        self.line = line
        self.key_lines: dict[str, int] = {}


class _Seq(list[Any]):
    """A list read from a file, with the line of itself and of each item."""

    def __init__(self, line: int) -> None:
        super().__init__()
        self.line = line
        self.item_lines: list[int] = []


def _plain(value: Any) -> Any:
    """Plain dicts and lists (what a definition keeps), from file values or builder values."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _line_at(doc: Any, place: Place) -> int | None:
    """The line of the deepest part of ``place`` that the document has."""
    line: int | None = getattr(doc, "line", None)
    node = doc
    for part in place:
        if isinstance(node, _Map) and isinstance(part, str) and part in node:
            line, node = node.key_lines.get(part, line), node[part]
        elif isinstance(node, _Seq) and isinstance(part, int) and 0 <= part < len(node):
            line, node = node.item_lines[part], node[part]
        else:
            break
    return line


Found = list[tuple[int | None, str]]
"""Problems met while parsing: (line, message)."""


def _combine_surrogates(text: str, line: int | None, found: Found) -> str:
    """Join escaped UTF-16 surrogate pairs (``\\ud83d\\ude00``); a lone one is a problem."""
    if not any("\ud800" <= ch <= "\udfff" for ch in text):
        return text
    try:
        return text.encode("utf-16", "surrogatepass").decode("utf-16")
    except UnicodeDecodeError:
        found.append((line, "a string contains a lone UTF-16 surrogate (not valid Unicode)"))
        return text.encode("utf-8", "replace").decode("utf-8")


_BLANKS = "\0 \t\r\n\x85\u2028\u2029"
_FLOW_INDICATORS = ",[]{}"


class _YamlLoader(yaml.SafeLoader):
    """A safe loader whose mappings and lists remember lines and which refuses duplicate keys."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.found: Found = []

    def scan_plain(self) -> yaml.ScalarToken:
        """Plain scalars as YAML 1.2 reads them in flow context: a '?' inside one is text.

        PyYAML (YAML 1.1) ends them at '?', which refuses ``{prompt: Approve?, approval: true}``.
        """
        if not self.flow_level:
            return super().scan_plain()
        start = end = self.get_mark()
        chunks: list[str] = []
        spaces: list[str] = []
        while self.peek() != "#":
            length = 0
            while not self._ends_flow_plain(length):
                length += 1
            if length == 0:
                break
            self.allow_simple_key = False
            chunks += [*spaces, self.prefix(length)]
            self.forward(length)
            end = self.get_mark()
            spaces = self.scan_plain_spaces(self.indent + 1, start) or []
            if not spaces:
                break
        return yaml.ScalarToken("".join(chunks), True, start, end)

    def _ends_flow_plain(self, at: int) -> bool:
        ch = self.peek(at)
        if ch in _BLANKS or ch in _FLOW_INDICATORS:
            return True
        return ch == ":" and self.peek(at + 1) in _BLANKS + _FLOW_INDICATORS


def _mark_line(node: yaml.Node) -> int:
    return int(node.start_mark.line) + 1


def _yaml_map(loader: _YamlLoader, node: yaml.MappingNode) -> _Map:
    own = sum(1 for key, _ in node.value if key.tag != "tag:yaml.org,2002:merge")
    loader.flatten_mapping(node)
    merged = len(node.value) - own  # pairs merged in with '<<' come first; own keys override them
    result = _Map(_mark_line(node))
    own_keys: set[str] = set()
    for index, (key_node, value_node) in enumerate(node.value):
        key = loader.construct_object(key_node, deep=True)
        line = _mark_line(key_node)
        if not isinstance(key, str):
            loader.found.append(
                (line, f"keys must be strings, got {_show(key)} (quote keys like yes, no, on, off)")
            )
            continue
        if index >= merged:
            if key in own_keys:
                loader.found.append(
                    (line, f"duplicate key '{key}' (first at line {result.key_lines[key]})")
                )
                continue
            own_keys.add(key)
        result[key] = loader.construct_object(value_node, deep=True)
        result.key_lines[key] = line
    return result


def _yaml_seq(loader: _YamlLoader, node: yaml.SequenceNode) -> _Seq:
    result = _Seq(_mark_line(node))
    for child in node.value:
        result.append(loader.construct_object(child, deep=True))
        result.item_lines.append(_mark_line(child))
    return result


def _yaml_str(loader: _YamlLoader, node: yaml.ScalarNode) -> str:
    return _combine_surrogates(str(loader.construct_scalar(node)), _mark_line(node), loader.found)


def _yaml_float(loader: _YamlLoader, node: yaml.ScalarNode) -> float | str:
    value = float(loader.construct_yaml_float(node))
    if math.isfinite(value):
        return value
    loader.found.append((_mark_line(node), "NaN and infinities are not JSON numbers"))
    return str(node.value)


def _yaml_refused(loader: _YamlLoader, node: yaml.Node) -> str | None:
    """Note an unsupported tag; a local tag on a scalar reads as the text the user meant."""
    tag = str(node.tag)
    message = f"the YAML tag '{tag}' is not supported (plait files hold JSON values)"
    local = tag.startswith("!") and not tag.startswith("!!")
    if local:
        message += f"; a value starting with '!' must be quoted: '{tag}'"
    loader.found.append((_mark_line(node), message))
    if local and isinstance(node, yaml.ScalarNode):
        return f"{tag} {node.value}".strip()
    return None


_YamlLoader.add_constructor("tag:yaml.org,2002:map", _yaml_map)
_YamlLoader.add_constructor("tag:yaml.org,2002:seq", _yaml_seq)
_YamlLoader.add_constructor("tag:yaml.org,2002:str", _yaml_str)
_YamlLoader.add_constructor("tag:yaml.org,2002:float", _yaml_float)
_YamlLoader.add_constructor("tag:yaml.org,2002:timestamp", _yaml_str)  # dates stay text
for _tag in ("binary", "set", "omap", "pairs"):
    _YamlLoader.add_constructor(f"tag:yaml.org,2002:{_tag}", _yaml_refused)
_YamlLoader.add_constructor(None, _yaml_refused)
# YAML 1.2 (and JSON) read 1e5 as a number; PyYAML's YAML 1.1 would read a string.
_YamlLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:0|[1-9][0-9]*)(?:\.[0-9]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


def _measure(root: yaml.Node) -> None:
    """Refuse documents whose aliases expand to too many values or nest too deeply."""
    seen: dict[int, tuple[int, int]] = {}

    def visit(node: yaml.Node, depth: int) -> tuple[int, int]:
        known = seen.get(id(node))
        if known is None:
            if depth > MAX_DEPTH:
                raise _Refused(
                    _mark_line(node), f"values are nested more than {MAX_DEPTH} levels deep"
                )
            children: list[yaml.Node] = []
            if isinstance(node, yaml.MappingNode):
                children = [part for pair in node.value for part in pair]
            elif isinstance(node, yaml.SequenceNode):
                children = list(node.value)
            size, height = 1, 1
            for child in children:
                child_size, child_height = visit(child, depth + 1)
                size, height = size + child_size, max(height, child_height + 1)
                if size > MAX_VALUES:
                    raise _Refused(
                        _mark_line(node), f"the document holds more than {MAX_VALUES} values"
                    )
            known = seen[id(node)] = (size, height)
        if depth + known[1] > MAX_DEPTH:
            raise _Refused(_mark_line(node), f"values are nested more than {MAX_DEPTH} levels deep")
        return known

    visit(root, 0)


class _Refused(Exception):
    def __init__(self, line: int | None, message: str) -> None:
        super().__init__(message)
        self.line = line
        self.message = message


def _parse_yaml(text: str) -> tuple[Any, Found]:
    loader = _YamlLoader(text)
    try:
        root = loader.get_single_node()
        if root is None:
            return None, loader.found
        _measure(root)
        return loader.construct_document(root), loader.found
    except _Refused as exc:
        return None, [(exc.line, exc.message)]
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        why = str(exc.problem or exc.context or "unreadable")
        if exc.problem and exc.context:
            why += f" ({exc.context})"
        if "block" in why:
            why += "; check the indentation"
        return None, [(mark.line + 1 if mark else None, f"invalid YAML: {why}")]
    except yaml.reader.ReaderError as exc:
        return None, [(text.count("\n", 0, exc.position) + 1, f"invalid YAML: {exc.reason}")]
    except (yaml.YAMLError, RecursionError) as exc:
        return None, [
            (
                None,
                f"invalid YAML: {exc}"
                if isinstance(exc, yaml.YAMLError)
                else "invalid YAML: nested too deeply",
            )
        ]
    finally:
        loader.dispose()


_scanstring: Callable[[str, int, bool], tuple[str, int]] = json.decoder.scanstring  # type: ignore[attr-defined]
_JSON_NUMBER = re.compile(r"(-?(?:0|[1-9][0-9]*))(\.[0-9]+)?([eE][-+]?[0-9]+)?", re.ASCII)


class _JsonReader:
    """Strict JSON (RFC 8259) into line-remembering values; duplicate keys are collected."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.newlines = [i for i, ch in enumerate(text) if ch == "\n"]
        self.found: Found = []

    def line(self, pos: int) -> int:
        return bisect.bisect_left(self.newlines, pos) + 1

    def refuse(self, pos: int, why: str) -> _Refused:
        return _Refused(self.line(pos), f"invalid JSON: {why}")

    def skip(self, pos: int) -> int:
        while pos < len(self.text) and self.text[pos] in " \t\n\r":
            pos += 1
        return pos

    def document(self) -> Any:
        value, end = self.value(0, 0)
        end = self.skip(end)
        if end != len(self.text):
            raise self.refuse(end, "extra data after the JSON value")
        return value

    def value(self, pos: int, depth: int) -> tuple[Any, int]:
        pos = self.skip(pos)
        if depth > MAX_DEPTH:
            raise self.refuse(pos, f"values are nested more than {MAX_DEPTH} levels deep")
        text = self.text
        if pos >= len(text):
            raise self.refuse(pos, "unexpected end of file")
        ch = text[pos]
        if ch == "{":
            return self.object(pos, depth)
        if ch == "[":
            return self.array(pos, depth)
        if ch == '"':
            return self.string(pos)
        for word, constant in (("true", True), ("false", False), ("null", None)):
            if text.startswith(word, pos):
                return constant, pos + len(word)
        match = _JSON_NUMBER.match(text, pos)
        if match is None:
            raise self.refuse(pos, f"unexpected character {ch!r}")
        integer, fraction, exponent = match.groups()
        try:
            if fraction or exponent:
                number: int | float = float(match.group())
                if not math.isfinite(number):
                    raise ValueError("too large")
            else:
                number = int(integer)
        except ValueError as exc:
            raise self.refuse(pos, f"number out of range ({exc})") from None
        return number, match.end()

    def string(self, pos: int) -> tuple[str, int]:
        try:
            value, end = _scanstring(self.text, pos + 1, True)
        except json.JSONDecodeError as exc:
            raise self.refuse(exc.pos, exc.msg) from None
        return _combine_surrogates(value, self.line(pos), self.found), end

    def object(self, pos: int, depth: int) -> tuple[_Map, int]:
        result = _Map(self.line(pos))
        pos = self.skip(pos + 1)
        if self.text.startswith("}", pos):
            return result, pos + 1
        while True:
            pos = self.skip(pos)
            if not self.text.startswith('"', pos):
                raise self.refuse(pos, "expected a key in double quotes")
            key_line = self.line(pos)
            key, pos = self.string(pos)
            pos = self.skip(pos)
            if not self.text.startswith(":", pos):
                raise self.refuse(pos, "expected ':' after a key")
            value, pos = self.value(pos + 1, depth + 1)
            if key in result:
                self.found.append(
                    (key_line, f"duplicate key '{key}' (first at line {result.key_lines[key]})")
                )
            else:
                result[key] = value
                result.key_lines[key] = key_line
            pos = self.skip(pos)
            if self.text.startswith(",", pos):
                pos += 1
            elif self.text.startswith("}", pos):
                return result, pos + 1
            else:
                raise self.refuse(pos, "expected ',' or '}'")

    def array(self, pos: int, depth: int) -> tuple[_Seq, int]:
        result = _Seq(self.line(pos))
        pos = self.skip(pos + 1)
        if self.text.startswith("]", pos):
            return result, pos + 1
        while True:
            pos = self.skip(pos)
            result.item_lines.append(self.line(pos))
            value, pos = self.value(pos, depth + 1)
            result.append(value)
            pos = self.skip(pos)
            if self.text.startswith(",", pos):
                pos += 1
            elif self.text.startswith("]", pos):
                return result, pos + 1
            else:
                raise self.refuse(pos, "expected ',' or ']'")


def _parse_json(text: str) -> tuple[Any, Found]:
    reader = _JsonReader(text)
    try:
        return reader.document(), reader.found
    except _Refused as exc:
        return None, [(exc.line, exc.message)]


def _read_text(path: Path) -> tuple[str | None, Found]:
    """The file's text (UTF-8, at most MAX_FILE_BYTES), or why it cannot be read."""
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            return None, [
                (None, f"the file is larger than {MAX_FILE_BYTES // 1_000_000} MB ({size} bytes)")
            ]
        data = path.read_bytes()
    except OSError as exc:
        return None, [(None, f"cannot read the file: {exc.strerror or exc}")]
    try:
        return data.decode("utf-8-sig"), []
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        return None, [(line, f"the file is not UTF-8 text (byte {exc.start})")]


def _parse_file(path: Path) -> tuple[Any, Found]:
    text, found = _read_text(path)
    if text is None:
        return None, found
    return _parse_json(text) if path.suffix.lower() == ".json" else _parse_yaml(text)


def _flow_from_file(path: str, base_dir: Path, where: str) -> dict[str, Any]:
    """A governance flow file as plain values (its checks belong to plait.governance)."""
    value, found, code = _flow_file(path, base_dir)
    if value is None or found:
        raise WorkflowError([Problem(code, f"{where}: {found[0][1]}")])
    return dict(value)


def _flow_file(path: str, base_dir: Path) -> tuple[Any, list[tuple[int | None, str]], str]:
    full = base_dir / path
    if not full.is_file():
        return None, [(None, f"flow file '{path}' not found")], "E004"
    value, found = _parse_file(full)
    found = [(None, f"flow file '{path}'{f' line {n}' if n else ''}: {m}") for n, m in found]
    if not found and not isinstance(value, Mapping):
        found = [(None, f"flow file '{path}': must hold a mapping (with steps)")]
    return (_plain(value) if not found else None), found, "E027"


# ---------------------------------------------------------------------------
# Loading a workflow file
# ---------------------------------------------------------------------------


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
    source = Path(path)
    doc, found = _parse_file(source)
    reader = _Reader(source, doc)
    for line, message in found:
        reader.issues.append(_Issue("E019", message, line=line))
    fatal = doc is None and bool(found)
    wf = None if fatal else reader.workflow(model_override)
    issues = reader.issues
    plan_issues: list[_Issue] = []
    if wf is not None:
        judged, plan_judged, _ = _judge(wf, require_model)
        issues += [reader.locate(i, model_override) for i in judged]
        plan_issues = [reader.locate(i, model_override) for i in plan_judged]
    if issues or plan_issues:
        issues.sort(key=lambda i: (i.line is None, i.line or 0))
        raise WorkflowError([i.problem() for i in (*issues, *plan_issues)], str(path))
    assert wf is not None
    return wf


class _Reader:
    """Turns a parsed document into a Workflow, noting shape problems with their lines."""

    def __init__(self, source: Path, doc: Any) -> None:
        self.source = source
        self.doc = doc
        self.issues: list[_Issue] = []
        self.node_origin: list[int] = []
        self.edge_origin: list[int] = []

    def add(self, code: str, message: str, place: Place) -> None:
        self.issues.append(_Issue(code, message, place, _line_at(self.doc, place)))

    def locate(self, issue: _Issue, model_override: str | None) -> _Issue:
        """The issue with its place translated to the file and its line filled in."""
        place = issue.place
        if place[:1] == ("nodes",) and len(place) > 1 and isinstance(place[1], int):
            place = ("nodes", self.node_origin[place[1]], *place[2:])
        elif place[:1] == ("edges",) and len(place) > 1 and isinstance(place[1], int):
            place = ("edges", self.edge_origin[place[1]], *place[2:])
        if model_override is not None and place[:2] == ("llm", "model"):
            return dataclasses.replace(
                issue, place=place, message=issue.message + " (from --model)"
            )
        return dataclasses.replace(issue, place=place, line=_line_at(self.doc, place))

    def entry(self, value: Any, keys: Sequence[str], where: str, place: Place) -> bool:
        """A mapping entry: unknown keys and keys without a value are problems."""
        if not isinstance(value, Mapping):
            self.add("E019", f"{where}: must be a mapping, got {_show(value)}", place)
            return False
        for key, item in value.items():
            if key not in keys:
                self.add("E019", f"{where}: unknown key '{key}'{_hint(key, keys)}", (*place, key))
            elif item is None:
                self.add("E019", f"{where}: '{key}' has no value", (*place, key))
        return True

    def section(self, doc: Mapping[str, Any], key: str, kind: type) -> Any:
        value = doc.get(key)
        if value is None:
            return None
        if not isinstance(value, kind):
            wanted = "a list" if kind is list else "a mapping"
            self.add("E019", f"{key} must be {wanted}, got {_show(value)}", (key,))
            return None
        return value

    def workflow(self, model_override: str | None) -> Workflow | None:
        doc = self.doc
        if not isinstance(doc, Mapping):
            self.add("E019", "the file must hold a mapping with at least name and nodes", ())
            return None
        for key in doc:
            if key not in TOP_KEYS:
                self.add("E019", f"unknown top-level key '{key}'{_hint(key, TOP_KEYS)}", (key,))
        if doc.get("name") is None:
            self.add("E019", "missing required key 'name'", ("name",))
        llm = self.section(doc, "llm", Mapping)
        if model_override is not None:
            llm = {**(llm or {}), "model": model_override}
        return Workflow(
            name=doc.get("name"),  # type: ignore[arg-type]  # judged below
            nodes=self.nodes(self.section(doc, "nodes", list) or []),
            edges=self.edges(self.section(doc, "edges", list) or []),
            reducers=_plain(self.section(doc, "reducers", Mapping) or {}),
            tools=self.tools(self.section(doc, "tools", Mapping) or {}),
            description=doc.get("description") or "",
            durability=doc.get("durability") or "normal",
            llm=_plain(llm) if llm is not None else None,
            budgets=_plain(self.section(doc, "budgets", Mapping) or {}),
            asks=_plain(self.section(doc, "asks", Mapping) or {}),
            on_dangling=doc.get("on_dangling") or "redeliver",
            source=self.source,
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
                flow, found, code = _flow_file(flow, self.source.parent)
                for _, message in found:
                    self.add(code, f"{where}: {message}", ("nodes", i, "flow"))
            settings = {
                key: _plain(item.get(key)) for key in NODE_KEYS if key not in ("id", "flow")
            }
            for key in ("tools", "writes"):
                if isinstance(settings[key], list):
                    settings[key] = tuple(settings[key])
            settings["retries"] = 0 if settings["retries"] is None else settings["retries"]
            settings["writes"] = () if settings["writes"] is None else settings["writes"]
            kind = node_kind(
                settings["tool"], settings["ask"], settings["sleep_s"], settings["workflow"]
            )
            nodes.append(NodeDef(id=item["id"], kind=kind, flow=_plain(flow), **settings))
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
            settings = {key: _plain(item[key]) for key in TOOL_KEYS if item.get(key) is not None}
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
            tools[name] = _python_tool(name, fn, description=description, **settings)
        return tools
