"""A drive's result names the plan its manifest pins; the hash is taken when first read
(a worker never reads it), from the manifest the drive was given."""

from __future__ import annotations

from typing import Any

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
