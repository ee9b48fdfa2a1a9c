"""`plait run` (and `resume`) as CONTRACT.md writes them: the run object, its exit codes,
`--input` forms, `--run-id`, `--detach`, `--model scripted:FILE`, YAML and JSON files,
and where the store is when `--db` is not given."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from contract.support import (
    ASK_KEYS,
    RUN_OBJECT_KEYS,
    SPENT_KEYS,
    T0,
    Cli,
    plait_process,
)

# -- the run object and its exit codes --------------------------------------------------


def test_a_completed_run_exits_0_with_the_run_object(cli: Cli):
    done = cli.run("outcomes.yaml", "r1", "--input", '{"route": "end"}')

    assert done.exit_code == 0, done
    run = done.data
    assert set(run) >= RUN_OBJECT_KEYS
    assert run["run_id"] == "r1" and run["status"] == "completed"
    assert run["outcome"] == {"kind": "completed"}
    assert run["asks"] == []
    assert set(run["spent"]) >= SPENT_KEYS
    assert run["spent"]["elapsed_ms"] >= run["spent"]["wall_ms"] >= 0
    assert run["folds"] == 0


@pytest.mark.parametrize(
    ("route", "outcome"),
    [
        ("fail", {"kind": "failed", "node": "fail", "detail": "ExecutorError: ValueError: kaboom"}),
        ("elsewhere", {"kind": "stalled", "node": "ok"}),
    ],
)
def test_failed_and_stalled_runs_exit_1(cli: Cli, route, outcome):
    done = cli.run("outcomes.yaml", "r1", "--input", json.dumps({"route": route}))

    assert done.exit_code == 1, done
    assert done.data["status"] == outcome["kind"]
    assert done.data["outcome"] == outcome


def test_a_budget_exhausted_run_exits_1_naming_the_axis(cli: Cli):
    done = cli.run("loop.yaml", "r1")

    assert done.exit_code == 1
    assert done.data["status"] == "budget_exhausted"
    assert done.data["outcome"] == {"kind": "budget_exhausted", "axis": "supersteps"}


def test_a_parked_run_exits_3_with_outcome_null_and_its_asks(cli: Cli):
    done = cli.run("approval.yaml", "r1")

    assert done.exit_code == 3
    run = done.data
    assert run["status"] == "parked" and run["outcome"] is None
    (ask,) = run["asks"]
    assert set(ask) >= ASK_KEYS
    assert ask["node"] == "approve" and ask["prompt"] == "Ship it?" and ask["approval"] is True
    assert "tool_name" not in ask  # an ask node's ask names no tool
    assert ask["input"] == {"started": True}
    assert ask["expires_at"] == T0 // 1000 + 3600  # Unix seconds


def test_detach_queues_the_run_and_exits_3(cli: Cli):
    done = cli.run("approval.yaml", "r1", "--detach")

    assert done.exit_code == 3
    assert done.data["status"] == "queued" and done.data["outcome"] is None
    assert done.data["spent"] == dict.fromkeys(SPENT_KEYS, 0)  # every figure, nothing yet
    shown = cli("show", "r1")
    assert shown.exit_code == 3 and shown.data["status"] == "queued"
    assert shown.data["spent"] == done.data["spent"]


def test_resume_of_a_finished_run_reports_its_outcome_again(cli: Cli):
    first = cli.run("outcomes.yaml", "r1", "--input", '{"route": "fail"}')

    again = cli("resume", "r1")

    assert again.exit_code == 1
    assert again.data["outcome"] == first.data["outcome"]


# -- --input ------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ['"hello"', "42", "[1, 2]", "null", "true", "1.5"])
def test_a_non_object_input_becomes_input_value(cli: Cli, value):
    done = cli.run("approval.yaml", "r1", "--input", value)

    assert done.data["context"] == {"input": json.loads(value), "started": True}


def test_input_from_a_file(cli: Cli):
    (cli.folder / "in.json").write_text('{"order": "A-7"}')

    done = cli.run("approval.yaml", "r1", "--input", "@in.json")

    assert done.data["context"] == {"order": "A-7", "started": True}


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("{not json", "--input: not valid JSON"),
        ("NaN", "--input: not valid JSON"),
        ("1e999", "out of range"),
        ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
        ("@missing.json", "--input @missing.json: cannot read the file"),
        ("@binary.bin", "--input @binary.bin: cannot read the file"),
        ('{"a": 1, "b": {"c": 1, "c": 2}}', "duplicate key 'c'"),
        ('{"x": "\\ud800"}', "not valid Unicode"),
    ],
    ids=[
        "syntax",
        "nan",
        "too-large",
        "too-deep",
        "missing-file",
        "not-utf8",
        "dup-key",
        "surrogate",
    ],
)
def test_bad_input_is_e019_exit_2_and_writes_nothing(cli: Cli, value, words):
    (cli.folder / "binary.bin").write_bytes(b"\xd0\xff\xfe")

    done = cli.run("approval.yaml", "r1", "--input", value)

    assert done.exit_code == 2
    assert done.code == "PLAIT-E019"
    assert words in done.data["error"]["message"]
    assert cli.run_ids() == []


# -- --run-id -------------------------------------------------------------------------------


def test_an_existing_run_id_is_e016(cli: Cli):
    cli.run("approval.yaml", "r1")

    done = cli.run("approval.yaml", "r1")

    assert (done.exit_code, done.code) == (2, "PLAIT-E016")


@pytest.mark.parametrize(
    ("run_id", "words"),
    [
        ("", "blank"),
        ("  ", "blank"),
        ("a\tb", "control character"),
        ("x" * 257, "longer than 256 bytes"),
        ("parent~child", "reserved for child runs"),
    ],
    ids=["empty", "spaces", "control", "long", "tilde"],
)
def test_a_run_id_no_run_can_carry_is_e019(cli: Cli, run_id, words):
    done = cli.run("approval.yaml", run_id)

    assert (done.exit_code, done.code) == (2, "PLAIT-E019")
    assert words in done.data["error"]["message"]
    assert cli.run_ids() == []


def test_the_default_run_id(cli: Cli):
    run_id = cli("run", cli.flow("approval.yaml")).data["run_id"]

    assert run_id.startswith("run-") and len(run_id) == 4 + 16


# -- workflow files: YAML and JSON of the same shape ---------------------------------------


def test_yaml_and_json_files_of_the_same_shape_run_the_same(cli: Cli):
    from_yaml = cli.run("approval.yaml", "y").data
    from_json = cli.run("approval.json", "j").data

    for run in (from_yaml, from_json):
        run.pop("run_id")
        for ask in run["asks"]:
            ask.pop("ask_id")
            ask.pop("run_id", None)
    assert from_yaml == from_json


# -- scripted models --------------------------------------------------------------------------


def test_the_model_file_is_relative_to_the_workflow_folder_not_the_cwd(cli: Cli, tmp_path_factory):
    elsewhere = tmp_path_factory.mktemp("elsewhere")

    done = plait_process(
        "run", cli.flow("agent.yaml"), "--run-id", "a1", "--db", cli.db, "--json", cwd=elsewhere
    )

    assert done.returncode == 0, done.stderr
    run = json.loads(done.stdout)
    assert run["context"] == {"agent": "found it", "finished": True}
    assert run["spent"]["input_tokens"] == 32 and run["spent"]["output_tokens"] == 8


def test_model_option_is_relative_to_the_workflow_folder_and_takes_the_object_form(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
):
    elsewhere = cli.folder / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)

    done = cli("run", "../agent.yaml", "--model", "scripted:models/by_node.json", "--run-id", "a1")

    assert done.exit_code == 0, done
    assert done.data["context"]["agent"] == "from the node's own list"


def test_running_out_of_scripted_responses_fails_the_turn_naming_the_file(cli: Cli):
    done = cli.run("agent.yaml", "a1", "--model", "scripted:models/empty.json")

    assert done.exit_code == 1
    assert done.data["outcome"]["kind"] == "failed"
    entries = cli("trace", "a1").data["entries"]
    failure = entries[0]["failure"]
    assert entries[0]["kind"] == "llm" and failure["cause"] == "ExecutorError"
    assert "empty.json" in failure["detail"]


def test_a_missing_scripted_model_file_is_a_load_error(cli: Cli):
    done = cli.run("agent.yaml", "a1", "--model", "scripted:models/nope.json")

    assert (done.exit_code, done.code) == (2, "PLAIT-E004")
    assert cli.run_ids() == []


# -- stdout carries the one JSON object -------------------------------------------------------


def test_a_tool_printing_on_stdout_does_not_break_the_json_object(cli: Cli):
    done = cli.run("chatty.yaml", "c1")

    assert done.exit_code == 0
    assert done.data["context"] == {"chatty": True}
    assert "a tool talking on stdout" in done.stderr


# -- where the store is -----------------------------------------------------------------------


def test_the_store_defaults_to_plait_db_env_then_dot_plait_in_the_cwd(cli: Cli):
    env_db = cli.folder / "from-env.db"
    common = ("run", cli.flow("approval.yaml"), "--json")

    by_env = cli.raw(*common, "--run-id", "e1", env={"PLAIT_DB": f"sqlite:///{env_db}"})
    by_cwd = cli.raw(*common, "--run-id", "c1")

    assert by_env.exit_code == by_cwd.exit_code == 3
    assert env_db.exists()
    assert (Path(cli.folder) / ".plait" / "plait.db").exists()
    listed = cli.raw("runs", "--json", env={"PLAIT_DB": f"sqlite:///{env_db}"}).data["runs"]
    assert [r["run_id"] for r in listed] == ["e1"]
    assert [r["run_id"] for r in cli.raw("runs", "--json").data["runs"]] == ["c1"]


def test_the_human_outcome_line_names_the_code_of_a_stalled_run(cli: Cli):
    done = cli.raw(
        "run", cli.flow("outcomes.yaml"), "--db", cli.db, "--run-id", "r1",
        "--input", json.dumps({"route": "elsewhere"}),
    )  # fmt: skip

    assert done.exit_code == 1, done
    assert "outcome: stalled (PLAIT-E001, node=ok)" in done.stdout + done.stderr


def test_a_failure_stops_the_agent_beside_it_and_asks_nobody(cli: Cli):
    # §3.5 fail-fast: the superstep drains with no new dispatch. The agent's first turn
    # (a tool call) was in flight beside `bad`; it is not followed by the tool or a second
    # turn, and the ask beside them is not left for anyone to answer.
    (cli.folder / "failfast.yaml").write_text(
        "name: failfast\n"
        "nodes:\n"
        "  - {id: go, tool: start}\n"
        "  - {id: agent, instruction: Find it., tools: [lookup]}\n"
        "  - {id: bad, tool: boom}\n"
        "  - {id: sure, ask: {prompt: Sure?}}\n"
        "edges: [{from: go, to: agent}, {from: go, to: bad}, {from: go, to: sure}]\n"
        'llm: {model: "scripted:models/turns.json"}\n'
        "tools:\n"
        '  start: {python: "contract_tools:start"}\n'
        '  lookup: {python: "contract_tools:lookup"}\n'
        '  boom: {python: "contract_tools:boom"}\n'
    )

    done = cli.run("failfast.yaml", "r1")

    assert done.exit_code == 1, done
    assert done.data["outcome"]["kind"] == "failed" and done.data["outcome"]["node"] == "bad"
    assert done.data["asks"] == [] and cli("asks", "r1").data["asks"] == []
    kinds = [(e["node"], e["kind"]) for e in cli("trace", "r1").data["entries"]]
    assert kinds == [("go", "tool"), ("bad", "tool"), ("sure", "ask"), ("agent", "llm")]
    assert cli("verify", "r1").data["verified"] is True
