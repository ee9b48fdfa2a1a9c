"""`plait check` and `plait graph`: the lines, JSON objects and exit codes of CONTRACT.md."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from plait.cli import app
from plait.cli.output import error_object, exit_code
from plait.core.errors import PlaitError, Problem

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "workflows"
REFUND = FIXTURES / "refund" / "refund-desk.yaml"
BAD = FIXTURES / "bad"
EXPECTED = {k: v for k, v in json.loads((BAD / "expected.json").read_text()).items() if k[0] != "_"}

runner = CliRunner()


@pytest.fixture(autouse=True)
def mcp_servers_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """``check`` asks the refund desk's MCP server (``mcp-server-time``, installed in this
    environment) what it offers, as a run's start does (issue #18)."""
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}")


def plait(*args: str):
    return runner.invoke(app, [str(a) for a in args])


# -- check ---------------------------------------------------------------------


def test_check_of_a_good_file_exits_0_with_a_summary():
    result = plait("check", REFUND)

    assert result.exit_code == 0
    assert result.stdout == ""  # not a terminal: human words go to stderr
    assert "refund-desk" in result.stderr and "8 nodes, 10 edges, 7 tools" in result.stderr


@pytest.mark.parametrize("name", ["minimal.yaml", "minimal.json"])
def test_check_accepts_yaml_and_json_files(name):
    result = plait("check", FIXTURES / name, "--json")

    assert result.exit_code == 0 and json.loads(result.stdout)["ok"] is True


def test_check_json_stays_one_object_when_a_tool_module_prints_on_import(tmp_path):
    (tmp_path / "plait_noisy_tools.py").write_text("print('hello')\ndef t(x): return {}\n")
    path = tmp_path / "wf.yaml"
    path.write_text(
        "name: n\nnodes: [{id: a, tool: t}]\ntools: {t: {python: 'plait_noisy_tools:t'}}\n"
    )

    result = plait("check", path, "--json")

    assert result.exit_code == 0
    assert json.loads(result.stdout)["workflow"] == "n"


def test_check_json_of_a_good_file_is_one_object():
    result = plait("check", REFUND, "--json")

    assert result.exit_code == 0
    summary = json.loads(result.stdout)
    assert summary.pop("plan_hash").startswith("sha256:")  # the plan by meaning (issue #16)
    assert summary == {
        "ok": True,
        "workflow": "refund-desk",
        "nodes": 8,
        "edges": 10,
        "tools": 7,
    }


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_check_prints_one_file_line_per_problem_and_exits_2(name):
    path = BAD / name

    result = plait("check", path)

    assert result.exit_code == 2
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == len(EXPECTED[name]), lines
    for got, want in zip(lines, EXPECTED[name], strict=True):
        assert got.startswith(f"{path}:{want}"), (got, want)


def test_check_json_error_carries_the_first_problem_and_all_problems():
    path = BAD / "many_problems.yaml"

    result = plait("check", path, "--json")

    assert result.exit_code == 2
    error = json.loads(result.stdout)["error"]
    assert error["code"] == "PLAIT-E019"
    assert error["message"] == "durability must be 'normal' or 'strict', got \"fast\""
    assert error["file"] == str(path)
    assert [(p["code"], p["line"]) for p in error["problems"]] == [
        ("PLAIT-E019", 2),
        ("PLAIT-E004", 5),
        ("PLAIT-E019", 6),
        ("PLAIT-E006", 7),
        ("PLAIT-E019", 12),
        ("PLAIT-E005", 10),
        ("PLAIT-E019", 11),
    ]
    assert all(set(p) == {"code", "message", "line"} for p in error["problems"])


def test_check_json_prints_nothing_but_the_object():
    result = plait("check", BAD / "unknown_key.yaml", "--json")

    assert result.stderr == ""
    assert len(result.stdout.strip().splitlines()) == 1


def test_check_with_model_satisfies_abstract_nodes():
    result = plait("check", BAD / "no_model.yaml", "--model", "openai:gpt-4o-mini", "--json")

    assert result.exit_code == 0
    assert json.loads(result.stdout)["workflow"] == "thinker"


def test_check_of_a_missing_file_is_a_load_error(tmp_path):
    result = plait("check", tmp_path / "nope.yaml", "--json")

    assert result.exit_code == 2
    assert json.loads(result.stdout)["error"]["code"] == "PLAIT-E019"


def test_usage_errors_exit_2():
    assert plait("check").exit_code == 2
    assert plait("frobnicate").exit_code == 2


# -- graph ---------------------------------------------------------------------


def test_graph_prints_a_mermaid_flowchart_on_stdout():
    result = plait("graph", REFUND)

    assert result.exit_code == 0
    chart = result.stdout
    assert chart.startswith("flowchart TD\n")
    assert 'n0["load<br/><small>tool: load_order</small>"]' in chart
    assert 'n1("decide<br/><small>LLM</small>")' in chart
    assert 'n2{{"approve<br/><small>approval</small>"}}' in chart
    assert 'n4(("cool_off<br/><small>sleep 3600s</small>"))' in chart
    assert 'n5[["archive<br/><small>workflow: archive.yaml</small>"]]' in chart
    assert 'n1 -->|"decision == #quot;refund#quot;"| n2' in chart
    assert 'n6 -.->|"more · max 3"| n0' in chart
    assert "n0 --> n1" in chart


def test_graph_json_wraps_the_chart():
    result = plait("graph", REFUND, "--json")

    assert result.exit_code == 0
    assert json.loads(result.stdout)["mermaid"].startswith("flowchart TD")


def test_graph_draws_abstract_nodes_without_a_model():
    result = plait("graph", BAD / "no_model.yaml")

    assert result.exit_code == 0 and "flowchart" in result.stdout


def test_graph_of_a_bad_file_reports_like_check():
    result = plait("graph", BAD / "unknown_key.yaml")

    assert result.exit_code == 2
    assert result.stderr.startswith(f"{BAD / 'unknown_key.yaml'}:5: PLAIT-E019")


# -- the output module -------------------------------------------------------------


@pytest.mark.parametrize(("code", "expected"), [("E019", 2), ("E017", 2), ("E001", 1)])
def test_exit_code_is_2_for_refusals_and_1_for_run_outcomes(code, expected):
    assert exit_code(PlaitError(code, "x")) == expected


def test_error_object_of_a_plain_error_has_code_and_message_only():
    assert error_object(PlaitError("E011", "ask settled")) == {
        "error": {"code": "PLAIT-E011", "message": "ask settled"}
    }


def test_error_object_lists_problems_when_there_are_several():
    error = PlaitError.from_problems([Problem("E004", "a", line=3), Problem("E006", "b")])

    assert error_object(error)["error"]["problems"] == [
        {"code": "PLAIT-E004", "message": "a", "line": 3},
        {"code": "PLAIT-E006", "message": "b", "line": None},
    ]


# -- the installed command -------------------------------------------------------


def test_installed_plait_command_reports_problems_and_exits_2():
    command = Path(sys.executable).parent / "plait"
    path = BAD / "unknown_tool.yaml"

    done = subprocess.run(
        [str(command), "check", str(path)], capture_output=True, text=True, timeout=60
    )

    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.splitlines() == [
        f"{path}:4: PLAIT-E004 node 'load': unknown tool 'load_ordr' (did you mean 'load_order'?)"
    ]
