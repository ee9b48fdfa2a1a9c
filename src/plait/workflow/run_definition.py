"""``RunDefinition``: a workflow as the driver takes it — built here, never by the driver.

The definition layer turns a ``Workflow`` (built in Python or loaded from a file) into
what a run needs: its name, the definition its manifest pins, the tools with their
callables and input schemas, the model settings, its ceilings and the folder its
relative paths are read from. The driver starts, drives, forks and verifies runs from
a ``RunDefinition`` alone; reading files (a run's source to resume it, a subgraph's
child workflow) and asking MCP servers what they offer happen here, behind
``Definitions``.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from plait.core.agents import AGENT_PREFIX
from plait.core.canonical import dumps, loads
from plait.core.env import Budgets, StepEnv
from plait.core.errors import PlaitError
from plait.tools.mcp import McpPool, fetch_catalogue
from plait.tools.python import input_schema
from plait.workflow import source_digests
from plait.workflow.agent_checks import agent_workflow
from plait.workflow.definition import ToolDef, Workflow
from plait.workflow.loader import load_workflow
from plait.workflow.pinned_plan import workflow_from_pinned
from plait.workflow.pinning import pinned_model, pinned_workflow, with_catalogue


@dataclass(frozen=True, slots=True)
class RunDefinition:
    """What a run is made of; ``pinned`` is what its manifest keeps (``Workflow.to_manifest``)."""

    name: str
    pinned: dict[str, Any]
    source: str | None
    """The file it was loaded from (resolved), None for a definition built in Python."""
    base_dir: Path
    on_dangling: str
    tools: Mapping[str, ToolDef]
    tool_schemas: dict[str, Mapping[str, Any]]
    """Each tool's input schema: declared, else read from the Python function's signature."""
    llm: Mapping[str, Any]
    budgets: Budgets
    has_llm: bool
    """Whether any node is abstract (an LLM loop): only then is a model needed."""
    plan_counts: tuple[int, int]
    """How many nodes and edges its plan has (what a fork onto it must match)."""
    workflow: Workflow = field(repr=False, compare=False)
    """The workflow it was built from: for this layer only (catalogue, child files)."""
    envs: dict[int, StepEnv] = field(default_factory=dict, repr=False, compare=False)
    """The core's environment its pin gives, by engine epoch, with its pinned budgets
    (``driver.environment.make_env``): built on first use and shared by every drive on
    this definition (a worker's runs of one file); a pure function of fields that never
    change, so a cache, not state."""

    @property
    def model_spec(self) -> str:
        return str(self.llm.get("model"))

    def tool_sources(self) -> dict[str, str]:
        """SHA-256 of each Python tool's module file, by path (relative to ``base_dir`` when
        inside it): tool code is live, so a run records what it started with. Read when a
        run starts, not at every drive."""
        return tool_sources(self.workflow)


def tool_schemas(workflow: Workflow) -> dict[str, Mapping[str, Any]]:
    """Each tool's input schema: declared, else read from the Python function's signature."""
    schemas: dict[str, Mapping[str, Any]] = {}
    for name in sorted(workflow.tools):
        tool = workflow.tools[name]
        if tool.input_schema is not None:
            schemas[name] = tool.input_schema
        elif tool.callable is not None:
            schemas[name] = input_schema(tool.callable)
    return schemas


def definition_of(workflow: Workflow) -> RunDefinition:
    """``workflow`` as a run definition; validates it first (``WorkflowError``)."""
    plan = workflow.plan()
    return RunDefinition(
        name=workflow.name,
        pinned=workflow.to_manifest(),
        source=str(workflow.source.resolve()) if workflow.source else None,
        base_dir=workflow.base_dir,
        on_dangling=workflow.on_dangling,
        tools=workflow.tools,
        tool_schemas=tool_schemas(workflow),
        llm=dict(workflow.llm or {}),
        budgets=workflow.to_budgets(),
        has_llm=any(node.kind == "abstract" for node in workflow.nodes),
        plan_counts=(len(plan.nodes), len(plan.edges)),
        workflow=workflow,
    )


def tool_sources(workflow: Workflow) -> dict[str, str]:
    """SHA-256 of the module file of each Python tool (one entry per file)."""
    found: dict[str, str] = {}
    for name in sorted(workflow.tools):
        fn = workflow.tools[name].callable
        path = source_digests.source_file(fn) if fn is not None else None
        current = source_digests.stamp(path) if path else None
        if path is None or current is None:
            continue
        key = source_digests.keyed(path, workflow.base_dir, current, source_key)
        if key not in found:
            found[key] = source_digests.file_digest(path, current)
    return found


def source_key(path: Path, base_dir: Path) -> str:
    """How ``tool_sources`` names a file: relative to the workflow's folder when inside it."""
    path = path.resolve()
    try:
        return path.relative_to(base_dir.resolve()).as_posix()
    except ValueError:
        return str(path)


@dataclass(frozen=True, slots=True)
class _Built:
    """What a loaded file's workflow pins (``to_manifest``) and its run definition."""

    workflow: Workflow
    pins: dict[str, Any]
    definition: RunDefinition


class Definitions:
    """Where the driver gets definitions it was not handed: a run's pinned one, a
    subgraph's child, a definition with what its MCP servers offer now.

    ``cache_files``: load each version of a run's source file once and share it (a
    worker's runtime drives many runs of few files). Loading imports the tools' modules,
    which briefly changes ``sys.path`` and ``sys.stdout`` for the whole process, so
    cached loads are serialized."""

    def __init__(self, *, cache_files: bool = False) -> None:
        self._files: dict[tuple[str, str | None, int, int], Workflow] | None = (
            {} if cache_files else None
        )
        self._lock = threading.Lock()
        self._built: dict[int, _Built] = {}  # id(a cached file's Workflow) -> what it gives

    def pinned(self, manifest: dict[str, Any], workflow: Workflow | None = None) -> RunDefinition:
        """The run's definition: ``workflow`` (the caller's, checked against the pin:
        PLAIT-E010 when it differs in meaning), else its own version. That is its source
        file while the file means what the run pinned; once the file changed (or is gone),
        the version the run pinned, rebuilt from its manifest with today's tool code
        (``pinned_plan``): a run always goes on on the plan it started with."""
        given = workflow
        try:
            if workflow is None and self._files is not None:
                workflow = self._source_of(manifest)
                built = self._built_from(workflow, manifest)
                if built is not None:
                    return built
            return definition_of(pinned_workflow(manifest, workflow))
        except PlaitError as exc:
            if given is not None or not manifest.get("source"):
                raise
            try:
                with self._lock:  # resolving tools imports modules, as loading a file does
                    rebuilt = workflow_from_pinned(manifest)
            except PlaitError:
                raise exc from None
        return definition_of(with_catalogue(rebuilt, manifest.get("mcp_catalogue")))

    def _source_of(self, manifest: dict[str, Any]) -> Workflow | None:
        """The run's source file as last loaded, unless it changed since; None when it
        cannot be read here (``pinned_workflow`` then says why)."""
        source = manifest.get("source")
        if not source or self._files is None:
            return None
        try:
            return self.load_file(Path(source), pinned_model(manifest))
        except OSError:
            return None

    def _built_from(
        self, workflow: Workflow | None, manifest: dict[str, Any]
    ) -> RunDefinition | None:
        """The definition of a cached file's workflow when the run pinned exactly what it
        pins (the same file version: a worker's runs of few files), built once per loaded
        file; None otherwise (an older version, a cosmetic edit, an MCP catalogue), which
        ``pinned`` checks and builds as always.

        What is reused is immutable and addressed by content: the loaded file (its path,
        mtime and size) and the manifest it pins, compared whole, so a run pinned to
        another version never gets this one. Equal pins pass ``pinned_workflow``'s check
        (``same_plan`` of equal definitions), and ``definition_of`` of the same workflow
        gives the same definition: only the building is skipped."""
        if workflow is None or manifest.get("mcp_catalogue"):
            return None
        with self._lock:
            built = self._built.get(id(workflow))
        if built is None or built.workflow is not workflow:
            try:  # as a stored manifest reads back (lists, not tuples)
                pins = loads(dumps(workflow.to_manifest()))
                built = _Built(workflow, pins, definition_of(workflow))
            except (PlaitError, ValueError):
                return None  # ``pinned`` says what is wrong, as always
            with self._lock:  # one entry per file still cached (``load_file`` evicts)
                live = {id(w) for w in (self._files or {}).values()}
                self._built = {k: v for k, v in self._built.items() if k in live}
                if id(workflow) in live:
                    self._built[id(workflow)] = built
        if manifest["workflow"] != built.pins:
            return None
        return built.definition

    def load_file(self, path: Path, model: str | None = None) -> Workflow:
        """The workflow file as last loaded, unless it changed since (a schedule's file,
        loaded for every slot); OSError when it cannot be read, its load errors."""
        if self._files is None:
            with self._lock:
                return load_workflow(path, model)
        with self._lock:
            stat = os.stat(path)
            key = (str(path), model, stat.st_mtime_ns, stat.st_size)
            workflow = self._files.get(key)
            if workflow is None:
                workflow = load_workflow(path, model)
                self._files = {k: v for k, v in self._files.items() if k[0] != key[0]}
                self._files[key] = workflow
            return workflow

    def child(self, parent: RunDefinition, path: str) -> RunDefinition:
        """The workflow file of a subgraph node, relative to the parent's folder; for
        ``agent:<node>`` (an agent call or handoff) the parent's node as a workflow."""
        if path.startswith(AGENT_PREFIX):
            return definition_of(agent_workflow(parent.workflow, path[len(AGENT_PREFIX) :]))
        return definition_of(load_workflow(parent.base_dir / path))

    async def with_catalogue(
        self, definition: RunDefinition, pool: McpPool | None = None
    ) -> tuple[RunDefinition, dict[str, dict[str, Any]]]:
        """``definition`` with what its MCP servers offer now pinned, and that offer;
        ``pool``: where the servers are started and left running (for the run's drive)."""
        catalogue = await fetch_catalogue(definition.workflow, pool)
        if not catalogue:
            return definition, catalogue
        return definition_of(with_catalogue(definition.workflow, catalogue)), catalogue
