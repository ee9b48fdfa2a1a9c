"""The definition model: what a workflow is, built in Python or loaded from YAML/JSON.

Both roads lead to the same frozen ``Workflow`` and through the same checks
(``Workflow.problems``), so a builder-made workflow and a file fail the same
way; a file's problems also name their lines.

- ``definition``: ``Workflow`` and its parts (``ToolDef``, ``NodeDef``, ``EdgeDef``), the builder.
- ``checks``: the table-driven shape checks every definition goes through.
- ``manifest``: what a run pins, and the plan and executors read back from it.
- ``loader``: a workflow file into a checked ``Workflow``, every problem with its line.
- ``subgraphs``: the workflow files of subgraph nodes, judged with their parent (cycles refused).
- ``chart``: a workflow (or the definition a run pinned) as a Mermaid flowchart.
- ``documents``, ``yaml_reader``, ``json_reader``, ``located``: reading files into
  values that remember their lines.
"""

from typing import TYPE_CHECKING, Any

from plait.lazy_names import lazy_getattr

if TYPE_CHECKING:
    from plait.workflow.checks import node_kind
    from plait.workflow.definition import EdgeDef, NodeDef, ToolDef, Workflow, WorkflowError
    from plait.workflow.documents import MAX_FILE_BYTES
    from plait.workflow.loader import load_workflow
    from plait.workflow.manifest import half_up, manifest_executors, manifest_plan

_HOMES = {
    "EdgeDef": "plait.workflow.definition",
    "MAX_FILE_BYTES": "plait.workflow.documents",
    "NodeDef": "plait.workflow.definition",
    "ToolDef": "plait.workflow.definition",
    "Workflow": "plait.workflow.definition",
    "WorkflowError": "plait.workflow.definition",
    "half_up": "plait.workflow.manifest",
    "load_workflow": "plait.workflow.loader",
    "manifest_executors": "plait.workflow.manifest",
    "manifest_plan": "plait.workflow.manifest",
    "node_kind": "plait.workflow.checks",
}
"""Each public name -> the module that defines it (imported on first use: importing one
module of the package, ``plait.workflow.plan_hash`` say, imports nothing else)."""

__getattr__: Any = lazy_getattr(__name__, _HOMES, globals())

__all__ = [
    "MAX_FILE_BYTES",
    "EdgeDef",
    "NodeDef",
    "ToolDef",
    "Workflow",
    "WorkflowError",
    "half_up",
    "load_workflow",
    "manifest_executors",
    "manifest_plan",
    "node_kind",
]
