"""OpenTelemetry spans of driven runs (docs/architecture.md §12): observation only.

Each test hands its own SDK ``TracerProvider`` (an in-memory exporter behind a
``SimpleSpanProcessor``) to the Runtime, so the global provider is never set.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import (
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from plait import Agent, Runtime, Workflow, run_sync
from plait.core.canonical import dumps
from plait.driver.telemetry import NO_TRACE, run_trace, telemetry_enabled
from plait.store import open_store
from plait.workflow import load_workflow

FLOW = Path(__file__).parent / "crashflow" / "workflow.yaml"  # prep (a retry), work x3, finish
PLAIT = str(Path(sys.executable).parent / "plait")
NOW_MS = 1_700_000_000_000


class Spans:
    """A tracer provider of its own and what it recorded, as a tree."""

    def __init__(self, *processors: Any) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        for processor in processors:
            self.provider.add_span_processor(processor)
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))

    def named(self, name: str) -> list[ReadableSpan]:
        return [s for s in self.exporter.get_finished_spans() if s.name == name]

    def children(self, parent: ReadableSpan, name: str | None = None) -> list[ReadableSpan]:
        found = [
            s
            for s in self.exporter.get_finished_spans()
            if s.parent is not None and s.parent.span_id == parent.context.span_id
        ]
        return sorted(
            (s for s in found if name is None or s.name == name),
            key=lambda s: s.start_time or 0,
        )

    def only_run(self) -> ReadableSpan:
        (run,) = self.named("plait.run")
        return run


@pytest.fixture
def spans() -> Iterator[Spans]:
    recorded = Spans()
    yield recorded
    recorded.provider.shutdown()


def crashflow_input(folder: Path) -> dict[str, str]:
    return {"count_file": str(folder / "effects.count")}


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def effect_summary(effects: Sequence[ReadableSpan]) -> list[tuple[Any, ...]]:
    return [
        (
            a["plait.node"],
            a["plait.attempt"],
            a["plait.effect.outcome"],
            a.get("plait.effect.cause"),
            a["plait.effect.replayed"],
            a["plait.effect.redelivered"],
        )
        for a in map(attrs, effects)
    ]


def journal_of(db: str, run_id: str) -> str:
    """Everything journaled for the run, checkpoints as their bytes, as one canonical text."""
    store = open_store(db)
    try:
        items: list[Any] = []
        for item in store.load_journal(run_id).items():
            if hasattr(item, "sha256"):
                items.append(["checkpoint", store.read_checkpoint(run_id, item.seq).hex()])
            else:
                fields = dict(vars(item))
                if "key" in fields:
                    fields["key"] = fields["key"].to_json()
                items.append([type(item).__name__, fields])
        return dumps(items)
    finally:
        store.close()


def test_a_run_is_a_span_of_supersteps_of_effects_with_ids_counts_and_statuses(tmp_path, spans):
    db = f"sqlite:///{tmp_path}/plait.db"
    with Runtime(db, telemetry=spans.provider) as runtime:
        result = runtime.run_sync(load_workflow(FLOW), crashflow_input(tmp_path), run_id="r1")
        intents = {
            i.key.node + str(i.key.attempt): i for i in runtime.store.load_journal("r1").intents
        }

    assert result.status == "completed"
    run = spans.only_run()
    assert run.parent is None
    assert attrs(run) == {
        "plait.run_id": "r1",
        "plait.workflow": "crashflow",
        "plait.resumed": False,
        "plait.status": "completed",
        "plait.redelivered": 0,
    }
    supersteps = spans.children(run)
    assert [s.name for s in supersteps] == ["plait.superstep"] * 5
    assert [
        (attrs(s)["plait.superstep"], attrs(s)["plait.nodes_dispatched"]) for s in supersteps
    ] == [
        (1, 2),  # prep and its retry
        (2, 1),  # work, looping
        (3, 1),
        (4, 1),
        (5, 1),  # finish
    ]
    effects = [e for s in supersteps for e in spans.children(s)]
    assert len(spans.named("plait.effect")) == len(effects) == 6  # every effect under its superstep
    assert effect_summary(effects) == [
        ("prep", 1, "Failed", "ExecutorError", False, False),
        ("prep", 2, "Completed", None, False, False),
        ("work", 1, "Completed", None, False, False),
        ("work", 2, "Completed", None, False, False),
        ("work", 3, "Completed", None, False, False),
        ("finish", 1, "Completed", None, False, False),
    ]
    first = attrs(effects[0])
    assert first == {
        "plait.node": "prep",
        "plait.effect.kind": "tool",
        "plait.tool": "prep",
        "plait.attempt": 1,
        "plait.effect_seq": 0,
        "plait.idempotency_key": intents["prep1"].idempotency_key,
        "plait.effect.replayed": False,
        "plait.effect.redelivered": False,
        "plait.effect.outcome": "Failed",
        "plait.effect.cause": "ExecutorError",
    }
    assert effects[0].status.status_code is StatusCode.ERROR
    assert effects[1].status.status_code is StatusCode.UNSET
    for effect in effects:  # each effect's span covers its execution, inside its superstep's
        parent = next(s for s in supersteps if s.context.span_id == effect.parent.span_id)
        assert parent.start_time <= effect.start_time <= effect.end_time <= parent.end_time
    # Ids, names, counts and statuses only: no input, output or failure detail.
    everything = json.dumps([attrs(s) for s in spans.exporter.get_finished_spans()])
    for secret in ("effects.count", "first attempt always fails", "prepared", str(tmp_path)):
        assert secret not in everything


def test_a_resumed_run_marks_replayed_and_redelivered_effects(tmp_path, spans):
    db = f"sqlite:///{tmp_path}/plait.db"
    data = json.dumps(crashflow_input(tmp_path))
    # Killed after prep's retry ran, before its result was committed: superstep 1 never
    # closed, so the resume starts again from the input and replays prep's first attempt.
    crashed = subprocess.run(
        [PLAIT, "run", str(FLOW), "--db", db, "--run-id", "c", "--input", data, "--json"],
        capture_output=True,
        text=True,
        env={**os.environ, "PLAIT_CRASH_AT": "result:2"},
        timeout=120,
    )
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr

    with Runtime(db, telemetry=spans.provider) as runtime:
        assert runtime.resume_sync("c").status == "completed"

    run = spans.only_run()
    assert attrs(run)["plait.resumed"] is True
    assert attrs(run)["plait.redelivered"] == 1
    first = spans.children(run)[0]
    assert attrs(first)["plait.superstep"] == 1
    assert effect_summary(spans.children(first)) == [
        ("prep", 1, "Failed", "ExecutorError", True, False),  # answered from the journal
        ("prep", 2, "Completed", None, False, True),  # executed again, same idempotency key
    ]
    replayed, redelivered = spans.children(first)
    assert replayed.start_time == replayed.end_time  # nothing ran
    store = open_store(db)
    intents = store.load_journal("c").intents
    (intent,) = [i for i in intents if (i.key.node, i.key.attempt) == ("prep", 2)]
    store.close()
    assert attrs(redelivered)["plait.idempotency_key"] == intent.idempotency_key


class RaisingExporter(SpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        raise RuntimeError("the collector is down")


class RaisingProcessor(SimpleSpanProcessor):
    """Lets the run span start, then raises from every span start and end after it."""

    def __init__(self) -> None:
        super().__init__(InMemorySpanExporter())
        self.starts = 0

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        self.starts += 1
        if self.starts > 2:
            raise RuntimeError("span processor failed")

    def on_end(self, span: ReadableSpan) -> None:
        raise RuntimeError("span processor failed")


@pytest.mark.parametrize("failing", ["exporter", "processor"])
def test_a_failing_exporter_changes_neither_the_result_nor_the_journal(tmp_path, caplog, failing):
    caplog.set_level(logging.DEBUG, logger="plait.driver.telemetry")
    broken = SimpleSpanProcessor(RaisingExporter()) if failing == "exporter" else RaisingProcessor()
    traced = Spans(broken)
    input = crashflow_input(tmp_path)  # the same input (the same side file) for both runs
    outcomes = {}
    for name, telemetry in (("plain", False), ("traced", traced.provider)):
        db = f"sqlite:///{tmp_path}/{name}.db"
        with Runtime(db, clock=lambda: NOW_MS, telemetry=telemetry) as runtime:
            result = runtime.run_sync(load_workflow(FLOW), input, run_id="same")
            assert runtime.verify("same").verified
        outcomes[name] = (result.to_json(), journal_of(db, "same"))
    traced.provider.shutdown()

    assert outcomes["traced"] == outcomes["plain"]
    assert outcomes["traced"][0]["status"] == "completed"
    if failing == "processor":  # the SDK raised into the drive, which stopped tracing
        assert "this drive goes on untraced" in caplog.text


ANSWERS = [
    {
        "tool_calls": [
            {"name": "unit_price", "arguments": {"item": "widget"}},
            {"name": "unit_price", "arguments": {"item": "gadget"}},
        ],
        "usage": {"input_tokens": 40, "output_tokens": 12},
    },
    {"text": "6249 cents", "usage": {"input_tokens": 90, "output_tokens": 6}},
]


def unit_price(item: str) -> dict:
    """The unit price of an item, in cents."""
    return {"item": item, "cents": {"widget": 1250, "gadget": 4999}[item]}


def test_an_agent_run_has_llm_spans_with_token_usage_and_tool_call_spans(tmp_path, spans):
    answers = tmp_path / "answers.json"
    answers.write_text(json.dumps(ANSWERS))
    agent = Agent(
        f"scripted:{answers}",
        instructions="Price the items.",
        tools=[unit_price],
        db=f"sqlite:///{tmp_path}/agent.db",
        telemetry=spans.provider,
    )
    with agent:
        agent.run_sync("Price a widget and a gadget.", run_id="a1")

    run = spans.only_run()
    (superstep,) = spans.children(run)  # the agent's one node loops inside one superstep
    effects = spans.children(superstep)
    assert [
        (attrs(e)["plait.effect.kind"], attrs(e).get("plait.tool"), attrs(e)["plait.effect_seq"])
        for e in effects
    ] == [("llm", None, 0), ("tool", "unit_price", 1), ("tool", "unit_price", 2), ("llm", None, 3)]
    turns = [attrs(e) for e in effects if attrs(e)["plait.effect.kind"] == "llm"]
    assert [(t["gen_ai.usage.input_tokens"], t["gen_ai.usage.output_tokens"]) for t in turns] == [
        (40, 12),
        (90, 6),
    ]
    assert all(t["plait.effect.outcome"] == "Completed" for t in turns)
    everything = json.dumps([attrs(s) for s in spans.exporter.get_finished_spans()])
    for secret in ("widget", "Price", "6249", "1250"):  # prompt, arguments, results, answer
        assert secret not in everything


def start() -> dict:
    return {"started": True}


def test_asks_and_timers_are_traced_when_registered_and_when_settled(tmp_path, spans):
    now = [NOW_MS]
    workflow = (
        Workflow.new("waits")
        .node("start", tool=start)
        .node("question", ask="Anything to add?")
        .node("nap", sleep_s=5)
        .edge("start", "question")
        .edge("question", "nap")
    )
    db = f"sqlite:///{tmp_path}/plait.db"
    runtime = Runtime(db, clock=lambda: now[0], principal="owner", telemetry=spans.provider)
    with runtime:
        parked = runtime.run_sync(workflow, run_id="w")
        ask_id = parked.asks[0]["ask_id"]
        runtime.respond("w", ask_id, {"note": "none"}, by="someone")
        runtime.resume_sync("w", workflow=workflow)  # parks on the timer
        now[0] += 6_000
        done = runtime.resume_sync("w", workflow=workflow)
    assert done.status == "completed"

    first, second, third = sorted(spans.named("plait.run"), key=lambda s: s.start_time or 0)
    assert [attrs(r)["plait.status"] for r in (first, second, third)] == [
        "parked",
        "parked",
        "completed",
    ]

    def waits(run: ReadableSpan) -> list[tuple[Any, ...]]:
        return [
            (
                attrs(s)["plait.superstep"],
                attrs(s).get("plait.parked", False),
                attrs(e)["plait.effect.kind"],
                attrs(e)["plait.effect.outcome"],
                attrs(e).get("plait.effect.settled"),
            )
            for s in spans.children(run)
            for e in spans.children(s)
        ]

    assert waits(first) == [
        (1, False, "tool", "Completed", None),
        (2, True, "ask", "Pending", False),
    ]
    assert waits(second) == [
        (2, False, "ask", "Completed", True),
        (3, True, "timer", "Pending", False),
    ]
    assert waits(third) == [(3, False, "timer", "Completed", True)]
    ask_spans = [e for s in spans.children(first) for e in spans.children(s)][1:]
    assert attrs(ask_spans[0])["plait.ask_id"] == ask_id
    assert "Anything to add" not in json.dumps([attrs(s) for s in spans.named("plait.effect")])


HITL_FLOWS = Path(__file__).parent / "crashflow_hitl"


def test_a_child_run_nests_under_its_parents_subgraph_effect(tmp_path, spans):
    db = f"sqlite:///{tmp_path}/plait.db"
    with Runtime(db, telemetry=spans.provider) as runtime:
        workflow = load_workflow(HITL_FLOWS / "parent.yaml")
        assert runtime.run_sync(workflow, crashflow_input(tmp_path), run_id="p").status == (
            "completed"
        )

    parent = next(r for r in spans.named("plait.run") if attrs(r)["plait.run_id"] == "p")
    assert parent.parent is None
    sub = next(e for e in spans.named("plait.effect") if attrs(e)["plait.node"] == "sub")
    assert (attrs(sub)["plait.effect.kind"], attrs(sub)["plait.subgraph"]) == (
        "subgraph",
        "child.yaml",
    )
    (child,) = spans.children(sub, "plait.run")
    assert attrs(child)["plait.workflow"] == "crash-child"
    assert attrs(child)["plait.run_id"].startswith("p~")
    assert child.context.trace_id == parent.context.trace_id
    assert [attrs(e)["plait.node"] for s in spans.children(child) for e in spans.children(s)] == [
        "c1",
        "c2",
    ]


def test_send_tasks_carry_their_task_paths(tmp_path, spans):
    db = f"sqlite:///{tmp_path}/plait.db"
    with Runtime(db, telemetry=spans.provider) as runtime:
        workflow = load_workflow(HITL_FLOWS / "fanout.yaml")
        data = {**crashflow_input(tmp_path), "n": 3}
        assert runtime.run_sync(workflow, data, run_id="f").status == "completed"

    squares = [a for a in map(attrs, spans.named("plait.effect")) if a["plait.node"] == "square"]
    assert sorted(a["plait.task_path"] for a in squares) == ["/000000", "/000001", "/000002"]
    supersteps = [attrs(s) for s in spans.named("plait.superstep")]
    assert any(s.get("plait.tasks_dispatched") == 3 for s in supersteps)


def test_spans_are_off_by_argument_or_by_plait_otel(monkeypatch, spans):
    monkeypatch.delenv("PLAIT_OTEL", raising=False)
    assert telemetry_enabled(None) and telemetry_enabled(True)
    assert not telemetry_enabled(False)
    assert run_trace(False, "r", "w", resumed=False) is NO_TRACE
    monkeypatch.setenv("PLAIT_OTEL", "0")
    assert not telemetry_enabled(None)
    assert run_trace(None, "r", "w", resumed=False) is NO_TRACE
    assert telemetry_enabled(spans.provider)  # an explicit provider wins over the environment


def test_in_memory_runs_are_traced_too(spans):
    workflow = Workflow.new("tiny").node("only", tool=start)

    assert run_sync(workflow, telemetry=spans.provider).status == "completed"
    run = spans.only_run()
    (superstep,) = spans.children(run)
    (effect,) = spans.children(superstep)
    assert attrs(effect)["plait.effect.outcome"] == "Completed"


WITHOUT_OTEL = """
import asyncio, sys
sys.modules["opentelemetry"] = None  # importing it fails, as when it is not installed
from plait import Runtime, Workflow
from plait.driver import telemetry

def only():
    return {"ok": True}

workflow = Workflow.new("tiny").node("only", tool=only)
with Runtime(sys.argv[1]) as runtime:
    status = runtime.run_sync(workflow).status
print(status, telemetry.otel_api() is None,
      telemetry.run_trace(None, "r", "w", resumed=False) is telemetry.NO_TRACE,
      sorted(m for m in sys.modules if m.startswith("opentelemetry.")))
"""


def test_without_opentelemetry_runs_work_and_no_span_code_runs(tmp_path):
    db = f"sqlite:///{tmp_path}/plait.db"
    ran = subprocess.run(
        [sys.executable, "-c", WITHOUT_OTEL, db],
        capture_output=True,
        text=True,
        env={k: v for k, v in os.environ.items() if k != "PLAIT_OTEL"},
        timeout=120,
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.split() == ["completed", "True", "True", "[]"]


NO_SDK = """
import sys
import plait
print(sorted(m for m in sys.modules if m.startswith("opentelemetry")))
from plait.driver import telemetry
print(telemetry.otel_api() is not None,
      telemetry.run_trace(None, "r", "w", resumed=False) is telemetry.NO_TRACE)
"""


def test_plait_imports_no_opentelemetry_and_traces_nothing_without_an_sdk():
    ran = subprocess.run(
        [sys.executable, "-c", NO_SDK],
        capture_output=True,
        text=True,
        env={k: v for k, v in os.environ.items() if k != "PLAIT_OTEL"},
        timeout=60,
    )
    assert ran.returncode == 0, ran.stderr
    imported, traced = ran.stdout.splitlines()
    assert imported == "[]"
    assert traced.split() == ["True", "True"]  # the API is there; nothing records the run span
