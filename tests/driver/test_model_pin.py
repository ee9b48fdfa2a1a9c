"""A run is driven on with the model it pinned at start (PLAIT-E025 otherwise)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from plait import PlaitError, Runtime, Workflow
from plait.models.registry import model_from_spec


def test_resuming_with_another_model_is_e025_and_with_the_pinned_one_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # a workflow built in Python reads its files from here

    def pay(amount: int) -> dict[str, Any]:
        return {"paid": amount}

    call = {"name": "pay", "arguments": {"amount": 5}}
    for name in ("a.json", "b.json"):
        (tmp_path / name).write_text(json.dumps([{"tool_calls": [call]}, {"text": "done"}]))
    workflow = (
        Workflow.new("pay")
        .tool(pay, approval=True)
        .node("agent", instruction="Pay.", tools=["pay"])
        .model("scripted:a.json")
    )
    pinned = model_from_spec("scripted:a.json", base_dir=tmp_path)
    other = model_from_spec("scripted:b.json", base_dir=tmp_path)
    db = f"sqlite:///{tmp_path / 'p.db'}"
    with Runtime(db, model=pinned, principal="alice") as rt:
        parked = rt.run_sync(workflow, run_id="r")
        rt.respond("r", parked.asks[0]["ask_id"], approve=True, by="bob")

    with Runtime(db, model=other, principal="alice") as rt, pytest.raises(PlaitError) as caught:
        rt.resume_sync("r", workflow=workflow)
    with Runtime(db, model=pinned, principal="alice") as rt:
        done = rt.resume_sync("r", workflow=workflow)

    assert caught.value.code == "E025"
    assert "scripted:a.json" in str(caught.value) and "scripted:b.json" in str(caught.value)
    assert parked.status == "parked" and done.status == "completed"
