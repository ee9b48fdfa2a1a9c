"""Only meaning pins a run, and a run goes on on its own version (issue #16, parts 1-2):
`plan_hash` in `check` and the run object; a parked run resumes after its file was edited
for people only (a description, comments, formatting, key order, JSON written into the
file), and after a change of meaning (or the file's removal) on the version it pinned."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from contract.support import Cli

COSMETIC_EDITS = {
    "description": lambda text: text.replace(
        "name: approval\n", "name: approval\ndescription: Ship or hold an order.\n"
    ),
    "comments": lambda text: (
        "# edited after the run started\n"
        + text.replace("    tool: start", "    tool: start  # the first node")
    ),
    "reformatted": lambda text: text.replace(
        "  - {from: start, to: approve}", "  - from: start\n    to: approve"
    ).replace(
        "ask: {prompt: Ship it?, approval: true}", "ask: {approval: true, prompt: 'Ship it?'}"
    ),
    "json": lambda text: (Path(__file__).parent / "flows" / "approval.json").read_text(),
}


def plan_hash_of(cli: Cli, name: str) -> str:
    checked = cli.raw("check", cli.flow(name), "--json")
    assert checked.exit_code == 0, checked
    found = checked.data["plan_hash"]
    assert re.fullmatch(r"sha256:[0-9a-f]{64}", found), found
    return str(found)


def rewrite(cli: Cli, name: str, edit: str) -> None:
    path = Path(cli.flow(name))
    path.write_text(COSMETIC_EDITS[edit](path.read_text()))


@pytest.mark.parametrize("edit", sorted(COSMETIC_EDITS))
def test_a_cosmetic_edit_keeps_the_plan_hash(cli: Cli, edit: str):
    before = plan_hash_of(cli, "approval.yaml")
    rewrite(cli, "approval.yaml", edit)

    assert plan_hash_of(cli, "approval.yaml") == before


def test_yaml_and_json_of_one_definition_have_one_plan_hash(cli: Cli):
    assert plan_hash_of(cli, "approval.yaml") == plan_hash_of(cli, "approval.json")


@pytest.mark.parametrize(
    "change",
    [
        ("Ship it?", "Ship it now?"),  # an ask's prompt
        ("to: held, when: '!approved'", "to: held, when: 'approved == false'"),  # a condition
        ("ttl_s: 3600", "ttl_s: 7200"),  # the asks' time to live
        ('"contract_tools:take_no"', '"contract_tools:take_yes"'),  # a tool binding
    ],
)
def test_a_change_of_meaning_changes_the_plan_hash(cli: Cli, change: tuple[str, str]):
    before = plan_hash_of(cli, "approval.yaml")
    path = Path(cli.flow("approval.yaml"))
    text = path.read_text()
    assert change[0] in text
    path.write_text(text.replace(*change))

    assert plan_hash_of(cli, "approval.yaml") != before


def test_show_prints_the_plan_hash_the_run_pinned(cli: Cli):
    assert cli.run("approval.yaml", "r1").exit_code == 3

    shown = cli("show", "r1").data

    assert shown["plan_hash"] == plan_hash_of(cli, "approval.yaml")


@pytest.mark.parametrize("edit", sorted(COSMETIC_EDITS))
def test_a_parked_run_resumes_after_a_cosmetic_edit_of_its_file(cli: Cli, edit: str):
    assert cli.run("approval.yaml", "r1").exit_code == 3
    pinned = cli("show", "r1").data["plan_hash"]
    rewrite(cli, "approval.yaml", edit)
    ask = cli.only_ask("r1")["ask_id"]
    assert cli("approve", "r1", ask, "--as", "bob").exit_code == 0

    done = cli("resume", "r1")

    assert done.exit_code == 0, done
    assert done.data["status"] == "completed"
    assert cli("show", "r1").data["plan_hash"] == pinned  # the run keeps its own plan
    assert cli("verify", "r1").data["verified"] is True


@pytest.mark.parametrize(
    "change",
    [
        ("Ship it?", "Ship it now?"),  # the ask it waits on
        ("  - {from: approve, to: held, when: '!approved'}\n", ""),  # the branch it takes
        ("take_no", "take_yes"),  # a tool binding (and a node's tool)
        (None, None),  # the file is gone
    ],
)
def test_a_parked_run_goes_on_on_its_own_version_whatever_its_file_says_now(
    cli: Cli, change: tuple[str | None, str | None]
):
    assert cli.run("approval.yaml", "r1").exit_code == 3
    pinned = cli("show", "r1").data["plan_hash"]
    path = Path(cli.flow("approval.yaml"))
    old, new = change
    if old is None:
        path.unlink()
    else:
        assert old in path.read_text()
        path.write_text(path.read_text().replace(old, new or ""))
    ask = cli.only_ask("r1")["ask_id"]
    assert cli("deny", "r1", ask, "--as", "bob", "--reason", "not now").exit_code == 0

    done = cli("resume", "r1")

    assert done.exit_code == 0, done
    assert done.data["status"] == "completed"
    assert done.data["plan_hash"] == pinned
    assert done.data["context"]["branch"] == "denied"  # the pinned branch, node and tool ran
    assert cli("verify", "r1").data["verified"] is True


def test_a_new_run_takes_the_file_as_it_is_now(cli: Cli):
    assert cli.run("approval.yaml", "r1").exit_code == 3
    path = Path(cli.flow("approval.yaml"))
    path.write_text(path.read_text().replace("Ship it?", "Ship it now?"))

    assert cli.run("approval.yaml", "r2").exit_code == 3

    assert cli.only_ask("r1")["prompt"] == "Ship it?"
    assert cli.only_ask("r2")["prompt"] == "Ship it now?"
    assert cli("show", "r2").data["plan_hash"] == plan_hash_of(cli, "approval.yaml")
    assert cli("show", "r1").data["plan_hash"] != cli("show", "r2").data["plan_hash"]


def test_on_postgresql_too_a_parked_run_resumes_after_a_cosmetic_edit(cli: Cli, postgres_url: str):
    def on_pg(*args: str) -> dict:
        done = cli.raw(*args, "--db", postgres_url, "--json")
        assert done.exit_code in (0, 3), done
        return done.data

    assert on_pg("run", cli.flow("approval.yaml"), "--run-id", "p1")["status"] == "parked"
    rewrite(cli, "approval.yaml", "description")
    rewrite(cli, "approval.yaml", "comments")
    (ask,) = on_pg("asks", "p1")["asks"]
    on_pg("approve", "p1", ask["ask_id"], "--as", "bob")

    assert on_pg("resume", "p1")["status"] == "completed"
    assert on_pg("verify", "p1")["verified"] is True


def test_a_worker_drives_an_answered_run_on_its_own_version_after_a_change(cli: Cli):
    assert cli.run("approval.yaml", "w1").exit_code == 3
    pinned = cli("show", "w1").data["plan_hash"]
    path = Path(cli.flow("approval.yaml"))
    path.write_text(path.read_text().replace("take_no", "take_yes"))
    ask = cli.only_ask("w1")["ask_id"]
    assert cli("deny", "w1", ask, "--as", "bob", "--reason", "no").exit_code == 0

    done = cli("worker", "--once")

    assert done.exit_code == 0, done
    assert done.data["statuses"] == {"completed": 1}, done.data
    shown = cli("show", "w1").data
    assert (shown["plan_hash"], shown["context"]["branch"]) == (pinned, "denied")


def test_show_warns_when_a_tool_module_changed_since_the_run_started(cli: Cli):
    assert cli.run("approval.yaml", "r1").exit_code == 3
    assert "tool_code_changed" not in cli("show", "r1").data
    tools = Path(cli.flow("contract_tools.py"))
    tools.write_text(tools.read_text() + "\n# a fix shipped while the run waits\n")

    shown = cli("show", "r1").data
    told = cli.raw("show", "r1", "--db", cli.db)

    assert shown["tool_code_changed"] == ["contract_tools.py"]
    assert "tool module contract_tools.py changed since the run started" in told.stderr
