"""The definition model: a workflow's nodes, edges, reducers and tools, and its builder.

``Workflow`` is frozen; its builder methods (``tool``, ``node``, ``edge``, ...)
each return a new one. A file read by ``load_workflow`` becomes the same kind
of object, so the checks (``plait.workflow.checks``) and the manifest a run
pins (``plait.workflow.manifest``) never know where a definition came from.

This module never runs a tool; it does import the modules of Python tools
(that is how ``plait check`` knows they exist).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from plait.core.env import Budgets, NodeExecutor
from plait.core.errors import PlaitError, Problem
from plait.core.plan import Plan
from plait.tools.python import describe, input_schema, resolve_python
from plait.workflow.checks import judge, node_kind
from plait.workflow.documents import flow_file
from plait.workflow.manifest import budgets_of, manifest_of, node_executor
from plait.workflow.subgraphs import subgraph_issues

_PLAN = "_judged_plan"
"""The instance attribute ``Workflow.plan`` remembers its plan in."""


class WorkflowError(PlaitError):
    """Everything wrong with one definition; ``source`` is the file it came from, if any."""

    def __init__(
        self,
        problems: Sequence[Problem],
        source: str | None = None,
        warnings: Sequence[Problem] = (),
    ) -> None:
        super().__init__(problems[0].code, problems[0].message, problems)
        self.source = source
        self.warnings = tuple(warnings)
        """What ``plait check`` also found, reported after the errors (they do not fail)."""

    def lines(self) -> list[str]:
        """One ``FILE:LINE: PLAIT-Ennn message`` line per problem, then per warning."""
        return [p.render(self.source) for p in self.problems] + [
            w.render(self.source, warning=True) for w in self.warnings
        ]


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
    agents: tuple[str, ...] | None = None
    """Abstract nodes this one offers as tools (each call a child run, ``core/agents.py``)."""
    handoffs: tuple[str, ...] | None = None
    """Abstract nodes this one may hand its conversation to (``transfer_to_<id>``)."""
    retry: Mapping[str, Any] | None = None
    """A retry policy (file units); the workflow's ``retry:`` fills in what it leaves out."""
    output: str | None = None
    """A tool node's output key: its whole result lands there instead of a result object's
    keys merging over the context's (docs/mcp.md)."""


@dataclass(frozen=True)
class EdgeDef:
    src: str
    dst: str
    when: str | None = None
    max_cycles: int | None = None


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
    retry: Mapping[str, Any] | None = None
    """The default retry policy of tool and abstract nodes (a node's own ``retry:`` wins)."""
    schedules: tuple[Mapping[str, Any], ...] = ()
    """``schedules:`` of the file: registered by ``plait schedule sync``, never pinned by a run."""

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
                tool_def(
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
            tool_def(name or _function_name(fn), fn, description=description, **settings)
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
        retry: Mapping[str, Any] | None = None,
        agents: Sequence[str] | None = None,
        handoffs: Sequence[str] | None = None,
        output: str | None = None,
    ) -> Workflow:
        """Add a node; a function given as ``tool`` (or in ``tools``) is registered as a tool.
        ``agents``/``handoffs`` name other abstract nodes (docs/llm-nodes.md "Several agents")."""
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
            retry=retry,
            agents=tuple(agents) if agents is not None else None,
            handoffs=tuple(handoffs) if handoffs is not None else None,
            output=output,
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

    def retry_policy(self, **policy: Any) -> Workflow:
        """Set the workflow-wide ``retry:`` (max_attempts, initial_s, multiplier, ...)."""
        return dataclasses.replace(self, retry={**(self.retry or {}), **policy})

    def budget(self, **ceilings: Any) -> Workflow:
        """Set budget ceilings in file units: ``max_usd`` dollars, ``max_wall_s`` seconds, ..."""
        return dataclasses.replace(self, budgets={**self.budgets, **ceilings})

    # -- judging -----------------------------------------------------------

    def problems(self, *, require_model: bool = True) -> tuple[Problem, ...]:
        """Everything wrong with this definition (empty when it can run), its subgraph
        nodes' workflow files included."""
        issues, plan_issues, _ = judge(self, require_model)
        children = subgraph_issues(self, require_model)
        return tuple(i.problem() for i in (*issues, *children, *plan_issues))

    def plan(self) -> Plan:
        """The validated core plan; raises WorkflowError carrying every problem.

        Judged once per instance, then remembered: a Workflow is frozen and every builder
        method (and ``dataclasses.replace``) makes a new instance, which judges itself
        again, so the plan of this one cannot change. Judging checks every tool's JSON
        Schema, which costs more than a small run's database work, and a drive asks for
        the plan several times (start, manifest, environment). A definition with problems
        is not remembered: it is judged, and refused, at every call.
        """
        known: Plan | None = self.__dict__.get(_PLAN)
        if known is not None:
            return known
        issues, plan_issues, plan = judge(self, require_model=True)
        issues += subgraph_issues(self, require_model=True)  # a child file is read at run time
        if issues or plan_issues or plan is None:
            source = str(self.source) if self.source is not None else None
            raise WorkflowError([i.problem() for i in (*issues, *plan_issues)], source)
        remember_plan(self, plan)
        return plan

    # -- what a run pins -----------------------------------------------------

    def executors(self) -> tuple[NodeExecutor, ...]:
        """How each node runs, in node order (a valid workflow only)."""
        return tuple(node_executor(self, node) for node in self.nodes)

    def to_budgets(self) -> Budgets:
        """The budget ceilings in core units (micro-dollars, milliseconds)."""
        return budgets_of(self)

    def to_manifest(self) -> dict[str, Any]:
        """A canonical-JSON description of the definition (no callables); validates first."""
        self.plan()
        return manifest_of(self)


def _function_name(fn: Callable[..., Any]) -> str:
    name = getattr(fn, "__name__", None)
    if not isinstance(name, str) or not name.isidentifier():
        raise WorkflowError(
            [Problem("E019", f"tool {fn!r}: has no usable __name__; pass name=... to tool()")]
        )
    return name


def tool_def(
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


def remember_plan(wf: Workflow, plan: Plan) -> None:
    """What ``Workflow.plan`` returns from now on, for a definition judged valid as a whole
    (its child files included, a model required): the loader judges a file once."""
    # Not a dataclass field: invisible to ==, repr and replace(). Two threads judging at
    # once store equal plans.
    object.__setattr__(wf, _PLAN, plan)


def _flow_from_file(path: str, base_dir: Path, where: str) -> dict[str, Any]:
    """A governance flow file as plain values (its checks belong to plait.governance)."""
    value, found, code = flow_file(path, base_dir)
    if value is None or found:
        raise WorkflowError([Problem(code, f"{where}: {found[0][1]}")])
    return dict(value)
