"""plait: durable, deterministic, governed runs of AI agent workflows.

The public surface: define a ``Workflow`` (Python builder or ``load_workflow``
for YAML/JSON files), run it durably with ``Runtime`` (SQLite by default) or in
memory with ``run_sync``; or run one model with its tools as an ``Agent``
(a one-node workflow on the same journal); every error is a ``PlaitError`` with a PLAIT-Ennn code.
"""

from typing import TYPE_CHECKING, Any

from plait.core.errors import PlaitError
from plait.driver.call import CallInfo, current_call
from plait.driver.inprocess import run_in_memory, run_sync
from plait.driver.runtime import Runtime
from plait.driver.verify import VerifyReport
from plait.driver.wave import RunResult
from plait.version import __version__ as __version__
from plait.workflow import Workflow, load_workflow

if TYPE_CHECKING:
    from plait.agent import (
        Agent,
        AgentRunState,
        Approval,
        BinaryContent,
        DeferredError,
        ImageUrl,
        RunStatus,
        RunUsage,
        ToolCallPart,
        ToolReturnPart,
    )

_AGENT_NAMES = frozenset(
    {"Agent", "AgentRunState", "Approval", "BinaryContent", "DeferredError", "ImageUrl",
     "RunStatus", "RunUsage", "ToolCallPart", "ToolReturnPart"}
)  # fmt: skip


def __getattr__(name: str) -> Any:
    """The Agent API is imported on first use: the CLI starts without it (a third faster)."""
    if name in _AGENT_NAMES:
        import plait.agent

        value = getattr(plait.agent, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'plait' has no attribute {name!r}")


__all__ = [
    "Agent",
    "AgentRunState",
    "Approval",
    "BinaryContent",
    "CallInfo",
    "DeferredError",
    "ImageUrl",
    "PlaitError",
    "RunResult",
    "RunStatus",
    "RunUsage",
    "Runtime",
    "ToolCallPart",
    "ToolReturnPart",
    "VerifyReport",
    "Workflow",
    "current_call",
    "load_workflow",
    "run_in_memory",
    "run_sync",
]
