"""plait: durable, deterministic, governed runs of AI agent workflows.

The public surface: define a ``Workflow`` (Python builder or ``load_workflow``
for YAML/JSON files), run it durably with ``Runtime`` (SQLite by default) or in
memory with ``run_sync``; or run one model with its tools as an ``Agent``
(a one-node workflow on the same journal); every error is a ``PlaitError`` with a PLAIT-Ennn code.

Every name is imported on first use (module ``__getattr__``), so ``import plait`` and the
``plait`` command start without the driver, the executors and their libraries: the CLI
pays only for the verb it runs (docs/benchmarks.md "CLI start").
"""

from typing import TYPE_CHECKING, Any

from plait.lazy_names import lazy_getattr
from plait.version import __version__ as __version__

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
    from plait.core.errors import PlaitError
    from plait.driver.call import CallInfo, current_call
    from plait.driver.inprocess import run_in_memory, run_sync
    from plait.driver.runtime import Runtime
    from plait.driver.verify import VerifyReport
    from plait.driver.wave import RunResult
    from plait.workflow import Workflow, load_workflow

_HOMES = {
    "Agent": "plait.agent",
    "AgentRunState": "plait.agent",
    "Approval": "plait.agent",
    "BinaryContent": "plait.agent",
    "CallInfo": "plait.driver.call",
    "DeferredError": "plait.agent",
    "ImageUrl": "plait.agent",
    "PlaitError": "plait.core.errors",
    "RunResult": "plait.driver.wave",
    "RunStatus": "plait.agent",
    "RunUsage": "plait.agent",
    "Runtime": "plait.driver.runtime",
    "ToolCallPart": "plait.agent",
    "ToolReturnPart": "plait.agent",
    "VerifyReport": "plait.driver.verify",
    "Workflow": "plait.workflow",
    "current_call": "plait.driver.call",
    "load_workflow": "plait.workflow",
    "run_in_memory": "plait.driver.inprocess",
    "run_sync": "plait.driver.inprocess",
}
"""Each public name -> the module that defines it."""


__getattr__: Any = lazy_getattr(__name__, _HOMES, globals())


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_HOMES))


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
