"""Conversations: per-turn cost of a 200-turn conversation across 20 runs, plait next to
pydantic-ai with ``message_history`` in the same run (issue #18 part 2).

A *run* is one user message; the model answers it in ``TURNS`` model turns (``TURNS - 1``
tool calls of ``add``, then a text answer), so ``RUNS`` runs make a conversation of
``RUNS * TURNS`` model turns whose history every later run is handed. No network, no real
model: both sides are scripted with O(1) answers, so what is measured is each runtime's
own cost of carrying the conversation.

- **plait** (durable): ``Agent("scripted:answers.json")`` with the tool ``add``; run ``i``
  is ``agent.run(prompt, conversation_id=C)`` on one SQLite file (WAL, ``synchronous=
  NORMAL``): the run reads C's last completed run's transcript from the store and pins it
  in its input (by reference: content-addressed nodes), every turn and tool call is
  journaled.
- **pydantic-ai** (not durable, nothing persisted): ``Agent(FunctionModel(fn))`` with the
  same tool; run ``i`` is ``agent.run(prompt, message_history=previous.all_messages())``.

Reported: µs per model turn over the whole conversation (median of ``--repeats``, each on
a fresh file, after a warm-up), the ratio, µs per turn of the first and the last run (does
a turn cost more as the conversation grows?), and plait's stored bytes per turn.

    .venv/bin/python bench/conversations.py [--quick] [--runs N] [--turns N]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from plait import Agent

RUNS = 20
TURNS = 10
REPEATS = 3
INSTRUCTION = "Add one to a number a few times with the add tool, then say done."


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def plait_conversation(folder: Path, runs: int, turns: int) -> tuple[list[float], int]:
    """Seconds per run, and the stored bytes of the whole conversation."""
    script: list[dict[str, Any]] = [
        {"tool_calls": [{"name": "add", "arguments": {"a": i, "b": 1}}]} for i in range(turns - 1)
    ]
    script.append({"text": "done"})
    answers = folder / "answers.json"
    answers.write_text(json.dumps(script), encoding="utf-8")
    agent = Agent(
        f"scripted:{answers}",
        instructions=INSTRUCTION,
        tools=[add],
        db=f"sqlite:///{folder / 'p.db'}",
        model_settings={"max_effects_per_attempt": 2 * turns + 4},
        telemetry=False,
        principal="bench",
    )
    times: list[float] = []

    async def converse() -> None:
        for i in range(runs):
            t0 = time.perf_counter()
            state = await agent.run(f"message {i}", conversation_id="c", run_id=f"r{i}")
            times.append(time.perf_counter() - t0)
            assert state.output == "done", (state.status, state.metadata.get("outcome"))

    with agent:
        asyncio.run(converse())
        store = agent._open_store()
        stored = sum(store.stored_bytes(f"r{i}") for i in range(runs))
        last = agent.state(f"r{runs - 1}")
        assert len(last.message_history) == runs * (2 * turns) - 0, len(last.message_history)
    return times, stored


def pydantic_conversation(runs: int, turns: int) -> list[float]:
    """Seconds per run."""
    from pydantic_ai import Agent as PydanticAgent
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    calls = 0

    def scripted(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        nonlocal calls
        i, calls = calls % turns, calls + 1
        if i < turns - 1:
            return ModelResponse(parts=[ToolCallPart("add", {"a": i, "b": 1})])
        return ModelResponse(parts=[TextPart("done")])

    agent = PydanticAgent(FunctionModel(scripted), instructions=INSTRUCTION)
    agent.tool_plain(add)
    times: list[float] = []

    async def converse() -> None:
        history: list[ModelMessage] = []
        for i in range(runs):
            t0 = time.perf_counter()
            result = await agent.run(f"message {i}", message_history=history)
            times.append(time.perf_counter() - t0)
            assert result.output == "done", result.output
            history = result.all_messages()
        assert len(history) == runs * 2 * turns, len(history)

    asyncio.run(converse())
    return times


def per_turn_us(times: list[float], turns: int) -> float:
    return sum(times) / (len(times) * turns) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one repeat, no warm-up")
    parser.add_argument("--runs", type=int, default=RUNS)
    parser.add_argument("--turns", type=int, default=TURNS)
    parser.add_argument("--repeats", type=int, default=REPEATS)
    args = parser.parse_args()
    runs, turns = args.runs, args.turns
    repeats = 1 if args.quick else args.repeats
    if not args.quick:  # warm-up: imports, SDK and store set-up
        with tempfile.TemporaryDirectory() as tmp:
            plait_conversation(Path(tmp), 2, turns)
        pydantic_conversation(2, turns)
    plait_samples: list[list[float]] = []
    pydantic_samples: list[list[float]] = []
    stored: list[int] = []
    for _ in range(repeats):
        with tempfile.TemporaryDirectory() as tmp:
            times, size = plait_conversation(Path(tmp), runs, turns)
        plait_samples.append(times)
        stored.append(size)
        pydantic_samples.append(pydantic_conversation(runs, turns))

    def median(samples: list[list[float]], pick: slice) -> float:
        return statistics.median(per_turn_us(s[pick], turns) for s in samples)

    total = runs * turns
    print(f"# Conversations: {total} model turns across {runs} runs of {turns} turns each")
    print(f"(median of {repeats} repeat(s); µs per model turn)\n")
    print("| runtime | whole conversation | first run | last run | last / first |")
    print("| --- | ---: | ---: | ---: | ---: |")
    rows = [("plait (durable, SQLite)", plait_samples), ("pydantic-ai", pydantic_samples)]
    for name, samples in rows:
        whole = median(samples, slice(None))
        first, last = median(samples, slice(0, 1)), median(samples, slice(-1, None))
        print(f"| {name} | {whole:,.0f} | {first:,.0f} | {last:,.0f} | {last / first:.2f} |")
    ratio = median(plait_samples, slice(None)) / median(pydantic_samples, slice(None))
    print(f"\nplait / pydantic-ai per turn: {ratio:.2f}x")
    print(f"plait stored bytes per turn: {statistics.median(stored) / total:,.0f}")


if __name__ == "__main__":
    main()
