"""A drive's result names the plan its manifest pins; the hash is taken when first read
(a worker never reads it), from the manifest the drive was given. A blocking run hands
it back without formatting it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from plait import Runtime, Workflow
from plait.driver.run_result import RunResult
from plait.workflow.plan_hash import plan_hash

WORKFLOW: dict[str, Any] = {"name": "wf", "nodes": [{"id": "a"}], "description": "for people"}


def result() -> RunResult:
    return RunResult("r1", "completed", "Completed", {}, {})


def test_the_plan_hash_is_the_pinned_workflows_by_meaning() -> None:
    versioned = result().on_version({"workflow": WORKFLOW, "migrated_from": ["sha256:old"]})
    assert versioned.plan_hash == plan_hash(WORKFLOW)
    assert versioned.to_json()["plan_hash"] == plan_hash({**WORKFLOW, "description": "other"})
    assert versioned.migrated_from == ["sha256:old"]


def test_a_result_without_a_version_has_no_plan_hash() -> None:
    assert result().plan_hash is None
    assert "plan_hash" not in result().to_json()


def test_a_plan_hash_set_wins_over_the_manifest() -> None:
    versioned = result().on_version({"workflow": WORKFLOW})
    versioned.plan_hash = "sha256:given"
    assert versioned.plan_hash == "sha256:given"


def test_results_on_other_versions_are_not_equal() -> None:
    newer = {**WORKFLOW, "nodes": [{"id": "b"}]}
    assert result().on_version({"workflow": WORKFLOW}) == result().on_version(
        {"workflow": dict(WORKFLOW)}
    )
    assert result().on_version({"workflow": WORKFLOW}) != result().on_version({"workflow": newer})
    assert result().on_version({"workflow": WORKFLOW}) != result()


def test_a_blocking_run_never_formats_its_result(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``run_sync`` hands the result back without asyncio's runner formatting it on its
    way out (which it does for its main task's result: a whole context, megabytes for a
    long run, built and dropped)."""
    formatted: list[str] = []
    plain_repr = RunResult.__repr__

    def counting(self: RunResult) -> str:
        formatted.append(self.run_id)
        return plain_repr(self)

    monkeypatch.setattr(RunResult, "__repr__", counting)

    def finish() -> dict[str, Any]:
        return {"done": True}

    workflow = Workflow.new("one").node("a", tool=finish)
    with Runtime(f"sqlite:///{tmp_path / 'r.db'}") as rt:
        assert rt.run_sync(workflow).status == "completed"
    assert formatted == []
