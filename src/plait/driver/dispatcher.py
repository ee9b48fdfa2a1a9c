"""Routes each dispatch to what executes it: the model, a tool node's tool, a model's tool call."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from plait.core.agents import AGENT_PREFIX
from plait.core.asks import SUBGRAPH_PREFIX
from plait.core.decide import DECIDE_EXECUTOR
from plait.core.events import Dispatch
from plait.core.keys import JournalKey
from plait.core.llm_loop import CALL_PREFIX, LLM_EXECUTOR
from plait.core.outcomes import EffectOutcome
from plait.driver.decide_exec import DecideRunner
from plait.driver.llm_exec import LlmRunner
from plait.driver.tools_exec import ToolRunner

if TYPE_CHECKING:
    from plait.driver.deltas import DeltaObserver
    from plait.models.base import Model
    from plait.tools.mcp import McpPool
    from plait.workflow.run_definition import RunDefinition


ChildRunner = Callable[[JournalKey, str, Any], Awaitable[EffectOutcome | None]]
"""Runs (or resumes) a subgraph's child run; None while the child is parked."""


_TOOL_NAMES = 1024
"""Executors a dispatcher remembers as tools (a drive's are few: its tools')."""


class Dispatcher:
    """One per drive: holds the tool runner and, for workflows with LLM nodes, the model."""

    def __init__(
        self,
        definition: RunDefinition,
        llm: LlmRunner | None,
        children: ChildRunner | None = None,
        **tool_options: Any,
    ) -> None:
        self._children = children
        self._tools = ToolRunner(definition.tools, base_dir=definition.base_dir, **tool_options)
        self._llm = llm
        decides = bool((definition.llm or {}).get("decide"))
        self._decide = DecideRunner(definition) if decides else None
        self._tool_names: dict[str, str] = {}
        """Executors routed to a tool already, with the tool's name: asked first."""

    async def aclose(self) -> None:
        """Release what the drive started (MCP servers); call it when the drive ends."""
        await self._tools.aclose()

    def __call__(
        self, dispatch: Dispatch, idempotency_key: str, alone: bool
    ) -> Awaitable[EffectOutcome | None]:
        executor = dispatch.executor
        tool = self._tool_names.get(executor)
        if tool is not None:  # a tool node's tool, or a model's call of one, seen before
            return self._tools.call(tool, dispatch, idempotency_key, alone)
        if executor.startswith(AGENT_PREFIX):
            if self._children is None:
                raise RuntimeError("an agent was called but child runs need a Runtime")
            return self._children(dispatch.key, executor, dispatch.input)
        if executor.startswith(SUBGRAPH_PREFIX):
            if self._children is None:
                raise RuntimeError("a subgraph was dispatched but child runs need a Runtime")
            return self._children(dispatch.key, executor[len(SUBGRAPH_PREFIX) :], dispatch.input)
        if executor == LLM_EXECUTOR:
            if self._llm is None:
                raise RuntimeError("an llm effect was dispatched but the run has no model")
            return self._llm(dispatch)
        if executor == DECIDE_EXECUTOR:
            if self._decide is None:
                raise RuntimeError("a decide effect was dispatched but the run pins no backend")
            return self._decide(dispatch)
        tool = executor[len(CALL_PREFIX) :] if executor.startswith(CALL_PREFIX) else executor
        if len(self._tool_names) < _TOOL_NAMES:
            self._tool_names[executor] = tool
        return self._tools.call(tool, dispatch, idempotency_key, alone)


def dispatcher_for(
    definition: RunDefinition,
    journaled: list[Any] | None = None,
    children: ChildRunner | None = None,
    model: Model | None = None,
    deltas: DeltaObserver | None = None,
    mcp: McpPool | None = None,
) -> Dispatcher:
    """The dispatcher for one drive; ``journaled``: llm keys already in the journal;
    ``model``: a model object to call instead of the one the definition's spec names;
    ``deltas``: who is told the pieces of streamed turns (None: turns are not streamed);
    ``mcp``: MCP servers already running for the run (the dispatcher stops them)."""
    llm_runner = None
    if definition.has_llm:
        if model is None:
            from plait.models.registry import run_model

            settings = dict(definition.llm)
            model = run_model(
                definition.model_spec, base_dir=definition.base_dir, settings=settings
            )
        llm_runner = LlmRunner(definition, model, journaled or [], deltas)
    return Dispatcher(definition, llm_runner, children, mcp=mcp)
