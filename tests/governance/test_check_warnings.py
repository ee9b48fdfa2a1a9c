"""Load-time warnings of governed flows and how ``plait check`` reports them (§8, §9).

An approval-required tool's answer (``approved``, ``by``, ``reason``) lands in the flow
state, so a guard reading those keys is not "unwritten". A never-until (or commit) guard
of that very tool that cannot hold without its own approval's answer never holds: the
approval is asked only once the guard admitted a call. ``plait check`` reports warnings
together with errors: a file with both exits 2 and prints every line.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from plait.cli import app
from plait.governance import (
    Flow,
    all_of,
    any_of,
    called_ok,
    eq,
    is_set,
    is_true,
    not_,
    self_approving_guards,
)

APPROVAL = {"issue_refund": ["approved", "by", "reason"]}


def committed(until) -> Flow:
    builder = Flow.new().step("pay", allow=["issue_refund"], done=called_ok("issue_refund"))
    return builder.commit("issue_refund", until=until).build()


@pytest.mark.parametrize(
    "until",
    [
        is_true("approved"),
        eq("by", "bob"),
        all_of(called_ok("lookup"), is_set("approved")),
        any_of(is_true("approved"), is_set("reason")),
        not_(not_(is_true("approved"))),
    ],
)
def test_a_commit_guard_that_needs_its_own_approval_never_holds(until):
    (warning,) = self_approving_guards(committed(until), APPROVAL)

    assert warning.code == "E027"
    assert warning.message.startswith("never('issue_refund').until reads '")
    assert warning.message.endswith(
        "which only the approval of 'issue_refund' itself writes, and that approval is asked"
        " only after the guard admitted a call: it never holds (unless the node's input sets it)"
    )


@pytest.mark.parametrize(
    "until",
    [
        is_true("customer_confirmed"),  # another key
        any_of(is_true("approved"), is_true("customer_confirmed")),  # may hold without it
        not_(is_set("approved")),  # holds while it is absent
    ],
)
def test_a_commit_guard_that_can_hold_without_its_own_approval_is_fine(until):
    assert self_approving_guards(committed(until), APPROVAL) == []


def test_observe_mode_and_tools_without_approval_are_not_warned_about():
    observed = Flow.new("observe").commit("issue_refund", until=is_true("approved")).build()

    assert self_approving_guards(observed, APPROVAL) == []
    assert self_approving_guards(committed(is_true("approved")), {}) == []


# --- through plait check ------------------------------------------------------------------

runner = CliRunner()

DESK = """\
name: desk
nodes:
  - id: agent
    instruction: Refund.
    tools: [{tools}]
    flow:
      steps:
        - id: pay
          allow: [issue_refund]
          done: {{called_ok: issue_refund}}
      commit:
        - {{tool: issue_refund, until: {until}}}
tools:
  issue_refund: {{python: "desk_tools:issue_refund", approval: true}}
  other_refund: {{python: "desk_tools:issue_refund", approval: true}}
llm: {{model: "scripted:answers.json"}}
"""


def desk(tmp_path: Path, until: str, tools: str = "issue_refund", extra: str = "") -> Path:
    (tmp_path / "desk_tools.py").write_text(
        "def issue_refund(amount: int) -> dict:\n    return {}\n"
    )
    (tmp_path / "answers.json").write_text("[]")
    path = tmp_path / "desk.yaml"
    path.write_text(DESK.format(tools=tools, until=until) + extra)
    return path


def check(path: Path, *options: str):
    return runner.invoke(app, ["check", str(path), *options])


SELF_APPROVING = (
    "PLAIT-E027 warning: node 'agent': flow: never('issue_refund').until reads 'approved',"
    " which only the approval of 'issue_refund' itself writes"
)


def test_check_warns_of_a_commit_guard_waiting_for_its_own_approval(tmp_path):
    path = desk(tmp_path, "{is_true: approved}")

    done = check(path)

    assert done.exit_code == 0
    (line,) = [line for line in done.stderr.splitlines() if "warning:" in line]
    assert line.startswith(f"{path}:6: {SELF_APPROVING}")
    assert "no node, tool or ask declares" not in done.stderr  # an approval declares it


def test_check_does_not_warn_when_another_approval_of_the_node_writes_the_key(tmp_path):
    path = desk(tmp_path, "{is_true: approved}", tools="issue_refund, other_refund")

    done = check(path)

    assert done.exit_code == 0 and "warning" not in done.stderr


def test_check_prints_warnings_together_with_errors_and_exits_2(tmp_path):
    path = desk(tmp_path, "{is_true: approved}", extra="durability: fast\n")

    done = check(path)
    as_json = check(path, "--json")

    assert done.exit_code == 2
    lines = done.stderr.splitlines()
    assert len(lines) == 2, lines
    assert lines[0].startswith(f"{path}:") and "PLAIT-E019 durability must be" in lines[0]
    assert lines[1].startswith(f"{path}:6: {SELF_APPROVING}")
    assert as_json.exit_code == 2
    error = json.loads(as_json.stdout)["error"]
    assert error["code"] == "PLAIT-E019"  # the first problem is the first error
    assert [p["code"] for p in error["problems"]] == ["PLAIT-E019"]
    assert [w["code"] for w in error["warnings"]] == ["PLAIT-E027"]
    assert error["warnings"][0]["message"].startswith("node 'agent': flow: never(")
    assert error["warnings"][0]["line"] == 6


def test_a_problem_of_a_flow_in_its_own_file_names_that_file(tmp_path):
    example = Path(__file__).resolve().parents[2] / "examples" / "support"
    shutil.copytree(example, tmp_path / "support")
    flow = tmp_path / "support" / "flows" / "support.yaml"
    flow.write_text(flow.read_text().replace("after: [verify]", "after: [verfy]", 1))

    done = check(tmp_path / "support" / "workflow.yaml")

    assert done.exit_code == 2
    (line,) = done.stderr.splitlines()
    assert "PLAIT-E027 node 'agent': flow: step 'disclose' comes after unknown step 'verfy'" in line
    assert line.endswith("(flow file 'flows/support.yaml')")


def test_check_passes_up_the_warnings_of_a_child_file_at_the_node_including_it(tmp_path):
    (tmp_path / "child").mkdir()
    desk(tmp_path / "child", "{is_true: approved}")
    parent = tmp_path / "parent.yaml"
    parent.write_text("name: parent\nnodes:\n  - {id: refunds, workflow: child/desk.yaml}\n")

    done = check(parent)
    as_json = check(parent, "--json")

    assert done.exit_code == 0
    (line,) = [line for line in done.stderr.splitlines() if "warning:" in line]
    assert line.startswith(f"{parent}:3: PLAIT-E027 warning: node 'refunds': workflow file")
    assert "child/desk.yaml' line 6: node 'agent': flow: never('issue_refund')" in line
    assert [w["line"] for w in json.loads(as_json.stdout)["warnings"]] == [3]
