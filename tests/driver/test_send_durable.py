"""Send fan-out on a durable run: journaled, resumable, verifiable (§3.8, §5.5)."""

from __future__ import annotations

from plait import Runtime, Workflow


def seed(count: int) -> dict:
    return {"$send": [{"node": "square", "input": {"x": i}} for i in range(count)]}


def square(x: int) -> dict:
    return {"squares": x * x}


def collect(squares: list) -> dict:
    return {"sum": sum(squares)}


def fanout() -> Workflow:
    return (
        Workflow.new("fanout")
        .node("seed", tool=seed)
        .node("square", tool=square)
        .node("collect", tool=collect)
        .edge("seed", "square")
        .edge("square", "collect")
        .reducer("squares", "append")
    )


def test_a_durable_fan_out_joins_and_verifies(tmp_path):
    with Runtime(f"sqlite:///{tmp_path}/p.db", principal="p") as rt:
        result = rt.run_sync(fanout(), {"count": 50}, run_id="fan")
        assert result.status == "completed"
        assert result.context["sum"] == sum(i * i for i in range(50))
        assert result.context["squares"][:4] == [0, 1, 4, 9]
        entries = rt.trace("fan")
        assert [e["task_path"] for e in entries[1:4]] == ["/000000", "/000001", "/000002"]
        # The journal keeps the spawner's result whole, $send included.
        assert len(entries[0]["result"]["$send"]) == 50
        report = rt.verify("fan")
        assert report.verified and report.up_to == "terminal"
