"""The single-agent API (docs/architecture.md §10): ``Agent`` and what its runs report.

An agent is a workflow of one abstract node, run on the same journal, resume
and verify as any workflow; ``AgentRunState`` is a run read back from that
journal, ``run_stream`` yields the events of ``plait.agent.stream``, and
``Approval`` / ``DeferredError`` answer waiting tool calls in ``Agent.resume``.
"""

from plait.agent.agent import Agent
from plait.agent.content import BinaryContent, ImageUrl, UserContent
from plait.agent.definition import NODE
from plait.agent.hitl import Approval, DeferredError
from plait.agent.model_hooks import AfterResponse, BeforeRequest, HookedModel
from plait.agent.run_reader import read_run_state
from plait.agent.run_state import (
    AgentRunState,
    RunStatus,
    RunUsage,
    ToolCallPart,
    ToolReturnPart,
)
from plait.agent.stream import (
    AgentEvent,
    ModelDelta,
    RunFinished,
    RunStream,
    ToolCallFinished,
    ToolCallStarted,
    TurnFinished,
    TurnStarted,
)

__all__ = [
    "NODE",
    "AfterResponse",
    "Agent",
    "AgentEvent",
    "AgentRunState",
    "Approval",
    "BeforeRequest",
    "BinaryContent",
    "DeferredError",
    "HookedModel",
    "ImageUrl",
    "ModelDelta",
    "RunFinished",
    "RunStatus",
    "RunStream",
    "RunUsage",
    "ToolCallFinished",
    "ToolCallPart",
    "ToolCallStarted",
    "ToolReturnPart",
    "TurnFinished",
    "TurnStarted",
    "UserContent",
    "read_run_state",
]
