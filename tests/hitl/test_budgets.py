"""Budgets, one axis at a time (docs/architecture.md §7; axis names and units in CONTRACT.md).

Each test exhausts one axis: the run ends `budget_exhausted` with `outcome.axis` named
as CONTRACT does, exit 1. A refused LLM turn is never sent to the model; after
`raise-budget` a `resume` continues at exactly that turn and `verify` still passes.
Wall time needs a clock that moves inside one process, so those tests drive
`plait.Runtime` with an injected clock that the tools advance.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hitl.support import HOUR, T0, Plait
from plait import PlaitError, Runtime, Workflow

FIRST_TURN = {
    "text": "",
    "tool_calls": [{"name": "lookup", "arguments": {"q": "a"}}],
    "usage": {"input_tokens": 100, "output_tokens": 50},
}
SECOND_TURN = {"text": '{"answer": "a"}', "usage": {"input_tokens": 120, "output_tokens": 10}}


def exhausted(call, axis: str) -> dict:
    assert call.returncode == 1, call
    run = call.data
    assert run["status"] == "budget_exhausted", run
    assert run["outcome"] == {"kind": "budget_exhausted", "axis": axis}
    return run


def llm_entries(plait: Plait, run_id: str) -> list[dict]:
    return [e for e in plait.trace(run_id) if e["kind"] == "llm"]


def test_supersteps(plait: Plait):
    run = exhausted(plait.run("loop", "s"), "supersteps")
    assert run["spent"]["supersteps"] == 4 and run["context"] == {"i": 4}
    assert plait.verify("s")["up_to"] == "terminal"
    # Resuming without a raise reports the same outcome again.
    exhausted(plait("resume", "s"), "supersteps")
    raised = plait("raise-budget", "s", "supersteps=100")
    assert raised.returncode == 0, raised
    assert raised.data == {"run_id": "s", "accepted": True, "budgets": {"max_supersteps": 100}}
    done = plait("resume", "s")
    assert done.returncode == 0, done
    assert done.data["context"] == {"i": 10, "finished": True}
    assert done.data["spent"]["supersteps"] == 11
    assert plait.verify("s")["up_to"] == "terminal"


def test_storage_bytes(plait: Plait):
    run = exhausted(plait.run("storage", "b"), "storage_bytes")
    assert run["spent"]["storage_bytes"] > 5000 and run["spent"]["supersteps"] == 1
    assert "finished" not in run["context"]
    assert [e["node"] for e in plait.trace("b")] == ["big"]
    assert plait.verify("b")["up_to"] == "terminal"


def test_tokens_refuses_the_turn_without_calling_the_model_then_raise_and_resume(plait: Plait):
    plait.scripted([FIRST_TURN])  # exactly the responses consumed before the refusal
    run = exhausted(plait.run("tokens", "k"), "tokens")
    assert run["spent"]["input_tokens"] + run["spent"]["output_tokens"] == 150
    [turn] = llm_entries(plait, "k")  # the refused turn was never dispatched
    assert turn["status"] == "completed"
    # Had the model been called a second time, the scripted file would have run dry
    # (an ExecutorError turn in the trace).
    assert all(e["status"] == "completed" for e in plait.trace("k"))
    assert plait.verify("k")["up_to"] == "terminal"

    exhausted(plait("resume", "k"), "tokens")  # no raise yet: the same outcome, no call
    assert len(llm_entries(plait, "k")) == 1

    assert plait("raise-budget", "k", "tokens=1000").returncode == 0
    plait.scripted([FIRST_TURN, SECOND_TURN])
    done = plait("resume", "k")
    assert done.returncode == 0, done
    assert done.data["status"] == "completed"
    assert done.data["context"] == {"answer": "a", "finished": True}
    assert [e["usage"]["input_tokens"] for e in llm_entries(plait, "k")] == [100, 120]
    assert done.data["spent"]["input_tokens"] + done.data["spent"]["output_tokens"] == 280
    assert plait.verify("k")["up_to"] == "terminal"


def test_usd_refuses_the_turn_then_raise_in_dollars_and_resume(plait: Plait):
    plait.scripted([FIRST_TURN])
    run = exhausted(plait.run("usd", "u"), "usd")
    assert run["spent"]["usd_micros"] == 150_000_000  # 150 tokens at $1 each
    assert len(llm_entries(plait, "u")) == 1
    assert plait.verify("u")["up_to"] == "terminal"

    assert plait("raise-budget", "u", "usd=1000").returncode == 0
    plait.scripted([FIRST_TURN, SECOND_TURN])
    done = plait("resume", "u")
    assert done.returncode == 0, done
    assert done.data["spent"]["usd_micros"] == 280_000_000
    assert plait.verify("u")["up_to"] == "terminal"


def test_the_reservation_is_llm_max_tokens_and_actual_usage_may_overrun_it(plait: Plait):
    # 150 spent + a 50-token reservation fits a 200-token ceiling: the second turn runs.
    # It actually uses 130 (280 in all), so the next superstep cannot open.
    flow = Path(plait.flow("tokens"))
    flow.write_text(flow.read_text().replace("max_tokens: 100}", "max_tokens: 50}"))
    plait.scripted([FIRST_TURN, SECOND_TURN])
    run = exhausted(plait.run("tokens", "k"), "tokens")
    assert len(llm_entries(plait, "k")) == 2
    assert run["context"] == {"answer": "a"}  # the agent finished; `finish` never opened
    assert run["spent"]["supersteps"] == 1


# --- wall time: an injected clock that the tools advance ---------------------------


class FakeClock:
    def __init__(self, now: int) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def test_wall_ms_with_a_moving_clock(tmp_path: Path):
    clock = FakeClock(T0)

    async def first() -> dict:
        clock.now += 30
        return {"first": True}

    async def second() -> dict:
        clock.now += 30
        return {"second": True}

    async def finish() -> dict:
        return {"finished": True}

    wf = (
        Workflow.new("wall")
        .node("first", tool=first)
        .node("second", tool=second)
        .node("finish", tool=finish)
        .edge("first", "second")
        .edge("second", "finish")
        .budget(max_wall_s=0.05)
    )
    with Runtime(f"sqlite:///{tmp_path}/w.db", clock=clock, principal="alice") as rt:
        run = rt.run_sync(wf, {}, run_id="w")
        assert run.status == "budget_exhausted"
        assert run.outcome == {"BudgetExhausted": {"axis": "wall_ms"}}
        assert run.spent["wall_ms"] == 60 and run.spent["supersteps"] == 2
        assert rt.verify("w", workflow=wf).verified
        rt.raise_budget("w", {"max_wall_ms": 1000})
        done = rt.resume_sync("w", workflow=wf)
        assert done.status == "completed", done.outcome
        assert done.context == {"first": True, "second": True, "finished": True}
        report = rt.verify("w", workflow=wf)
        assert report.verified and report.up_to == "terminal"


def test_wall_ms_excludes_the_park_and_elapsed_ms_includes_it(tmp_path: Path):
    clock = FakeClock(T0)

    async def prep() -> dict:
        clock.now += 100
        return {"prepped": True}

    async def finish() -> dict:
        clock.now += 40
        return {"finished": True}

    wf = (
        Workflow.new("parked")
        .node("prep", tool=prep)
        .node("approve", ask={"prompt": "OK?", "approval": True})
        .node("finish", tool=finish)
        .edge("prep", "approve")
        .edge("approve", "finish", when="approved")
        .budget(max_wall_s=1)  # a three-hour park must not exhaust a one-second wall budget
    )
    with Runtime(f"sqlite:///{tmp_path}/w.db", clock=clock, principal="alice") as rt:
        parked = rt.run_sync(wf, {}, run_id="p")
        assert parked.status == "parked"
        assert parked.spent["wall_ms"] == 100 and parked.spent["elapsed_ms"] == 100
        clock.now += 3 * HOUR
        rt.respond("p", parked.asks[0]["ask_id"], approve=True, by="bob")
        done = rt.resume_sync("p", workflow=wf)
        assert done.status == "completed"
        assert done.spent["wall_ms"] == 140
        assert done.spent["elapsed_ms"] == 3 * HOUR + 140
        assert rt.verify("p", workflow=wf).verified


def test_wall_ms_charges_the_active_time_after_an_unpark(tmp_path: Path):
    clock = FakeClock(T0)
    script = tmp_path / "answers.json"
    script.write_text(
        json.dumps(
            [
                {"text": "", "tool_calls": [{"name": "pay", "arguments": {"amount": 5}}]},
                {"text": '{"done": true}'},
            ]
        )
    )

    def pay(amount: int) -> dict:
        """Pay."""
        clock.now += 1000
        return {"paid": amount}

    async def prep() -> dict:
        clock.now += 100
        return {"prepped": True}

    wf = (
        Workflow.new("unpark")
        .tool(pay, approval=True)
        .node("prep", tool=prep)
        .node("agent", instruction="Pay it.", tools=["pay"])
        .edge("prep", "agent")
        .model(f"scripted:{script}")
    )
    with Runtime(f"sqlite:///{tmp_path}/w.db", clock=clock, principal="alice") as rt:
        parked = rt.run_sync(wf, {}, run_id="a")
        assert parked.status == "parked" and parked.spent["wall_ms"] == 100
        clock.now += HOUR
        rt.respond("a", parked.asks[0]["ask_id"], approve=True, by="bob")
        done = rt.resume_sync("a", workflow=wf)
        assert done.status == "completed"
        assert done.spent["elapsed_ms"] == HOUR + 1100
        assert done.spent["wall_ms"] == 1100  # prep 100 + the approved call 1000


CHILD_TICKS = """\
name: ticking-child
nodes:
  - {id: one, tool: tick}
  - {id: two, tool: tick}
edges: [{from: one, to: two}]
tools:
  tick: {python: "wall_ticks:tick"}
"""

PARENT_TICKS = """\
name: ticking-parent
nodes:
  - {id: first, tool: tick}
  - {id: child, workflow: child.yaml}
  - {id: last, tool: tick}
edges: [{from: first, to: child}, {from: child, to: last}]
tools:
  tick: {python: "wall_ticks:tick"}
"""


def test_a_child_that_runs_to_its_end_in_the_wave_is_the_parents_wall_time(tmp_path: Path):
    """The parent does not park on a child that finishes inside the wave: the child's
    active time is the parent's wall time, and counts against its max_wall_s (§7)."""
    now = tmp_path / "now_ms"
    now.write_text(str(T0))
    (tmp_path / "wall_ticks.py").write_text(
        "from pathlib import Path\n"
        "NOW = Path(__file__).parent / 'now_ms'\n"
        "def tick() -> dict:\n"
        "    NOW.write_text(str(int(NOW.read_text()) + 1000))  # each call takes a second\n"
        "    return {}\n"
    )
    (tmp_path / "child.yaml").write_text(CHILD_TICKS)
    (tmp_path / "parent.yaml").write_text(PARENT_TICKS)
    (tmp_path / "tight.yaml").write_text(PARENT_TICKS + "budgets: {max_wall_s: 2.5}\n")
    from plait.workflow import load_workflow

    def clock() -> int:
        return int(now.read_text())

    with Runtime(f"sqlite:///{tmp_path}/w.db", clock=clock, principal="alice") as rt:
        done = rt.run_sync(load_workflow(tmp_path / "parent.yaml"), {}, run_id="free")
        tight = rt.run_sync(load_workflow(tmp_path / "tight.yaml"), {}, run_id="tight")
        verified = [rt.verify(run_id).verified for run_id in ("free", "tight")]

    assert done.status == "completed"
    assert (done.spent["wall_ms"], done.spent["elapsed_ms"]) == (4000, 4000)
    assert tight.status == "budget_exhausted"  # 3 s of wall time before `last` would open
    assert tight.outcome == {"BudgetExhausted": {"axis": "wall_ms"}}
    assert tight.spent["wall_ms"] == 3000 and tight.spent["supersteps"] == 2
    assert verified == [True, True]


@pytest.mark.parametrize(
    "raised",
    [
        {"tokens": 100_000},  # the CLI's axis name, not a ceiling
        {"max_usd": 1},  # a workflow file's unit, not the run's
        {"max_tokens": "abc"},
        {"max_tokens": -5},
        {"max_tokens": True},
    ],
)
def test_python_budget_raises_take_the_runs_ceilings_or_are_refused(tmp_path: Path, raised):
    def step() -> dict:
        return {}

    wf = Workflow.new("tiny").node("a", tool=step).budget(max_supersteps=1)
    with Runtime(f"sqlite:///{tmp_path}/b.db", principal="alice") as rt:
        rt.run_sync(wf, {}, run_id="r")
        before = rt.store.load_journal("r").items()
        with pytest.raises(PlaitError) as by_raise:
            rt.raise_budget("r", raised)
        with pytest.raises(PlaitError) as by_fork:
            rt.fork_sync("r", workflow=wf, budgets=raised)
        assert rt.store.load_journal("r").items() == before  # nothing journaled
        assert [i.run_id for i in rt.store.list_runs()] == ["r"]  # no fork started
    assert (by_raise.value.code, by_fork.value.code) == ("E019", "E019")
