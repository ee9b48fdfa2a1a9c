"""`plait diff OLD NEW` (issue #16, part 3): two plans compared by meaning, files or the
versions runs pinned; exit 0 when equal in meaning, 1 when not, 2 for bad input."""

from __future__ import annotations

from pathlib import Path

import pytest

from contract.support import Cli

EMPTY = {"added": [], "removed": [], "changed": []}


def variant(cli: Cli, name: str, *changes: tuple[str, str]) -> str:
    text = Path(cli.flow("approval.yaml")).read_text()
    for old, new in changes:
        assert old in text, old
        text = text.replace(old, new)
    Path(cli.flow(name)).write_text(text)
    return cli.flow(name)


def test_files_equal_in_meaning_exit_0(cli: Cli):
    cosmetic = variant(cli, "v.yaml", ("name: approval\n", "name: approval\ndescription: x\n"))

    done = cli("diff", cli.flow("approval.yaml"), cli.flow("approval.json"))
    again = cli("diff", cli.flow("approval.yaml"), cosmetic)

    assert (done.exit_code, again.exit_code) == (0, 0)
    assert done.data["equal"] is True and done.data["old"] == done.data["new"]
    assert all(done.data[part] == EMPTY for part in ("nodes", "edges", "tools", "flows"))


@pytest.mark.parametrize(
    ("changes", "part", "verb", "name"),
    [
        ((("Ship it?", "Ship it now?"),), "nodes", "changed", "approve"),
        (
            (("when: '!approved'", "when: 'approved == false'"),),
            "edges",
            "changed",
            "approve -> held",
        ),
        (
            (('"contract_tools:take_no"', '"contract_tools:take_yes"'),),
            "tools",
            "changed",
            "take_no",
        ),
        (
            (
                ("  - {from: approve, to: held, when: '!approved'}\n", ""),
                ("  - id: held\n    tool: take_no\n", ""),
            ),
            "nodes",
            "removed",
            "held",
        ),
        ((("asks: {ttl_s: 3600}", "asks: {ttl_s: 60}"),), "settings", "changed", "asks"),
        (
            (("name: approval\n", "name: approval\nreducers: {log: append}\n"),),
            "reducers",
            "added",
            "log",
        ),
    ],
)
def test_a_change_of_meaning_is_named_and_exits_1(cli: Cli, changes, part, verb, name):
    new = variant(cli, "v.yaml", *changes)

    done = cli("diff", cli.flow("approval.yaml"), new)
    told = cli.raw("diff", cli.flow("approval.yaml"), new)

    assert done.exit_code == told.exit_code == 1
    assert done.data["equal"] is False and done.data["old"] != done.data["new"]
    assert name in done.data[part][verb], done.data
    assert f"'{name}' {verb}" in told.stdout


def test_a_run_id_stands_for_the_version_it_pinned(cli: Cli):
    assert cli.run("approval.yaml", "r1").exit_code == 3
    changed = variant(cli, "v.yaml", ("Ship it?", "Ship it now?"))

    same = cli("diff", "r1", cli.flow("approval.json"))
    other = cli("diff", "r1", changed)

    assert same.exit_code == 0
    assert other.exit_code == 1 and other.data["nodes"]["changed"] == ["approve"]


def test_bad_input_is_exit_2_and_writes_nothing(cli: Cli):
    missing = cli("diff", cli.flow("approval.yaml"), "missing.yaml")
    unknown = cli("diff", cli.flow("approval.yaml"), "no-such-run")

    assert (missing.exit_code, missing.code) == (2, "PLAIT-E019")
    assert (unknown.exit_code, unknown.code) == (2, "PLAIT-E017")
    assert cli.run_ids() == []
