"""Usage errors (CONTRACT.md "Exit codes": 2 — usage; "Errors with --json").

An unknown verb or option, a missing argument or option, a value of the wrong type: exit
2, and with ``--json`` the one error object on stdout like every other refusal.
"""

from __future__ import annotations

import json

import pytest

from contract.support import Cli, plait_process

USAGE_ERRORS = [
    (["run", "--json"], "Missing argument 'WORKFLOW'"),
    (["run", "approval.yaml", "--bogus", "--json"], "No such option: --bogus"),
    (["run", "--json", "approval.yaml", "surplus"], "unexpected extra argument"),
    (["frobnicate", "--json"], "No such command 'frobnicate'"),
    (["--json"], "No such option: --json"),
    (["show", "--json"], "Missing argument 'RUN_ID'"),
    (["respond", "r1", "--json"], "Missing argument 'ASK_ID'"),
    (["deny", "r1", "a1", "--json"], "Missing option '--reason'"),
    (["raise-budget", "r1", "--json"], "Missing argument 'AXIS=VALUE...'"),
    (["fork", "r1", "--at", "three", "--json"], "Invalid value for '--at'"),
    (["worker", "--concurrency", "many", "--json"], "Invalid value for '--concurrency'"),
    (["gc", "--json"], "Missing option '--older-than'"),
]


@pytest.mark.parametrize(
    ("args", "words"), USAGE_ERRORS, ids=[" ".join(a) for a, _ in USAGE_ERRORS]
)
def test_a_usage_error_with_json_is_the_error_object_and_exit_2(cli: Cli, args, words):
    done = cli.raw(*args)

    assert done.exit_code == 2, done
    assert done.code == "PLAIT-E019"
    assert words in done.data["error"]["message"]
    assert done.stderr == ""
    assert cli.run_ids() == []


def test_the_message_names_the_verb(cli: Cli):
    done = cli.raw("show", "--json")

    assert done.data["error"]["message"].startswith("plait show: ")


def test_a_usage_error_without_json_stays_words_on_stderr(cli: Cli):
    done = cli.raw("run", "approval.yaml", "--bogus")

    assert done.exit_code == 2
    assert done.stdout == ""
    assert "No such option: --bogus" in done.stderr


def test_json_after_a_double_dash_is_an_argument_not_the_option(cli: Cli):
    done = cli.raw("send", "r1", "--db", cli.db, "--", "--json")

    assert done.exit_code == 2
    assert done.stdout == ""
    assert "PLAIT-E017" in done.stderr  # the message "--json" went to an unknown run


def test_help_still_exits_0(cli: Cli):
    assert cli.raw("run", "--help").exit_code == 0
    assert cli.raw("--help").exit_code == 0


def test_the_installed_command_reports_usage_errors_as_json(tmp_path):
    done = plait_process("show", "--json", cwd=tmp_path)

    assert done.returncode == 2
    assert done.stderr == ""
    assert json.loads(done.stdout)["error"]["code"] == "PLAIT-E019"
