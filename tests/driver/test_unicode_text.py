"""Text that no UTF-8 can hold (a lone surrogate) is refused with a clear error, never a crash."""

from __future__ import annotations

import pytest

from contract.support import Cli
from plait import Runtime, Workflow
from plait.core.canonical import CanonicalJSONError, dumpb


def test_canonical_bytes_refuse_a_lone_surrogate():
    with pytest.raises(CanonicalJSONError, match="not valid Unicode"):
        dumpb({"x": "\ud800"})


def test_a_tool_returning_a_lone_surrogate_fails_its_node_and_the_run_verifies(tmp_path):
    def broken() -> dict[str, str]:
        return {"x": "\ud800"}

    wf = Workflow.new("bad-text").node("broken", tool=broken, retries=0)
    with Runtime(f"sqlite:///{tmp_path / 'p.db'}") as rt:
        result = rt.run_sync(wf, run_id="bad-text")
        report = rt.verify("bad-text", workflow=wf)

    assert result.status == "failed"
    assert result.outcome["Failed"]["node"] == "broken"
    assert "not valid Unicode" in result.outcome["Failed"]["detail"]
    assert report.verified, report.to_json()


def test_an_input_with_a_lone_surrogate_is_refused_before_anything_is_written(tmp_path):
    (tmp_path / "wf.yaml").write_text(
        "name: t\ntools:\n  echo: {command: [cat]}\nnodes:\n  - {id: a, tool: echo}\n"
    )
    cli = Cli(tmp_path)

    done = cli.run("wf.yaml", "r1", "--input", '{"x": "\\ud800"}')

    assert done.exit_code == 2, done
    error = done.data["error"]
    assert error["code"] == "PLAIT-E019" and "Unicode" in error["message"], error
    assert cli.run_ids() == []
