"""C2, decision-guided folding, and the governed tools a narrowed offer always keeps."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from decide.support import of_kind, run, scores, trace, verify, workflow

LOOKUPS = [  # the third turn's prompt tokens reach the ceiling (100): a fold is due
    {"tool_calls": [{"name": "lookup", "arguments": {"q": "a"}}],
     "usage": {"input_tokens": 10, "output_tokens": 1}},
    {"tool_calls": [{"name": "lookup", "arguments": {"q": "b"}}],
     "usage": {"input_tokens": 20, "output_tokens": 1}},
    {"tool_calls": [{"name": "lookup", "arguments": {"q": "c"}}],
     "usage": {"input_tokens": 200, "output_tokens": 1}},
]  # fmt: skip


def fold_workflow(folder: Path, answers: list[dict], calibrated: bool) -> None:
    folder.mkdir(parents=True)
    decide = {"backend": scores(folder, default=0.0), "fold": True}
    if calibrated:
        (folder / "calibration.json").write_text(json.dumps({"threshold": 0.5}))
        decide["calibration"] = "calibration.json"
    workflow(folder, answers, decide, tools=["lookup"], context_tokens=100)


def test_an_uncalibrated_backend_never_omits_the_summarizer_folds(tmp_path: Path):
    folder = tmp_path / "w"
    fold_workflow(folder, [*LOOKUPS, {"text": "summary"}, {"text": "done"}], calibrated=False)
    done = run(folder)
    assert done.returncode == 0, done.stdout + done.stderr
    entries = trace(folder)
    assert not of_kind(entries, "decide")  # it is not even asked
    turns = of_kind(entries, "llm")
    assert turns[3]["input"]["fold"] == [2, 6]  # after the system and user entries
    assert json.loads(done.stdout)["folds"] == 1


def test_a_calibrated_backend_omits_whole_tool_pairs_before_any_summary(tmp_path: Path):
    folder = tmp_path / "w"
    fold_workflow(folder, [*LOOKUPS, {"text": "done"}], calibrated=True)
    done = run(folder)
    assert done.returncode == 0, done.stdout + done.stderr
    entries = trace(folder)
    (decision,) = of_kind(entries, "decide")
    assert decision["input"]["purpose"] == "fold"
    assert [i["id"] for i in decision["input"]["items"]] == ["2-4", "4-6"]
    last = of_kind(entries, "llm")[-1]["input"]
    assert "fold" not in last
    roles = [m["role"] for m in last["messages"]]
    assert roles == ["system", "user", "assistant", "tool"]  # the older pairs are gone, whole
    assert last["messages"][2]["tool_calls"][0]["arguments"] == {"q": "c"}
    assert json.loads(done.stdout)["folds"] == 0
    (folder / "decide.json").unlink()
    checked = verify(folder)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_still_too_long_after_the_omission_the_summarizer_folds(tmp_path: Path):
    folder = tmp_path / "w"
    answers = [
        *LOOKUPS,
        {"tool_calls": [{"name": "lookup", "arguments": {"q": "d"}}],
         "usage": {"input_tokens": 300, "output_tokens": 1}},
        {"text": "summary"},
        {"text": "done"},
    ]  # fmt: skip
    fold_workflow(folder, answers, calibrated=True)
    done = run(folder)
    assert done.returncode == 0, done.stdout + done.stderr
    entries = trace(folder)
    assert len(of_kind(entries, "decide")) == 1  # asked once for the over-long window
    assert "fold" in of_kind(entries, "llm")[-2]["input"]
    assert json.loads(done.stdout)["folds"] == 1


def test_tools_the_governed_step_needs_are_never_narrowed_away(tmp_path: Path):
    folder = tmp_path / "w"
    folder.mkdir()
    backend = scores(folder, scores={"restart_service": 0.9}, default=0.0)
    answers = [
        {"tool_calls": [{"name": "lookup_order", "arguments": {"order_id": "A-1"}}]},
        {"tool_calls": [{"name": "issue_refund", "arguments": {"order_id": "A-1"}}]},
        {"text": "refunded"},
    ]
    path = workflow(folder, answers, {"backend": backend, "offer": {"max_tools": 1}})
    flow = {
        "mode": "enforce",
        "steps": [
            {"id": "check", "allow": ["lookup_order"], "done": {"called_ok": "lookup_order"}},
            {
                "id": "refund",
                "after": ["check"],
                "allow": ["issue_refund"],
                "done": {"called_ok": "issue_refund"},
            },
            {"id": "wrap_up", "after": ["refund"], "terminal": True},
        ],
    }
    (folder / "flow.yaml").write_text(yaml.safe_dump(flow))
    wf = yaml.safe_load(path.read_text())
    wf["nodes"][0]["flow"] = "flow.yaml"
    path.write_text(yaml.safe_dump(wf, sort_keys=False))
    done = run(folder)
    assert done.returncode == 0, done.stdout + done.stderr
    turns = of_kind(trace(folder), "llm")
    # scored 0 and beyond K, each step's tool is offered while its step is active
    assert turns[0]["input"]["offer"]["tools"] == ["lookup_order", "restart_service"]
    assert turns[0]["input"]["tools"] == ["lookup_order"]  # governance allows it alone
    assert turns[1]["input"]["tools"] == ["issue_refund"]
