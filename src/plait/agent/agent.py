"""``plait.Agent``: one model, its tools and instructions — a workflow of one abstract node.

An agent run is an ordinary durable run (docs/architecture.md §10): the prompt is
the run's context ``{"prompt": ...}``, the instructions are the node's
instruction, ``output_type``'s JSON schema is its response schema, and the run
is started, resumed and verified by ``Runtime`` on the same journal as any
workflow. This module only builds that workflow and reads results back; it
never decides anything the core decides.

The workflow is rebuilt from the agent's settings on every call, so the tools
added with ``@agent.tool`` after construction are part of it, and another
process that builds the same agent (same model spec, instructions, tools,
output type and budgets) can resume and verify its runs.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, cast, overload

from pydantic import BaseModel

from plait.agent.content import UserContent, agent_input
from plait.agent.definition import agent_workflow
from plait.agent.hitl import Approval, plan_answers
from plait.agent.model_hooks import AfterResponse, BeforeRequest, HookedModel
from plait.agent.run_reader import read_run_state
from plait.agent.run_state import AGENT_RECORD, AgentRunState, OutputT
from plait.agent.stream import Emit, RunStream, ToolEvents, delta_events, turn_events
from plait.core.state import SchedulerState
from plait.driver.clock import Clock
from plait.driver.run_view import RunView
from plait.driver.runtime import Runtime
from plait.driver.verify import VerifyReport
from plait.models.base import Model
from plait.models.registry import check_credentials, model_from_spec
from plait.store.base import Store
from plait.store.records import RecordWrite
from plait.workflow import Workflow
from plait.workflow.pinning import pinned_workflow

if TYPE_CHECKING:
    from opentelemetry.trace import TracerProvider

ToolFunc = Callable[..., Any]


class Agent(Generic[OutputT]):
    """A durable agent: ``run``/``run_stream`` a prompt, ``resume``/``send`` to it, ``verify``.

    ``model`` is a spec (``openai:gpt-4o-mini``, ``scripted:answers.json``; a
    relative path is read from the current folder) or a ``Model`` object, which
    is called instead of the adapter its ``spec`` names (that spec is what a run
    pins, and ``Runtime`` checks it is a spec plait knows before a run starts).
    ``agents``: other agents this one may call as tools, each under its ``name``; a
    call runs it as a child run on this agent's model, budgets charged to this run
    (``agent/definition.py``). ``budgets`` take workflow file units (``max_tokens``,
    ``max_usd``, ...); ``model_settings`` are the workflow's ``llm`` settings
    (``max_tokens``, ``temperature``, ...); ``decide`` is ``llm.decide`` (docs/decide.md:
    narrow the tool offer, guide folds). Runs go to ``db`` (default: ``$PLAIT_DB``, else
    ``./.plait/plait.db``) or to the given ``store``. ``telemetry`` is ``Runtime``'s:
    False turns OpenTelemetry spans off, a ``TracerProvider`` receives them.
    """

    def __init__(
        self,
        model: str | Model,
        *,
        instructions: str = "",
        output_type: type[OutputT] | None = None,
        tools: Sequence[ToolFunc] = (),
        agents: Sequence[Agent[Any]] = (),
        flow: Any = None,
        budgets: Mapping[str, Any] | None = None,
        model_settings: Mapping[str, Any] | None = None,
        decide: Mapping[str, Any] | None = None,
        name: str = "agent",
        db: str | None = None,
        store: Store | None = None,
        before_request: BeforeRequest | None = None,
        after_response: AfterResponse | None = None,
        principal: str | None = None,
        clock: Clock | None = None,
        telemetry: bool | TracerProvider | None = None,
    ) -> None:
        if output_type is not None and not (
            isinstance(output_type, type) and issubclass(output_type, BaseModel)
        ):
            raise TypeError(f"output_type must be a pydantic model class, got {output_type!r}")
        self.model = model
        self.instructions = instructions
        self.output_type = output_type
        self.flow = flow
        self.budgets = dict(budgets or {})
        self.model_settings = dict(model_settings or {})
        if decide is not None:  # the workflow file's llm.decide (docs/decide.md)
            self.model_settings["decide"] = dict(decide)
        self.name = name
        self.before_request = before_request
        self.after_response = after_response
        self._tools: list[tuple[ToolFunc, dict[str, Any]]] = [(fn, {}) for fn in tools]
        self.agents: tuple[Agent[Any], ...] = tuple(agents)
        self._db = db
        self._store = store
        self._owns_store = store is None
        self._principal = principal
        self._clock = clock
        self._telemetry = telemetry

    # --- definition ---------------------------------------------------------------

    @overload
    def tool(self, fn: ToolFunc, /) -> ToolFunc: ...
    @overload
    def tool(self, /, **options: Any) -> Callable[[ToolFunc], ToolFunc]: ...

    def tool(
        self, fn: ToolFunc | None = None, /, **options: Any
    ) -> ToolFunc | Callable[[ToolFunc], ToolFunc]:
        """Register a plain function as a tool (``@agent.tool`` or ``@agent.tool(strict=True)``).

        Its name, description and input schema come from its name, docstring and
        signature; ``options`` are those of ``Workflow.tool`` (``name``,
        ``strict``, ``timeout_s``, ...). The function is returned unchanged.
        """

        def register(func: ToolFunc) -> ToolFunc:
            self._tools.append((func, options))
            return func

        return register(fn) if fn is not None else register

    @property
    def output_model(self) -> type[BaseModel] | None:
        return cast("type[BaseModel] | None", self.output_type)  # checked in __init__

    @property
    def model_spec(self) -> str:
        return self.model if isinstance(self.model, str) else self.model.spec

    def workflow(self) -> Workflow:
        """The workflow this agent runs (what a run pins and verify checks): its node,
        and the agents it may call as tools (``agent/definition.py``)."""
        return agent_workflow(self)

    @property
    def tool_functions(self) -> tuple[tuple[ToolFunc, dict[str, Any]], ...]:
        """The functions registered as tools, with their ``Workflow.tool`` options."""
        return tuple(self._tools)

    # --- running ------------------------------------------------------------------

    async def run(
        self,
        prompt: str | Sequence[UserContent],
        *,
        run_id: str | None = None,
        conversation_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        message_history: Sequence[Mapping[str, Any]] | None = None,
    ) -> AgentRunState[OutputT]:
        """Start a run with ``prompt`` and drive it until it finishes or waits.

        ``conversation_id``: the run is that conversation's next turn; its transcript
        starts with the conversation's last completed run's (docs/chat.md).
        ``message_history``: start from these entries instead (a previous result's
        ``message_history``, as pydantic-ai's ``result.all_messages()``).
        ``prompt`` is text, or a list of text, ``BinaryContent`` (images, PDFs) and
        ``ImageUrl`` pieces sent as one user message of content parts.
        """
        history = (conversation_id, message_history)
        return await self._start(prompt, run_id, history, metadata, emit=None)

    def run_sync(
        self,
        prompt: str | Sequence[UserContent],
        *,
        run_id: str | None = None,
        conversation_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        message_history: Sequence[Mapping[str, Any]] | None = None,
    ) -> AgentRunState[OutputT]:
        return asyncio.run(
            self.run(
                prompt,
                run_id=run_id,
                conversation_id=conversation_id,
                metadata=metadata,
                message_history=message_history,
            )
        )

    def run_stream(
        self,
        prompt: str | Sequence[UserContent],
        *,
        run_id: str | None = None,
        conversation_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        message_history: Sequence[Mapping[str, Any]] | None = None,
    ) -> RunStream[OutputT]:
        """Run ``prompt``, streaming its events as they happen, then ``RunFinished``.

        ``async with agent.run_stream(p) as events: async for event in events: ...``;
        each model turn is streamed from the provider: ``TurnStarted``, its
        ``ModelDelta`` pieces (text, tool-call arguments, thinking) as they arrive,
        then ``TurnFinished`` with the answer as journaled; ``ToolCallStarted`` and
        ``ToolCallFinished`` for each tool call. The run never waits for the reader,
        and leaving the ``async with`` block waits for the run even if the reader
        stopped early. Deltas are observational: the journal keeps each completed
        turn only, and a run that crashed mid-turn sends that turn again on resume.
        """
        history = (conversation_id, message_history)
        return RunStream(lambda emit: self._start(prompt, run_id, history, metadata, emit=emit))

    async def resume(
        self,
        run_id: str,
        *,
        approvals: Mapping[str, bool | Approval] | None = None,
        deferred: Mapping[str, Any] | None = None,
        by: str | None = None,
    ) -> AgentRunState[OutputT]:
        """Answer the run's waiting tool calls, if any, then drive it on; returns its new state.

        Without answers this continues a run after a crash or a park (a finished
        run is read back as it is). ``approvals`` answers approval-required calls
        and ``deferred`` deferred ones, both keyed by the tool call id listed in
        ``pending_approvals()`` / ``pending_deferred_tools()``: an approval is
        ``True``, ``False`` or ``Approval(approved, reason)``; a deferred result is
        any JSON value (a pydantic model is dumped to JSON), or
        ``DeferredError(message)`` for a call that failed. Every pending call is
        answered at once (§10). The answers are journaled by their ask ids in one
        commit (``Runtime.respond_all``), as ``by`` (default: the agent's
        principal), with every rule of ``plait respond``: a batch with an invalid
        answer raises and journals nothing.
        """
        runtime = self._runtime(observer=None, model=self._model(None, None))
        if approvals or deferred:
            self._answer(runtime, run_id, approvals or {}, deferred or {}, by)
        await runtime.resume(run_id, workflow=self.workflow())
        return self.state(run_id)

    def resume_sync(
        self,
        run_id: str,
        *,
        approvals: Mapping[str, bool | Approval] | None = None,
        deferred: Mapping[str, Any] | None = None,
        by: str | None = None,
    ) -> AgentRunState[OutputT]:
        return asyncio.run(self.resume(run_id, approvals=approvals, deferred=deferred, by=by))

    def send(self, run_id: str, message: str) -> None:
        """Journal a steering message for the run (``plait send``); it does not drive the run.

        A driver running the run takes it between two waves; a parked run gets it
        when next driven (``resume``). It waits in ``idle_messages`` until the
        model next gives a final answer: then it is appended to the transcript as
        a user entry and the loop goes on with another turn instead of finishing
        (§6.7). A message to a finished run is journaled and goes nowhere.
        """
        self._runtime(observer=None).send(run_id, message)

    # --- reading ------------------------------------------------------------------

    def state(self, run_id: str) -> AgentRunState[OutputT]:
        """Run ``run_id`` as its journal stands now."""
        return read_run_state(self._open_store(), run_id, self.output_model)

    def verify(self, run_id: str) -> VerifyReport:
        """Re-drive the run from its journal alone (no model, no tool) and compare checkpoints."""
        return self._runtime(observer=None).verify(run_id, workflow=self.workflow())

    def trace(self, run_id: str) -> list[dict[str, Any]]:
        """Every effect of the run in dispatch order (``plait trace``)."""
        return self._runtime(observer=None).trace(run_id)

    def close(self) -> None:
        if self._store is not None and self._owns_store:
            self._store.close()
            self._store = None

    def __enter__(self) -> Agent[OutputT]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- internals ----------------------------------------------------------------

    async def _start(
        self,
        prompt: str | Sequence[UserContent],
        run_id: str | None,
        history: tuple[str | None, Sequence[Mapping[str, Any]] | None],
        metadata: Mapping[str, Any] | None,
        emit: Emit | None,
    ) -> AgentRunState[OutputT]:
        conversation_id, message_history = history
        workflow = self.workflow()
        if isinstance(self.model, str):  # the runtime is handed a model object, not a spec
            check_credentials(self.model)
        run_id = run_id or f"run-{uuid.uuid4().hex[:16]}"
        store = self._open_store()
        observers: list[Callable[[SchedulerState, int], None]] = []
        if conversation_id is not None or metadata:
            body = {"conversation_id": conversation_id, "metadata": dict(metadata or {})}
            observers.append(_record_once(store, run_id, body))
        if emit is not None:
            observers.append(ToolEvents(run_id, emit))
        observer = _all(observers) if observers else None
        runtime = self._runtime(observer=observer, model=self._model(run_id, emit))
        if emit is not None:
            runtime.deltas = delta_events(emit)
        await runtime.start(
            workflow,
            agent_input(prompt),
            run_id=run_id,
            conversation=conversation_id,
            message_history=message_history,
        )
        return self.state(run_id)

    def _answer(
        self,
        runtime: Runtime,
        run_id: str,
        approvals: Mapping[str, bool | Approval],
        deferred: Mapping[str, Any],
        by: str | None,
    ) -> None:
        """Check every answer, then journal them all in one commit (``Runtime.respond_all``)."""
        view = RunView(self._open_store(), run_id)
        state = read_run_state(view, run_id, self.output_model)  # PLAIT-E017 if unknown
        manifest = view.manifest
        pinned_workflow(manifest, self.workflow())  # PLAIT-E010 before any answer is written
        responder = by or runtime.principal
        planned = plan_answers(
            state,
            view.state,
            manifest.get("principal"),
            approvals,
            deferred,
            by=responder,
            now_ms=runtime.clock(),
        )
        runtime.respond_all(run_id, planned, by=responder)

    def _model(self, run_id: str | None, emit: Emit | None) -> HookedModel:
        if isinstance(self.model, str):
            settings = self.model_settings
            inner = model_from_spec(self.model, base_dir=Path.cwd(), settings=settings)
        else:
            inner = self.model
        on_turn = turn_events(run_id, emit) if emit is not None and run_id is not None else None
        return HookedModel(
            inner,
            before_request=self.before_request,
            after_response=self.after_response,
            on_turn=on_turn,
            output_type=self.output_model,
        )

    def _open_store(self) -> Store:
        if self._store is None:
            self._store = Runtime(self._db).store  # the default db and durability, as plait's
        return self._store

    def _runtime(
        self,
        observer: Callable[[SchedulerState, int], None] | None,
        model: HookedModel | None = None,
    ) -> Runtime:
        # One Runtime per call, all on the agent's one store: observer and model are per run.
        return Runtime(
            self._db,
            store=self._open_store(),
            clock=self._clock,
            telemetry=self._telemetry,
            principal=self._principal,
            observer=observer,
            model=model,
        )


def _record_once(
    store: Store, run_id: str, body: dict[str, Any]
) -> Callable[[SchedulerState, int], None]:
    """Journal what the caller said about the run, right after the run's first commit."""
    written = False

    def observe(state: SchedulerState, effects: int) -> None:
        nonlocal written
        if not written:
            written = True
            store.commit(run_id, None, [RecordWrite(AGENT_RECORD, body)])

    return observe


def _all(
    observers: Sequence[Callable[[SchedulerState, int], None]],
) -> Callable[[SchedulerState, int], None]:
    def observe(state: SchedulerState, effects: int) -> None:
        for observer in observers:
            observer(state, effects)

    return observe
