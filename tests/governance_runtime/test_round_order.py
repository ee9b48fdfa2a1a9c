"""A tool round updates the flow state in effect_seq order, whatever order it settles in (§9).

The core is driven directly (``step`` through the wave harness of tests/support), so the
results of one round can be fed in the order they were dispatched or reversed. Two calls
of one round write the same key with different values; a gate reads it, so the tools the
next turn offers depend on which result the flow state kept. Both orders must give the
same dispatches and the same checkpoints: the later ``effect_seq`` wins, every time.
"""

from __future__ import annotations

from typing import Any

from plait.core.env import NodeExecutor, StepEnv
from plait.core.events import EffectResolved
from plait.core.outcomes import Completed, Usage
from plait.governance import Flow, eq, is_true
from support.core_harness import Trace, drive, make_plan

TOOLS = ["left", "right"]

FLOW = (
    Flow.new()
    # Active only while the flow state says side == "left": it denies `right` then.
    .step("watch", gate=eq("side", "left"), deny=["right"], done=is_true("finished"))
    .build()
)


def env() -> StepEnv:
    plan = make_plan(["agent"], [])
    spec = {"instruction": "Pick a side.", "tools": TOOLS}
    return StepEnv(
        plan=plan,
        executors=(NodeExecutor("abstract", "agent", spec),),
        flows={"agent": FLOW},
    )


def effect(node: str, attempt: int, value: Any) -> Completed:
    """The model (turn 1 calls left then right; turn 2 answers) and the two tools."""
    if "messages" not in value:
        return Completed({"side": value["side"]})
    usage = Usage(10, 5, 0)
    if len(value["messages"]) == 1:
        calls = [{"id": f"c-{side}", "name": side, "arguments": {"side": side}} for side in TOOLS]
        return Completed({"tool_calls": calls, "usage": {"input_tokens": 10}}, usage)
    return Completed({"text": "done", "usage": {"input_tokens": 20}}, usage)


def run(permute: Any) -> Trace:
    return drive(env(), effect, {}, permute=permute)


def reversed_wave(resolved: list[EffectResolved]) -> list[EffectResolved]:
    return list(reversed(resolved))


def test_a_round_settling_in_reverse_order_gives_the_same_flow_state_and_checkpoints():
    in_order = run(None)
    in_reverse = run(reversed_wave)

    assert in_order.outcome == in_reverse.outcome == "Completed"
    assert [d.input for d in in_reverse.dispatches] == [d.input for d in in_order.dispatches]
    assert in_reverse.checkpoints == in_order.checkpoints
    turns = [d.input for d in in_order.dispatches if "messages" in d.input]
    # right (effect_seq 2) settles last in effect_seq order: side == "right", the gate is
    # closed and nothing is denied. Applied in completion order, reversed, left would win.
    assert turns[1]["tools"] == ["left", "right"]


def test_both_tools_of_the_round_ran_in_one_wave():
    trace = run(reversed_wave)

    tools = [d for d in trace.dispatches if d.key.kind == "tool"]
    assert [(d.key.effect_seq, d.input) for d in tools] == [
        (1, {"side": "left"}),
        (2, {"side": "right"}),
    ]
