"""What a Python tool gets and gives: its own copy of its arguments, and a result whose
canonical size (what the storage budget charges) is measured once, when it is checked."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from plait import Runtime, Workflow
from plait.core.canonical import dumpb
from plait.core.outcomes import Completed, journal_bytes
from plait.driver.effects import as_json_result


def test_a_checked_result_carries_its_canonical_byte_size() -> None:
    value = {"b": ("é", 1.5), "a": {"ü": None}}  # a tuple, non-ASCII text, unsorted keys

    outcome = as_json_result(value)

    assert isinstance(outcome, Completed)
    assert outcome.result == {"a": {"ü": None}, "b": ["é", 1.5]}
    assert outcome.size == len(dumpb(outcome.result))  # bytes, not characters
    assert journal_bytes(outcome) == journal_bytes(Completed(outcome.result))
    assert outcome == Completed(outcome.result)  # the size is not part of the value


def test_a_tool_mutating_its_arguments_leaves_the_run_untouched(tmp_path: Path) -> None:
    def touch(items: Any, meta: Any, count: int) -> dict[str, Any]:  # Any: passed as is
        items.append("added by the tool")
        meta["seen"] = True
        return {"lengths": [len(items), len(meta), count]}

    workflow = Workflow.new("touch").node("touch", tool=touch)
    with Runtime(f"sqlite:///{tmp_path / 'p.db'}", principal="t") as rt:
        result = rt.run_sync(workflow, {"items": ["a"], "meta": {}, "count": 3})
        report = rt.verify(result.run_id, workflow=workflow)

    assert result.status == "completed"
    assert result.context["items"] == ["a"] and result.context["meta"] == {}
    assert result.context["lengths"] == [2, 1, 3]
    assert report.verified


def test_a_tool_calling_sys_exit_fails_its_node_and_the_driver_carries_on(
    tmp_path: Path,
) -> None:
    def quit_now() -> dict[str, Any]:
        sys.exit(3)

    def spawn() -> dict[str, Any]:  # two effects in one wave: the tools run on the pool
        return {}

    alone = Workflow.new("alone").node("quit", tool=quit_now)
    pooled = (
        Workflow.new("pooled")
        .node("spawn", tool=spawn)
        .node("quit", tool=quit_now)
        .node("other", tool=spawn)
        .edge("spawn", "quit")
        .edge("spawn", "other")
    )
    with Runtime(f"sqlite:///{tmp_path / 'p.db'}", principal="t") as rt:
        results = [rt.run_sync(alone, {}), rt.run_sync(pooled, {})]
        shown = [rt.show(r.run_id).status for r in results]

    for result in results:
        assert result.status == "failed"
        assert result.outcome is not None
        assert "SystemExit: 3" in str(result.outcome)
    assert shown == ["failed", "failed"]
