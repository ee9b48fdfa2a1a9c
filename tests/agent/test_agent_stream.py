"""Agent.run_stream: events observe the run and never change what it journals."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from plait import Agent, RunStatus
from plait.agent import (
    AgentEvent,
    ModelDelta,
    RunFinished,
    ToolCallFinished,
    ToolCallStarted,
    TurnFinished,
    TurnStarted,
)
from plait.core.canonical import dumps
from plait.store import open_store

NOW_MS = 1_700_000_000_000
ANSWERS = [
    {
        "tool_calls": [
            {"name": "unit_price", "arguments": {"item": "widget"}},
            {"name": "unit_price", "arguments": {"item": "gadget"}},
        ],
        "usage": {"input_tokens": 40, "output_tokens": 12},
    },
    {"text": '{"total": 6249}', "usage": {"input_tokens": 90, "output_tokens": 6}},
]


class Answer(BaseModel):
    total: int


def unit_price(item: str) -> dict:
    """The unit price of an item, in cents."""
    return {"item": item, "cents": {"widget": 1250, "gadget": 4999}[item]}


def price_agent(spec: str, db: str) -> Agent[Answer]:
    return Agent(
        spec,
        instructions="Price the items.",
        output_type=Answer,
        tools=[unit_price],
        db=db,
        clock=lambda: NOW_MS,
    )


async def collect(agent: Agent[Answer], prompt: str, run_id: str, delay: float = 0) -> list[Any]:
    events: list[AgentEvent] = []
    async for event in agent.run_stream(prompt, run_id=run_id):
        events.append(event)
        await asyncio.sleep(delay)  # a slow consumer
    return events


def journal_of(db: str, run_id: str) -> str:
    """Everything journaled for the run, in order, as one canonical text."""
    store = open_store(db)
    try:
        journal = store.load_journal(run_id)
        items: list[Any] = []
        for item in journal.items():
            if hasattr(item, "sha256"):
                items.append(
                    ["checkpoint", item.seq, store.read_checkpoint(run_id, item.seq).hex()]
                )
            else:
                fields = dict(vars(item))
                if "key" in fields:
                    fields["key"] = fields["key"].to_json()
                items.append([type(item).__name__, fields])
        return dumps(items)
    finally:
        store.close()


def test_stream_yields_turn_and_tool_events_in_order(scripted, db):
    agent = price_agent(scripted(ANSWERS), db)

    streamed = asyncio.run(collect(agent, "Price a widget and a gadget.", "run-stream"))

    events = [e for e in streamed if not isinstance(e, ModelDelta)]  # the next test's
    kinds = [type(e).__name__ for e in events]
    assert kinds == [
        "TurnStarted",
        "TurnFinished",
        "ToolCallStarted",
        "ToolCallStarted",
        "ToolCallFinished",
        "ToolCallFinished",
        "TurnStarted",
        "TurnFinished",
        "RunFinished",
    ]
    started, asked, widget, gadget, widget_done, gadget_done, again, answered, done = events
    assert isinstance(started, TurnStarted) and (started.turn, started.messages) == (0, 2)
    assert isinstance(asked, TurnFinished) and [c.tool_name for c in asked.tool_calls] == [
        "unit_price",
        "unit_price",
    ]
    assert isinstance(widget, ToolCallStarted) and widget.call.args == {"item": "widget"}
    assert isinstance(gadget, ToolCallStarted) and gadget.call.args == {"item": "gadget"}
    assert widget.call.tool_call_id == asked.tool_calls[0].tool_call_id
    assert isinstance(widget_done, ToolCallFinished) and isinstance(gadget_done, ToolCallFinished)
    assert widget_done.result.tool_call_id == widget.call.tool_call_id
    assert widget_done.result.content == {"item": "widget", "cents": 1250}
    assert gadget_done.result.content == {"item": "gadget", "cents": 4999}
    assert isinstance(again, TurnStarted) and (again.turn, again.messages) == (1, 5)
    assert isinstance(answered, TurnFinished) and answered.text == '{"total": 6249}'
    assert (answered.input_tokens, answered.output_tokens) == (90, 6)
    assert isinstance(done, RunFinished) and done.state.status is RunStatus.COMPLETED
    assert done.state.structured_output == Answer(total=6249)
    assert agent.verify("run-stream").verified


def test_stream_yields_each_turns_deltas_between_its_start_and_finish(scripted, db):
    agent = price_agent(scripted(ANSWERS), db)

    events = asyncio.run(collect(agent, "Price a widget and a gadget.", "run-deltas"))

    kinds = [type(e).__name__ for e in events]
    first, second = kinds.index("TurnFinished"), len(kinds) - 1 - kinds[::-1].index("TurnStarted")
    assert set(kinds[1:first]) == {"ModelDelta"} and kinds[0] == "TurnStarted"
    assert set(kinds[second + 1 : -2]) == {"ModelDelta"} and kinds[-2:] == [
        "TurnFinished",
        "RunFinished",
    ]
    deltas = [e for e in events if isinstance(e, ModelDelta)]
    calls = [d for d in deltas if d.turn == 0]
    assert {(d.kind, d.index, d.name) for d in calls} == {
        ("tool_call", 0, "unit_price"),
        ("tool_call", 1, "unit_price"),
    }
    assert "".join(d.text for d in calls if d.index == 1) == '{"item":"gadget"}'
    answer = "".join(d.text for d in deltas if d.turn == 1)
    assert answer == '{"total": 6249}' and len([d for d in deltas if d.turn == 1]) == 2
    assert {d.run_id for d in deltas} == {"run-deltas"}


def test_the_journal_is_identical_with_a_slow_reader_an_early_exit_or_none(
    scripted, tmp_path: Path
):
    spec = scripted(ANSWERS)
    dbs = [f"sqlite:///{tmp_path / name}.db" for name in ("plain", "slow", "early")]

    plain = price_agent(spec, dbs[0]).run_sync("Price them.", run_id="run-same")
    slow = asyncio.run(collect(price_agent(spec, dbs[1]), "Price them.", "run-same", 0.02))

    async def stop_after_the_first_event() -> None:
        async with price_agent(spec, dbs[2]).run_stream("Price them.", run_id="run-same") as run:
            async for _ in run:
                break

    asyncio.run(stop_after_the_first_event())

    assert plain.status is RunStatus.COMPLETED
    assert isinstance(slow[-1], RunFinished) and slow[-1].state == plain
    assert journal_of(dbs[0], "run-same") == journal_of(dbs[1], "run-same")
    assert journal_of(dbs[0], "run-same") == journal_of(dbs[2], "run-same")
    assert price_agent(spec, dbs[2]).state("run-same") == plain
