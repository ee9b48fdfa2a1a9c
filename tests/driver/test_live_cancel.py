"""A cancel or steering message journaled while a run is being driven is seen at the next wave."""

from __future__ import annotations

from plait import Runtime, Workflow

RT: dict[str, Runtime] = {}


def step(n: int = 0) -> dict:
    if n == 2:  # mid-run, another process (here: the same store) cancels the run
        RT["rt"].cancel("live", reason="stop now", by="ops")
    return {"n": n + 1}


def finish() -> dict:
    return {"finished": True}


def test_a_cancel_journaled_mid_run_drains_the_run_at_the_next_wave(tmp_path):
    wf = (
        Workflow.new("live")
        .node("step", tool=step)
        .node("finish", tool=finish)
        .edge("step", "step", when="n < 10", max_cycles=20)
        .edge("step", "finish", when="n >= 10")
    )
    with Runtime(f"sqlite:///{tmp_path}/p.db", principal="p") as rt:
        RT["rt"] = rt
        result = rt.run_sync(wf, {"n": 0}, run_id="live")
        assert result.status == "canceled"
        assert result.outcome == {"Canceled": {"by": "ops", "reason": "stop now"}}
        assert result.context["n"] == 3  # the step that saw the cancel finished; no new dispatch
        assert "finished" not in result.context
        assert rt.verify("live").verified


def step_cancelled_elsewhere(n: int = 0) -> dict:
    if n == 2:  # mid-wave, another process's store (its own connection) cancels the run
        RT["other"].cancel("elsewhere", reason="stop now", by="ops")
    return {"n": n + 1}


def test_a_cancel_another_connection_journals_during_a_wave_is_seen_after_that_wave(tmp_path):
    """The poll between waves asks the database: the wave's fenced commit, made before its
    effects ran, says nothing of what another process journaled while they ran."""
    wf = (
        Workflow.new("elsewhere")
        .node("step", tool=step_cancelled_elsewhere)
        .node("finish", tool=finish)
        .edge("step", "step", when="n < 10", max_cycles=20)
        .edge("step", "finish", when="n >= 10")
    )
    url = f"sqlite:///{tmp_path}/p.db"
    with Runtime(url, principal="p") as rt, Runtime(url, principal="p") as other:
        RT["other"] = other
        result = rt.run_sync(wf, {"n": 0}, run_id="elsewhere")
        assert result.status == "canceled"
        assert result.context["n"] == 3  # no step was dispatched after the cancel
        assert "finished" not in result.context
        assert rt.verify("elsewhere").verified
