"""Core-only supersteps per second on a 1000-iteration loop, next to LangGraph's in-memory loop.

Both sides run a loop whose body does nothing but count, so what is measured is the
runtime's own cost per superstep: for plait, the pure step function including the
canonical checkpoint bytes it emits each superstep; for LangGraph, ``invoke`` of a
compiled StateGraph without a checkpointer.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

from plait.core.env import Budgets, NodeExecutor, StepEnv
from plait.core.events import ClockReading, Dispatch, EffectResolved, Finish, Start
from plait.core.outcomes import Completed
from plait.core.plan import EdgeSpec, NodeSpec, build_plan
from plait.core.state import SchedulerState
from plait.core.step import step

N = 1000


def plait_core_loop(n: int = N) -> int:
    """Drive ``work -> work (max_cycles n-1) -> done`` through the core; returns supersteps."""
    plan = build_plan(
        [NodeSpec("work"), NodeSpec("done")],
        [EdgeSpec("work", "work", f"i < {n}", n), EdgeSpec("work", "done", f"i >= {n}")],
        {"i": "sum"},
    )
    env = StepEnv(
        plan=plan,
        executors=(NodeExecutor("tool", "work"), NodeExecutor("tool", "done")),
        budgets=Budgets(max_supersteps=n + 10),
    )
    state = SchedulerState.new("bench", plan)
    events: list = [ClockReading(0), Start({"i": 0})]
    clock = 0
    while True:
        out = step(env, state, events)
        dispatches = [c for c in out.commands if isinstance(c, Dispatch)]
        if any(isinstance(c, Finish) for c in out.commands):
            return state.superstep
        clock += 1
        events = [ClockReading(clock)]
        events.extend(EffectResolved(d.key, Completed({"i": 1})) for d in dispatches)


def langgraph_loop(n: int = N) -> int:
    from typing import TypedDict

    from langgraph.graph import END, START, StateGraph

    class State(TypedDict):
        i: int

    def work(state: State) -> dict:
        return {"i": state["i"] + 1}

    graph = StateGraph(State)
    graph.add_node("work", work)
    graph.add_edge(START, "work")
    graph.add_conditional_edges("work", lambda s: "work" if s["i"] < n else END, ["work", END])
    app = graph.compile()
    app.invoke({"i": 0}, {"recursion_limit": n + 10})
    return n


def best_of(fn: Callable[[], int], repeats: int = 7) -> tuple[float, int]:
    """Median seconds per superstep over ``repeats`` runs (after one warm-up)."""
    steps = fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) / steps, steps


def main() -> dict[str, float]:
    ours, steps = best_of(plait_core_loop)
    try:
        theirs, _ = best_of(langgraph_loop)
    except ImportError:
        print("langgraph is not installed: `make bench` installs it")
        theirs = float("nan")
    print(f"core loop, {N} iterations ({steps} supersteps), median of 7:")
    row = "  {:<22} {:8.1f} us/superstep  {:10.0f} supersteps/s"
    print(row.format("plait core", ours * 1e6, 1 / ours))
    print(row.format("langgraph (in-memory)", theirs * 1e6, 1 / theirs))
    print(f"  ratio: plait core is {theirs / ours:.1f}x faster than LangGraph without checkpointer")
    return {"plait_us": ours * 1e6, "langgraph_us": theirs * 1e6, "ratio": theirs / ours}


if __name__ == "__main__":
    main()
