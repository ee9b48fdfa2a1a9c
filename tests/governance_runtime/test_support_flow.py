"""The customer-support flow of examples/support, end to end through the CLI (§9).

verify identity -> disclose the policy -> offer a refund -> commit the refund after the
customer confirmed. A scripted model that calls tools too early, twice and unconfirmed
has each bad call refused with the rule that refused it and nothing executed for it,
and still completes; the run verifies; every turn offers exactly what the flow admits
at that point. A model that follows the flow is never refused. ``plait show`` explains
a run stopped with the flow in flight; ``plait check`` reports every flow problem.

Every test works on a copy of the example in a temporary folder with its own SQLite
file; the tools append their name to ``$SUPPORT_EXECUTIONS`` each time they really run.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from inprocess import run_plait

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "support"
PLAIT = str(Path(sys.executable).parent / "plait")
NOW_MS = "1767225600000"

TOOLS = [
    "lookup_account",
    "disclose_policy",
    "offer_refund",
    "confirm_with_customer",
    "issue_refund",
]
COMMIT = ["confirm_with_customer", "issue_refund"]
AFTER_ALL_DONE = ["lookup_account", "disclose_policy", "confirm_with_customer"]
"""Every step done: nothing restricts the offer but ``once`` (offer_refund, issue_refund)."""


class Desk:
    """A copy of the example with its own store and execution log."""

    def __init__(self, folder: Path) -> None:
        shutil.copytree(EXAMPLE, folder, ignore=shutil.ignore_patterns("__pycache__"))
        self.folder = folder
        self.db = f"sqlite:///{folder / 'plait.db'}"
        self.executions = folder / "executions.log"

    def workflow(self, answers: str, extra: str = "", name: str = "run.yaml") -> Path:
        """A variant of workflow.yaml pinned to ``answers`` (plus ``extra`` YAML lines)."""
        text = (self.folder / "workflow.yaml").read_text()
        text = text.replace("model: scripted:answers.json", f"model: scripted:{answers}")
        path = self.folder / name
        path.write_text(text + extra)
        return path

    def plait(self, *args: str | Path) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "PLAIT_NOW_MS": NOW_MS, "SUPPORT_EXECUTIONS": str(self.executions)}
        env.pop("PLAIT_DB", None)
        argv = [PLAIT, *map(str, args)]
        if args[0] not in ("check", "graph"):
            argv += ["--db", self.db]
        return run_plait(argv, cwd=self.folder, env=env)  # in-process (tests/inprocess.py)

    def json(self, *args: str | Path) -> tuple[int, dict[str, Any]]:
        done = self.plait(*args, "--json")
        return done.returncode, json.loads(done.stdout)

    def executed(self) -> list[str]:
        return self.executions.read_text().split() if self.executions.exists() else []


def llm_turns(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in entries if e["kind"] == "llm"]


def refusals(entries: list[dict[str, Any]]) -> list[tuple[int, str, str]]:
    """(effect_seq of the turn, tool, reason) of every refused call, in trace order."""
    return [
        (e["effect_seq"], e["input"]["tool"], e["result"]["reason"])
        for e in entries
        if e["kind"] == "refused"
    ]


# --- a model that misbehaves --------------------------------------------------------------


@pytest.fixture(scope="module")
def misbehaving(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    desk = Desk(tmp_path_factory.mktemp("misbehaving") / "support")
    path = desk.workflow("answers_misbehaving.json")
    code, run = desk.json("run", path, "--run-id", "bad")
    _, trace = desk.json("trace", "bad")
    executed = desk.executed()
    (desk.folder / "answers_misbehaving.json").write_text("[]")  # verify never asks a model
    verify_code, verified = desk.json("verify", "bad")
    return {
        "code": code,
        "run": run,
        "entries": trace["entries"],
        "executed": executed,
        "verify": (verify_code, verified),
        "executed_after_verify": desk.executed(),
    }


def test_the_misbehaving_run_still_completes(misbehaving):
    assert misbehaving["code"] == 0, misbehaving["run"]
    assert misbehaving["run"]["status"] == "completed"
    assert misbehaving["run"]["context"] == {"resolution": "refunded", "refund_id": "R-C-42-4999"}


def test_each_bad_call_is_refused_with_the_rule_that_refused_it(misbehaving):
    turns = [e["effect_seq"] for e in llm_turns(misbehaving["entries"])]
    found = refusals(misbehaving["entries"])

    assert [(seq, tool) for seq, tool, _ in found] == [
        (turns[0], "offer_refund"),  # too early: the identity is not verified
        (turns[4], "offer_refund"),  # twice: it already succeeded
        (turns[5], "issue_refund"),  # unconfirmed
        (turns[7], "issue_refund"),  # twice in one answer: the second call
    ]
    too_early, twice, unconfirmed, same_answer = (reason for _, _, reason in found)
    assert "it is not one of the tools of the current step (`verify`)" in too_early
    assert "Available now: `lookup_account`" in too_early
    assert "it has already succeeded and may run only once" in twice
    assert "it is not allowed until `customer_confirmed` is true" in unconfirmed
    assert "it was already called earlier in this answer and may run only once" in same_answer
    for reason in (too_early, twice, unconfirmed, same_answer):
        assert "was refused and did not run" in reason
        assert "Do not tell the user it was done." in reason


def test_refused_calls_never_execute(misbehaving):
    entries = misbehaving["entries"]

    assert misbehaving["executed"] == TOOLS  # each tool ran exactly once, in flow order
    assert [e["kind"] for e in entries if e["kind"] not in ("llm", "refused")] == ["tool"] * 5
    assert all(e["status"] == "completed" for e in entries if e["kind"] == "tool")
    # a refused call makes no effect: the effect_seq of its turn is followed by the next turn
    seqs = [e["effect_seq"] for e in entries if e["kind"] != "refused"]
    assert seqs == list(range(len(seqs)))


def test_refusals_reach_the_model_as_tool_errors(misbehaving):
    turns = llm_turns(misbehaving["entries"])
    second = turns[1]["input"]["messages"]
    refused = [m for m in second if m.get("role") == "tool"]

    assert len(refused) == 1 and refused[0]["refused"] is True and refused[0]["is_error"] is True
    first_call = turns[0]["result"]["tool_calls"][0]
    assert refused[0]["tool_call_id"] == first_call["id"]


def test_each_turn_offers_what_the_flow_admits_then(misbehaving):
    turns = llm_turns(misbehaving["entries"])

    assert [t["input"]["tools"] for t in turns] == [
        ["lookup_account"],  # verify is the current step
        ["lookup_account"],  # still verify: the early offer_refund was refused
        ["disclose_policy"],  # verify done, disclose is current
        ["offer_refund"],  # disclose done, offer is current
        COMMIT,  # offer done: the commit step; issue_refund is offered while unconfirmed
        COMMIT,
        COMMIT,
        COMMIT,  # confirmed
        AFTER_ALL_DONE,  # issue_refund succeeded: commit and wrap_up are done
    ]
    postures = [t["input"].get("instructions", "") for t in turns]
    assert postures[0].startswith("Verify the customer's identity")
    assert postures[2].startswith("Tell the customer the refund policy")
    assert postures[4].startswith("Get the customer's confirmation")
    assert postures[8] == ""  # no step is active


def test_the_misbehaving_run_verifies_without_running_anything(misbehaving):
    code, report = misbehaving["verify"]

    assert code == 0 and report["verified"] is True, report
    assert misbehaving["executed_after_verify"] == misbehaving["executed"]


# --- a model that follows the flow --------------------------------------------------------


def test_a_model_that_follows_the_flow_is_never_refused(tmp_path):
    desk = Desk(tmp_path / "support")

    code, run = desk.json("run", "workflow.yaml", "--run-id", "good")
    _, trace = desk.json("trace", "good")
    verify_code, verified = desk.json("verify", "good")

    assert code == 0 and run["status"] == "completed"
    assert run["context"] == {"resolution": "refunded", "refund_id": "R-C-42-4999"}
    assert refusals(trace["entries"]) == []
    assert desk.executed() == TOOLS
    assert [t["input"]["tools"] for t in llm_turns(trace["entries"])] == [
        ["lookup_account"],
        ["disclose_policy"],
        ["offer_refund"],
        COMMIT,
        COMMIT,
        AFTER_ALL_DONE,
    ]
    assert verify_code == 0 and verified["verified"] is True


def test_the_shipped_example_runs_the_misbehaving_script_with_model_override(tmp_path):
    desk = Desk(tmp_path / "support")

    code, run = desk.json(
        "run", "workflow.yaml", "--model", "scripted:answers_misbehaving.json", "--run-id", "m"
    )
    verify_code, report = desk.json("verify", "m")

    assert code == 0 and run["status"] == "completed"
    assert desk.executed() == TOOLS
    assert verify_code == 0 and report["verified"] is True, report


# --- show: a run stopped with the flow in flight ------------------------------------------


def test_show_explains_a_flow_left_in_flight_by_a_budget(tmp_path):
    desk = Desk(tmp_path / "support")
    # Each turn reserves 100 tokens; the fifth turn spends past 1200: the sixth is refused.
    budgeted = desk.workflow("answers_misbehaving.json", "budgets: {max_tokens: 1200}\n")
    text = budgeted.read_text().replace(
        "  model: scripted:", "  max_tokens: 100\n  model: scripted:"
    )
    budgeted.write_text(text)

    code, run = desk.json("run", budgeted, "--run-id", "b")
    show_code, shown = desk.json("show", "b")
    human = desk.plait("show", "b")

    assert code == 1 and run["status"] == "budget_exhausted"
    assert show_code == 1 and shown["outcome"] == {"kind": "budget_exhausted", "axis": "tokens"}
    assert shown["governance"] == {
        "agent": {
            "mode": "enforce",
            "active": ["commit"],
            "done": ["verify", "disclose", "offer"],
            "waiting_for": {"commit": "`issue_refund` has succeeded at least once"},
            "allowed": ["confirm_with_customer"],
            "offered": COMMIT,
            "blocked": {
                "lookup_account": "it is not one of the tools of the current step (`commit`)",
                "disclose_policy": "it is not one of the tools of the current step (`commit`)",
                "offer_refund": "it has already succeeded and may run only once",
                "issue_refund": "it is not allowed until `customer_confirmed` is true",
            },
            "missing_required": ["commit"],
            "postures": ["Get the customer's confirmation, then issue the refund exactly once."],
            "refused": 2,
        }
    }
    assert "governance of node 'agent':" in human.stderr
    assert "active steps: commit" in human.stderr
    assert "blocked: issue_refund: it is not allowed until `customer_confirmed` is true" in (
        human.stderr
    )

    # Raising the ceiling continues at exactly that turn; the finished run shows no flow.
    assert desk.plait("raise-budget", "b", "tokens=100000").returncode == 0
    code, resumed = desk.json("resume", "b")
    assert code == 0 and resumed["status"] == "completed"
    assert desk.executed() == TOOLS
    _, shown = desk.json("show", "b")
    assert "governance" not in shown
    verify_code, verified = desk.json("verify", "b")
    assert verify_code == 0 and verified["verified"] is True, verified


def test_show_of_a_run_without_a_flow_has_no_governance(misbehaving):
    assert "governance" not in misbehaving["run"]


# --- check and graph ----------------------------------------------------------------------

BROKEN = """\
name: broken-desk
nodes:
  - id: agent
    instruction: Help.
    tools: [lookup_account, issue_refund]
    flow:
      steps:
        - id: verify
          allow: [lookup_acount]
          done: {called_ok: lookup_account}
        - id: offer
          after: [verify]
          allow: [issue_refund, close_account]
          done: {called_ok: issue_refund}
        - id: wrap_up
          after: [verfy]
          terminal: true
      constraints:
        - {before: [offer, verify]}
      confirm_tools: [issue_refund]
tools:
  lookup_account: {python: "tools:lookup_account"}
  issue_refund: {python: "tools:issue_refund"}
llm: {model: "scripted:answers.json"}
"""


def test_check_prints_every_flow_problem_one_per_line_and_exits_2(tmp_path):
    desk = Desk(tmp_path / "support")
    (desk.folder / "broken.yaml").write_text(BROKEN)

    done = desk.plait("check", "broken.yaml")

    assert done.returncode == 2 and done.stdout == ""
    lines = done.stderr.splitlines()
    assert all(line.startswith("broken.yaml:6: PLAIT-E027 node 'agent': flow: ") for line in lines)
    messages = [line.split("flow: ", 1)[1] for line in lines]
    assert len(messages) == 5, lines
    assert messages[4].startswith("step 'offer' allow names unknown tool 'close_account'")
    assert messages[:4] == [
        "step 'wrap_up' comes after unknown step 'verfy' (did you mean 'verify'?)",
        "ordering cycle across 'after' and 'before': verify -> offer -> verify"
        " (no step on it can start)",
        "commit tool 'issue_refund' has no never('issue_refund').until(...) guard",
        "step 'verify' allow names unknown tool 'lookup_acount' (did you mean 'lookup_account'?)",
    ], lines

    code, body = desk.json("check", "broken.yaml")
    assert code == 2
    problems = body["error"]["problems"]
    assert [p["code"] for p in problems] == ["PLAIT-E027"] * 5
    assert {p["line"] for p in problems} == {6}


def test_check_reports_every_shape_problem_of_a_flow_file(tmp_path):
    desk = Desk(tmp_path / "support")
    (desk.folder / "flows" / "support.yaml").write_text(
        "steps:\n"
        "  - id: verify\n"
        "    alow: [lookup_account]\n"
        "    done: {called: lookup_account}\n"
        "constraints:\n"
        "  - {once: 3}\n"
    )

    done = desk.plait("check", "workflow.yaml")

    assert done.returncode == 2
    lines = done.stderr.splitlines()
    assert len(lines) == 3, lines
    for line in lines:
        assert line.startswith("workflow.yaml:14: PLAIT-E027 node 'agent': flow: "), line
    assert "unknown key 'alow' (did you mean 'allow'?)" in lines[0]


def test_check_warns_of_keys_nothing_writes_and_exits_0(tmp_path):
    desk = Desk(tmp_path / "support")
    flow = desk.folder / "flows" / "support.yaml"
    flow.write_text(flow.read_text().replace("is_true: customer_confirmed", "is_true: confirmed"))

    done = desk.plait("check", "workflow.yaml")
    code, body = desk.json("check", "workflow.yaml")

    assert done.returncode == 0
    warning = (
        "workflow.yaml:14: PLAIT-E027 warning: node 'agent': flow: never('issue_refund').until"
        " reads key 'confirmed', which no node, tool or ask declares it writes"
        " (did you mean 'customer_confirmed'?) (flow file 'flows/support.yaml')"
    )
    assert done.stderr.splitlines()[0] == warning
    assert "is valid" in done.stderr and "1 warning" in done.stderr
    assert code == 0 and body["ok"] is True
    assert body["warnings"] == [
        {"code": "PLAIT-E027", "message": warning.split("warning: ", 1)[1], "line": 14}
    ]


def test_check_of_the_example_is_clean(tmp_path):
    desk = Desk(tmp_path / "support")

    code, body = desk.json("check", "workflow.yaml")

    assert code == 0 and "warnings" not in body


def test_graph_draws_the_flow_after_the_workflow(tmp_path):
    desk = Desk(tmp_path / "support")

    done = desk.plait("graph", "workflow.yaml")
    code, body = desk.json("graph", "workflow.yaml")

    assert done.returncode == 0 and code == 0
    assert body["mermaid"].startswith("flowchart TD\n")
    chart = body["flows"]["agent"]
    assert chart.startswith("flowchart TD\n")
    assert '    s0["verify"]' in chart and '    s4(["wrap_up"])' in chart
    assert "    s0 --> s1" in chart and "    s3 --> s4" in chart
    assert "never: issue_refund until" in chart
    assert done.stdout == body["mermaid"] + "\n%% flow of node 'agent'\n" + chart
