"""plait: durable, deterministic, governed runs of AI agent workflows.

The public surface: define a ``Workflow`` (Python builder or ``load_workflow``
for YAML/JSON files), run it durably with ``Runtime`` (SQLite by default) or in
memory with ``run_sync``; or run one model with its tools as an ``Agent``
(a one-node workflow on the same journal); every error is a ``PlaitError`` with a PLAIT-Ennn code.
"""

from plait.agent import (
    Agent,
    AgentRunState,
    Approval,
    DeferredError,
    RunStatus,
    RunUsage,
    ToolCallPart,
    ToolReturnPart,
)
from plait.core.errors import PlaitError
from plait.driver.call import CallInfo, current_call
from plait.driver.inprocess import run_in_memory, run_sync
from plait.driver.runtime import Runtime
from plait.driver.verify import VerifyReport
from plait.driver.wave import RunResult
from plait.workflow import Workflow, load_workflow

__all__ = [
    "Agent",
    "AgentRunState",
    "Approval",
    "CallInfo",
    "DeferredError",
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
__version__ = "0.1.0"
