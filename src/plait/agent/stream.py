"""Events an agent run streams while it runs (``Agent.run_stream``): observation only.

Turn events come from the agent's model wrapper as each turn is sent and
answered (after the ``after_response`` hook, so they show what is journaled);
``ModelDelta`` events are the pieces of the turn in flight as the provider streams
them (text, tool-call arguments, thinking), between its ``TurnStarted`` and
``TurnFinished``;
tool events come from the Runtime's observer hook, which sees the core's state
after every step: a tool call *starts* when its effect is journaled and about
to run, and *finishes* when its result enters the transcript (in ``effect_seq``
order). Nothing here writes to the journal or waits for a consumer: events go
into an unbounded queue, so a slow reader never changes what a run does. A turn
answered from the journal on resume emits no events.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic

from plait.agent.run_state import AgentRunState, OutputT, ToolCallPart, ToolReturnPart
from plait.core.state import SchedulerState
from plait.driver.deltas import TurnDelta
from plait.models.base import ModelRequest, ModelResponse


@dataclass(frozen=True)
class TurnStarted:
    """A model turn was sent: ``turn`` counts the run's model turns from 0."""

    run_id: str
    turn: int
    messages: int


@dataclass(frozen=True)
class TurnFinished:
    """A model turn was answered (the answer as journaled, after ``after_response``)."""

    run_id: str
    turn: int
    text: str | None
    tool_calls: tuple[ToolCallPart, ...]
    input_tokens: int
    output_tokens: int


@dataclass(frozen=True)
class ModelDelta:
    """A piece of turn ``turn`` as the model streams it: ``kind`` is ``text``,
    ``tool_call`` (argument JSON of the turn's ``index``-th call, tool ``name``) or
    ``thinking``. Observation only: ``TurnFinished`` carries the journaled answer."""

    run_id: str
    turn: int
    kind: str
    text: str
    index: int = 0
    name: str | None = None


@dataclass(frozen=True)
class ToolCallStarted:
    run_id: str
    call: ToolCallPart


@dataclass(frozen=True)
class ToolCallFinished:
    run_id: str
    result: ToolReturnPart


@dataclass(frozen=True)
class RunFinished:
    """The drive stopped (finished or parked); ``state`` is the run read back from its journal."""

    state: AgentRunState[Any]


AgentEvent = (
    TurnStarted | ModelDelta | TurnFinished | ToolCallStarted | ToolCallFinished | RunFinished
)
Emit = Callable[[AgentEvent], None]


class RunStream(Generic[OutputT]):
    """The events of one run as it runs; iterate it, ideally inside ``async with``.

    The run starts at the first ``async for`` step (or at ``async with``) and
    goes on whatever the reader does. Leaving ``async with`` waits until the run
    has finished or parked, even if the reader stopped early; a bare ``async
    for`` left early lets the run go on only while the event loop does (a run
    cut off that way is an interrupted run: ``Agent.resume`` finishes it).
    """

    def __init__(self, start: Callable[[Emit], Awaitable[AgentRunState[OutputT]]]) -> None:
        self._start = start
        self._queue: asyncio.Queue[AgentEvent | None] = asyncio.Queue()
        self._task: asyncio.Future[AgentRunState[OutputT]] | None = None
        self._ended = False

    def _run(self) -> asyncio.Future[AgentRunState[OutputT]]:
        if self._task is None:
            self._task = asyncio.ensure_future(self._drive())
        return self._task

    async def _drive(self) -> AgentRunState[OutputT]:
        try:
            return await self._start(self._queue.put_nowait)
        finally:
            self._queue.put_nowait(None)

    async def result(self) -> AgentRunState[OutputT]:
        """Wait for the run to finish or park; its state read back from the journal."""
        return await asyncio.shield(self._run())

    def __aiter__(self) -> RunStream[OutputT]:
        return self

    async def __anext__(self) -> AgentEvent:
        self._run()
        if self._ended:
            raise StopAsyncIteration
        event = await self._queue.get()
        if event is None:
            self._ended = True
            return RunFinished(await self.result())
        return event

    async def __aenter__(self) -> RunStream[OutputT]:
        self._run()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.result()


def turn_events(
    run_id: str, emit: Emit
) -> Callable[[str, ModelRequest, ModelResponse | None], None]:
    """A ``HookedModel`` turn listener that emits turn events."""

    def on_turn(phase: str, request: ModelRequest, response: ModelResponse | None) -> None:
        if response is None:
            emit(TurnStarted(run_id, request.ordinal_in_run, len(request.messages)))
            return
        emit(
            TurnFinished(
                run_id,
                request.ordinal_in_run,
                response.text,
                tuple(_call_part(c) for c in response.tool_calls),
                response.input_tokens,
                response.output_tokens,
            )
        )

    return on_turn


def delta_events(emit: Emit) -> Callable[[TurnDelta], None]:
    """A ``Runtime`` delta observer that emits ``ModelDelta`` events."""

    def on_delta(turn: TurnDelta) -> None:
        d = turn.delta
        emit(ModelDelta(turn.run_id, turn.turn, d.kind, d.text, d.index, d.name))

    return on_delta


class ToolEvents:
    """A Runtime observer that turns the core's tool bookkeeping into tool events."""

    def __init__(self, run_id: str, emit: Emit) -> None:
        self._run_id = run_id
        self._emit = emit
        self._started: dict[str, str] = {}  # tool call id -> tool name
        self._finished: set[str] = set()
        self._seen: dict[str, int] = {}  # flow key -> transcript entries already looked at

    def __call__(self, state: SchedulerState, effects: int) -> None:
        for key in sorted(state.abstract_flows):
            flow = state.abstract_flows[key]
            seen = min(self._seen.get(key, 0), len(flow.messages))  # a fold shortens it
            for entry in flow.messages[seen:]:
                call_id = str(entry.get("tool_call_id"))
                if entry.get("role") != "tool" or call_id not in self._started:
                    continue  # unknown, invalid or refused calls never ran
                if call_id in self._finished:
                    continue
                self._finished.add(call_id)
                part = ToolReturnPart(
                    self._started[call_id], call_id, entry.get("content"), bool(entry["is_error"])
                )
                self._emit(ToolCallFinished(self._run_id, part))
            self._seen[key] = len(flow.messages)
            for seq in sorted(flow.pending_tools):
                call = flow.pending_tools[seq]
                call_id = str(call.get("id"))
                if call_id not in self._started and seq not in flow.round_results:
                    self._started[call_id] = str(call.get("name"))
                    self._emit(ToolCallStarted(self._run_id, _call_part(call)))


def _call_part(call: Mapping[str, Any]) -> ToolCallPart:
    return ToolCallPart(str(call.get("name")), dict(call.get("arguments") or {}), str(call["id"]))
