"""OpenTelemetry spans for driven runs (docs/architecture.md §12): observation only.

When ``opentelemetry`` is importable, every drive of a run is a ``plait.run`` span;
each superstep the drive works on is a ``plait.superstep`` span under it, and each
effect it handles is a ``plait.effect`` span under its superstep. An executed effect is
timed around its executor; an effect whose result the journal already holds is
replayed, and an ask or timer gets a span when it is registered and another when it is
settled (spans of no length: nothing runs). Spans go to ``get_tracer("plait")`` of the
global tracer provider, or of the one given as ``Runtime(telemetry=provider)``, so
exporters are configured the standard way.

Rules: nothing here writes to the journal or is read by the core, and every call into
OpenTelemetry is guarded — an SDK or exporter that raises never changes a run (that
drive stops tracing instead). Attributes are ids, names, counts and statuses, never a
tool's or a model's input, output or failure detail. Timing is OpenTelemetry's own
clock reading, never the run's clock. ``opentelemetry`` is imported at the first
drive, never when plait is imported; spans are off with ``Runtime(telemetry=False)``
or ``PLAIT_OTEL=0``, and cost one unrecorded span per drive while no SDK is set up.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Awaitable, Collection
from typing import TYPE_CHECKING, Any

from plait.core.asks import SUBGRAPH_PREFIX
from plait.core.events import Dispatch, Event, ResponseSettled
from plait.core.keys import JournalKey
from plait.core.llm_loop import CALL_PREFIX, LLM_EXECUTOR
from plait.core.outcomes import Completed, EffectOutcome
from plait.core.pending import PendingAsk
from plait.core.state import OpenPhase, Phase, SchedulerState
from plait.driver.wave import Executor, RunResult, Watch, WaveEffect
from plait.version import __version__

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.trace import Span, Tracer, TracerProvider

_log = logging.getLogger(__name__)

_OFF = ("0", "false", "no", "off")

_api: Any = None
"""``(opentelemetry.trace, opentelemetry.context)`` once imported; False when absent."""


def otel_api() -> tuple[Any, Any] | None:
    """OpenTelemetry's trace and context modules, imported on first use; None without them."""
    global _api
    if _api is None:
        try:
            import opentelemetry.context as context
            import opentelemetry.trace as trace
        except Exception:  # not installed, or broken: plait runs without spans
            _api = False
        else:
            _api = (trace, context)
    return _api or None


class NoTrace:
    """Spans are off, OpenTelemetry is absent, or nothing records the run's span.

    A drive's trace (this or a ``SpanTrace``) is used the same way: ``driving`` once the
    drive's state is known gives the executor to drive with, ``watch`` goes to ``drive``,
    ``end`` is called with the drive's result, or with the exception it raised.
    """

    watch: Watch | None = None

    def driving(
        self, state: SchedulerState, execute: Executor, redelivered: Collection[JournalKey]
    ) -> Executor:
        return execute

    def end(self, result: RunResult | None, error: BaseException | None = None) -> None:
        return None


NO_TRACE = NoTrace()


def telemetry_enabled(setting: bool | TracerProvider | None) -> bool:
    """Whether a drive should trace: the explicit ``setting`` wins, else ``PLAIT_OTEL``."""
    if setting is None:
        return os.environ.get("PLAIT_OTEL", "").strip().lower() not in _OFF
    return setting is not False


def run_trace(
    setting: bool | TracerProvider | None, run_id: str, workflow: str, *, resumed: bool
) -> RunTrace:
    """Open the ``plait.run`` span of a drive; NO_TRACE when there is nothing to trace.

    ``setting``: ``Runtime(telemetry=...)`` — None (on unless ``PLAIT_OTEL=0``), a bool,
    or the tracer provider to use instead of the global one.
    """
    if not telemetry_enabled(setting):
        return NO_TRACE
    api = otel_api()
    if api is None:
        return NO_TRACE
    trace, context = api
    try:
        provider = None if setting is None or setting is True else setting
        tracer = trace.get_tracer("plait", __version__, tracer_provider=provider)
        span = tracer.start_span(
            "plait.run",
            attributes={
                "plait.run_id": run_id,
                "plait.workflow": workflow,
                "plait.resumed": resumed,
            },
        )
        if not span.is_recording():  # no SDK set up, or sampled out: trace nothing
            span.end()
            return NO_TRACE
        return SpanTrace(trace, context, tracer, span)
    except Exception:
        _log.debug("plait: tracing this drive failed to start", exc_info=True)
        return NO_TRACE


class SpanTrace:
    """One drive's spans: the run's, the open superstep's, and one per effect.

    The run span is the current span while the drive runs (a child run started or
    resumed by it nests under it), and each executed effect's span while it executes
    (what the tool or the model client traces nests under the effect).
    """

    def __init__(self, trace: Any, context: Any, tracer: Tracer, run: Span) -> None:
        self._trace = trace
        self._context = context
        self._tracer = tracer
        self._run = run
        self._run_context: Context = trace.set_span_in_context(run)
        self._token: object = context.attach(self._run_context)
        self._superstep: Span | None = None
        self._superstep_context: Context | None = None
        self._superstep_no: int | None = None
        self._dispatched: tuple[int, int] = (-1, -1)
        self._pending: dict[str, PendingAsk] = {}  # pending asks as of the last step
        self._redelivered: Collection[JournalKey] = ()
        self._broken = False
        self.watch: Watch | None = self._step

    # --- the drive ------------------------------------------------------------------

    def driving(
        self, state: SchedulerState, execute: Executor, redelivered: Collection[JournalKey]
    ) -> Executor:
        """The drive starts from ``state``: ``execute`` with each effect it runs timed.

        ``redelivered``: the keys the journal redelivers (read as the drive goes on)."""
        try:
            self._pending = dict(state.pending_asks)
            self._redelivered = redelivered
            self._at_superstep(state.phase)  # a resumed run goes on with its open superstep
        except Exception:
            self._fail()
            return execute

        def traced(dispatch: Dispatch, idempotency_key: str, alone: bool) -> Awaitable[Any]:
            span = self._start_effect(dispatch, idempotency_key, replayed=False)
            llm = dispatch.executor == LLM_EXECUTOR
            try:
                # Called now, not when the coroutine first runs: executors number their
                # calls in dispatch order (LlmRunner).
                pending = execute(dispatch, idempotency_key, alone)
            except BaseException as exc:
                self._end_effect(span, None, llm, exc)
                raise
            return self._executed(span, llm, pending)

        return traced

    async def _executed(
        self, span: Span | None, llm: bool, pending: Awaitable[EffectOutcome | None]
    ) -> EffectOutcome | None:
        token = self._enter(span)
        try:
            outcome = await pending
        except BaseException as exc:
            self._end_effect(span, None, llm, exc)
            raise
        finally:
            self._leave(token)
        self._end_effect(span, outcome, llm)
        return outcome

    def _step(self, state: SchedulerState, events: list[Event], wave: list[WaveEffect]) -> None:
        """After a step: asks settled by its events, the superstep, asks registered, replays."""
        if self._broken:
            return
        try:
            if self._pending:
                self._settled(events)  # under the superstep they were pending in
            self._at_superstep(state.phase)
            if self._pending or state.pending_asks:
                self._registered(state.pending_asks)
            for dispatch, idempotency_key, journaled in wave:
                if journaled is not None:
                    at = time.time_ns()  # nothing runs: a span of no length
                    span = self._start_effect(dispatch, idempotency_key, replayed=True, at=at)
                    self._end_effect(span, journaled, dispatch.executor == LLM_EXECUTOR, at=at)
        except Exception:
            self._fail()

    def end(self, result: RunResult | None, error: BaseException | None = None) -> None:
        try:
            if not self._broken:
                self._close_superstep(parked=result is not None and result.status == "parked")
                run = self._run
                if result is not None:
                    redelivered = len(self._redelivered)
                    run.set_attributes(
                        {"plait.status": result.status, "plait.redelivered": redelivered}
                    )
                    if result.status == "failed":
                        run.set_status(self._trace.Status(self._trace.StatusCode.ERROR, "failed"))
                if error is not None:
                    _set_error(self._trace, run, error)
                run.end()
        except Exception:
            self._fail()
        finally:
            self._leave(self._token)

    # --- supersteps -------------------------------------------------------------------

    def _at_superstep(self, phase: Phase) -> None:
        """Keep the superstep span in step with the state's open superstep."""
        if not isinstance(phase, OpenPhase):
            self._close_superstep()
            return
        record = phase.record
        dispatched = (len(record.dispatched), len(record.task_dispatched))
        counts = {"plait.nodes_dispatched": dispatched[0]}
        if dispatched[1]:
            counts["plait.tasks_dispatched"] = dispatched[1]
        if record.superstep != self._superstep_no:
            self._close_superstep()
            span = self._tracer.start_span(
                "plait.superstep",
                context=self._run_context,
                attributes={"plait.superstep": record.superstep, **counts},
            )
            self._superstep = span
            self._superstep_context = self._trace.set_span_in_context(span)
            self._superstep_no = record.superstep
        elif dispatched != self._dispatched and self._superstep is not None:
            self._superstep.set_attributes(counts)  # a retry within the superstep
        self._dispatched = dispatched

    def _close_superstep(self, *, parked: bool = False) -> None:
        span = self._superstep
        if span is None:
            return
        self._superstep = self._superstep_context = self._superstep_no = None
        self._dispatched = (-1, -1)
        if parked:
            span.set_attribute("plait.parked", True)
        span.end()

    # --- effects ------------------------------------------------------------------------

    def _start_effect(
        self, dispatch: Dispatch, idempotency_key: str, *, replayed: bool, at: int | None = None
    ) -> Any:
        if self._broken:
            return None
        try:
            attributes = _dispatch_attributes(dispatch)
            attributes["plait.idempotency_key"] = idempotency_key
            attributes["plait.effect.replayed"] = replayed
            attributes["plait.effect.redelivered"] = dispatch.key in self._redelivered
            return self._tracer.start_span(
                "plait.effect",
                context=self._superstep_context or self._run_context,
                attributes=attributes,
                start_time=at,
            )
        except Exception:
            self._fail()
            return None

    def _end_effect(
        self,
        span: Span | None,
        outcome: EffectOutcome | None,
        llm: bool,
        error: BaseException | None = None,
        *,
        at: int | None = None,
    ) -> None:
        if span is None:
            return
        try:
            if error is not None:
                _set_error(self._trace, span, error)
            elif outcome is None:
                span.set_attribute("plait.effect.outcome", "Parked")  # a child run parked
            elif isinstance(outcome, Completed):
                span.set_attribute("plait.effect.outcome", "Completed")
                if llm:
                    usage = outcome.usage
                    span.set_attributes(
                        {
                            "gen_ai.usage.input_tokens": usage.input_tokens,
                            "gen_ai.usage.output_tokens": usage.output_tokens,
                            "plait.usd_micros": usage.usd_micros,
                        }
                    )
            else:
                span.set_attributes(
                    {"plait.effect.outcome": "Failed", "plait.effect.cause": outcome.cause}
                )
                span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, outcome.cause))
            span.end(at)
        except Exception:
            self._fail()

    def _enter(self, span: Span | None) -> object:
        if span is None:
            return None
        try:
            token: object = self._context.attach(self._trace.set_span_in_context(span))
            return token
        except Exception:
            self._fail()
            return None

    def _leave(self, token: object) -> None:
        if token is None:
            return
        try:
            self._context.detach(token)
        except Exception:
            self._fail()

    # --- asks and timers ------------------------------------------------------------------

    def _settled(self, events: list[Event]) -> None:
        for event in events:
            if isinstance(event, ResponseSettled):
                entry = self._pending.get(event.ask_id)
                if entry is not None:
                    at = time.time_ns()
                    span = self._ask_span(event.ask_id, entry, settled=True, at=at)
                    self._end_effect(span, event.outcome, False, at=at)

    def _registered(self, pending: dict[str, PendingAsk]) -> None:
        for ask_id, entry in pending.items():
            if ask_id not in self._pending and entry.child is None:  # a child: its dispatch
                at = time.time_ns()
                span = self._ask_span(ask_id, entry, settled=False, at=at)
                span.set_attribute("plait.effect.outcome", "Pending")
                span.end(at)
        self._pending = dict(pending)

    def _ask_span(self, ask_id: str, entry: PendingAsk, *, settled: bool, at: int) -> Span:
        kind = "ask" if entry.is_ask else "timer" if entry.wake_ms is not None else "subgraph"
        attributes = _key_attributes(entry.key, kind)
        attributes["plait.ask_id"] = ask_id
        attributes["plait.effect.settled"] = settled
        tool = entry.tool_name
        if tool:
            attributes["plait.tool"] = tool  # an approval or a deferred tool call
        return self._tracer.start_span(
            "plait.effect",
            context=self._superstep_context or self._run_context,
            attributes=attributes,
            start_time=at,
        )

    def _fail(self) -> None:
        """OpenTelemetry raised: this drive traces nothing more (the run goes on as it was)."""
        if not self._broken:
            _log.debug("plait: tracing failed; this drive goes on untraced", exc_info=True)
        self._broken = True


RunTrace = NoTrace | SpanTrace


def _dispatch_attributes(dispatch: Dispatch) -> dict[str, Any]:
    """Its key, and what executes it: the model, a tool, or a child workflow's file."""
    executor = dispatch.executor
    if executor == LLM_EXECUTOR:
        return _key_attributes(dispatch.key, "llm")
    if executor.startswith(SUBGRAPH_PREFIX):
        attributes = _key_attributes(dispatch.key, "subgraph")
        attributes["plait.subgraph"] = executor[len(SUBGRAPH_PREFIX) :]
        return attributes
    attributes = _key_attributes(dispatch.key, dispatch.key.kind)  # asks are not dispatched
    if dispatch.key.kind == "decide":  # a decision (§6.6) names no tool
        return attributes
    attributes["plait.tool"] = executor.removeprefix(CALL_PREFIX)
    return attributes


def _key_attributes(key: JournalKey, kind: str) -> dict[str, Any]:
    """The effect's journal key (its run is the run span's); a task path only for Send tasks."""
    attributes: dict[str, Any] = {
        "plait.node": key.node,
        "plait.effect.kind": kind,
        "plait.attempt": key.attempt,
        "plait.effect_seq": key.effect_seq,
    }
    if key.task_path:
        attributes["plait.task_path"] = key.task_path
    return attributes


def _set_error(trace: Any, span: Span, error: BaseException) -> None:
    """An exception left the drive or an executor: its type, never its message."""
    name = type(error).__qualname__
    code = getattr(error, "code", None)  # a PlaitError's E-code says what happened
    span.set_attribute("error.type", f"{name} {code}" if isinstance(code, str) else name)
    span.set_status(trace.Status(trace.StatusCode.ERROR, name))
