"""C1, the tool offer (docs/decide.md): narrowed before the first turn by a journaled
``decide`` effect, widened once by ``more_tools``, replayed by verify with no backend."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from decide.support import of_kind, plait, run, scores, trace, verify, workflow

REFUND = [
    {"tool_calls": [{"name": "issue_refund", "arguments": {"order_id": "A-1"}}]},
    {"text": "refunded"},
]


def test_the_offer_keeps_the_top_k_above_min_p_and_every_turn_carries_it(tmp_path: Path):
    folder = tmp_path / "w"
    folder.mkdir()
    backend = scores(folder, scores={"issue_refund": 0.9, "lookup_order": 0.6}, default=0.1)
    workflow(folder, REFUND, {"backend": backend, "offer": {"max_tools": 3, "min_p": 0.5}})
    done = run(folder)
    assert done.returncode == 0, done.stdout + done.stderr
    entries = trace(folder)
    (decision,) = of_kind(entries, "decide")
    assert decision["effect_seq"] == 0
    assert [i["id"] for i in decision["input"]["items"]] == [
        "lookup_order", "issue_refund", "restart_service", "list_files"
    ]  # fmt: skip
    assert decision["result"]["p"] == [0.6, 0.9, 0.1, 0.1]
    turns = of_kind(entries, "llm")
    assert len(turns) == 2
    for turn in turns:  # in the pinned order; more_tools while the offer is narrowed
        assert turn["input"]["tools"] == ["lookup_order", "issue_refund", "more_tools"]
        offer = turn["input"]["offer"]
        assert offer["tools"] == ["lookup_order", "issue_refund"]
        assert offer["seq"] == 0 and offer["calibrated"] is False
        assert offer["provider"] == "scripted" and isinstance(offer["latency_ms"], int)
    table = plait(folder, "trace", "r", "--db", f"sqlite:///{folder}/plait.db", COLUMNS="200")
    assert "scores 4 tools (offer)" in table.stderr  # the text trace says what was asked
    # verify replays the decision from the journal: the backend's file is gone.
    (folder / "decide.json").unlink()
    checked = verify(folder)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_more_tools_widens_the_offer_once(tmp_path: Path):
    folder = tmp_path / "w"
    folder.mkdir()
    backend = scores(folder, scores={"lookup_order": 0.9}, default=0.0)
    answers = [
        {"tool_calls": [{"name": "more_tools", "arguments": {}}]},
        {"tool_calls": [{"name": "issue_refund", "arguments": {"order_id": "A-1"}}]},
        {"text": "refunded"},
    ]
    workflow(folder, answers, {"backend": backend, "offer": {"max_tools": 1}})
    done = run(folder)
    assert done.returncode == 0, done.stdout + done.stderr
    turns = of_kind(trace(folder), "llm")
    assert turns[0]["input"]["tools"] == ["lookup_order", "more_tools"]
    assert turns[1]["input"]["tools"] == [
        "lookup_order", "issue_refund", "restart_service", "list_files"
    ]  # fmt: skip
    assert turns[1]["input"]["offer"]["widened"] is True
    answer = turns[1]["input"]["messages"][3]  # after the system, user and assistant entries
    assert answer["role"] == "tool" and "every tool" in answer["content"]
    assert json.loads(done.stdout)["context"] == {"agent": "refunded"}


def test_a_failed_decision_offers_every_tool(tmp_path: Path):
    folder = tmp_path / "w"
    folder.mkdir()
    backend = scores(folder, fail="backend down")
    workflow(folder, REFUND, {"backend": backend, "offer": {"max_tools": 1}})
    done = run(folder)
    assert done.returncode == 0, done.stdout + done.stderr
    entries = trace(folder)
    assert of_kind(entries, "decide")[0]["failure"]["detail"].endswith("backend down")
    first = of_kind(entries, "llm")[0]["input"]
    assert first["tools"] == ["lookup_order", "issue_refund", "restart_service", "list_files"]
    assert first["offer"]["failed"].endswith("backend down")


def test_without_llm_decide_no_decision_is_asked_and_turns_carry_no_offer(tmp_path: Path):
    folder = tmp_path / "w"
    workflow(folder, REFUND, {})
    wf = (folder / "workflow.yaml").read_text().replace("  decide: {}\n", "")
    (folder / "workflow.yaml").write_text(wf)
    assert run(folder).returncode == 0
    entries = trace(folder)
    assert not of_kind(entries, "decide")
    assert all("offer" not in t["input"] for t in of_kind(entries, "llm"))
    assert "more_tools" not in of_kind(entries, "llm")[0]["input"]["tools"]


def test_plait_check_refuses_a_backend_that_is_not_there(tmp_path: Path):
    folder = tmp_path / "w"
    workflow(folder, REFUND, {"backend": "scripted:missing.json"})
    checked = plait(folder, "check", "workflow.yaml", "--json")
    assert checked.returncode != 0
    assert "PLAIT-E037" in checked.stdout + checked.stderr
    assert "missing.json" in checked.stdout + checked.stderr


def test_a_resume_without_the_backend_is_refused_with_e037(tmp_path: Path):
    folder = tmp_path / "w"
    folder.mkdir()
    backend = scores(folder, scores={"issue_refund": 0.9})
    workflow(folder, REFUND, {"backend": backend, "offer": {"max_tools": 2}})
    db = f"sqlite:///{folder}/plait.db"
    queued = plait(folder, "run", "workflow.yaml", "--db", db, "--run-id", "r", "--detach")
    assert "queued" in queued.stdout + queued.stderr  # exit 3: not finished (CONTRACT.md)
    (folder / "decide.json").unlink()
    resumed = plait(folder, "resume", "r", "--db", db, "--json")
    assert resumed.returncode != 0
    assert "PLAIT-E037" in resumed.stdout + resumed.stderr
    scores(folder, scores={"issue_refund": 0.9})  # back: the run was left intact
    resumed = plait(folder, "resume", "r", "--db", db, "--json")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr


def test_an_agent_takes_decide_as_the_workflow_file_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    from plait import Agent

    monkeypatch.chdir(tmp_path)
    (tmp_path / "answers.json").write_text(json.dumps([*REFUND[:1], {"text": "ok"}]))
    backend = scores(tmp_path, scores={"issue_refund": 0.9})
    agent = Agent(
        "scripted:answers.json",
        instructions="Refund the order.",
        decide={"backend": backend, "offer": {"max_tools": 1}},
        db=f"sqlite:///{tmp_path}/plait.db",
    )

    @agent.tool
    def issue_refund(order_id: str) -> dict:
        """Refund a payment of an order to the customer."""
        return {"refunded": order_id}

    @agent.tool
    def restart_service(service: str) -> dict:
        """Restart a service."""
        return {"restarted": service}

    state = agent.run_sync("refund A-1")
    assert state.output == "ok"
    entries = trace(tmp_path, state.run_id)
    assert len(of_kind(entries, "decide")) == 1
    assert of_kind(entries, "llm")[0]["input"]["tools"] == ["issue_refund", "more_tools"]
