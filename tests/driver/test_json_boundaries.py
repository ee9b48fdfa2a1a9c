"""What a person or a tool hands plait must be JSON plait can store: text no UTF-8 can hold
(a lone surrogate), NaN, a key that is not a string. Each is refused with a clear error
(PLAIT-E019 naming where) before anything is journaled, never a crash of the store."""

from __future__ import annotations

import pytest

from contract.support import Cli
from plait import Runtime, Workflow
from plait.core.canonical import CanonicalJSONError, dumpb
from plait.core.errors import PlaitError
from plait.workflow.loader import load_workflow


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


BAD_VALUES = {
    "nan": ({"x": [1, float("nan")]}, "input.x[1]: nan is not valid JSON"),
    "surrogate": ({"x": "\ud800"}, "input.x: text is not valid Unicode"),
    "int key": ({"x": {1: 2}}, "input.x: key 1 is not a string"),
    "object": ({"x": object()}, "input.x: object is not a JSON type"),
}


@pytest.mark.parametrize("name", sorted(BAD_VALUES))
def test_run_refuses_an_input_that_is_not_json_and_writes_nothing(tmp_path, name):
    value, words = BAD_VALUES[name]

    def a() -> dict[str, int]:
        return {}

    wf = Workflow.new("t").node("a", tool=a)
    with Runtime(f"sqlite:///{tmp_path / 'p.db'}") as rt:
        with pytest.raises(PlaitError) as caught:
            rt.run_sync(wf, value, run_id="r1")
        assert rt.store.list_runs() == []

    assert caught.value.code == "E019" and words in str(caught.value), caught.value


@pytest.mark.parametrize("name", sorted(BAD_VALUES))
def test_an_answer_or_a_message_that_is_not_json_is_refused_and_journals_nothing(tmp_path, name):
    value, words = BAD_VALUES[name]
    (tmp_path / "wf.yaml").write_text("name: t\nnodes:\n  - {id: a, ask: {prompt: ok?}}\n")
    wf = load_workflow(tmp_path / "wf.yaml")
    with Runtime(f"sqlite:///{tmp_path / 'p.db'}") as rt:
        parked = rt.run_sync(wf, run_id="r1")
        ask_id = parked.asks[0]["ask_id"]
        before = rt.store.load_journal("r1").items()
        with pytest.raises(PlaitError) as answered:
            rt.respond("r1", ask_id, value)
        with pytest.raises(PlaitError) as sent:
            rt.send("r1", value)
        after = rt.store.load_journal("r1").items()

    assert answered.value.code == "E019"
    assert words.replace("input", "result") in str(answered.value), answered.value
    assert sent.value.code == "E019"
    assert words.replace("input", "message") in str(sent.value), sent.value
    assert after == before
