"""``plait schedule``: the --json shapes of add, list, pause, resume, delete and sync, and
bad input refused with PLAIT-E019 naming its field, at ``schedule add`` and at ``check``."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from contract.support import T0, Cli

TICK = 'name: tick\nnodes: [{id: a, tool: one}]\ntools: {one: {python: "contract_tools:one"}}\n'


def write(cli: Cli, name: str, text: str) -> str:
    path = Path(cli.flow(name))
    path.write_text(text)
    return str(path)


def test_schedule_verbs_print_their_objects(cli: Cli) -> None:
    flow = write(cli, "tick.yaml", TICK)
    options = ["--cron", "0 * * * *", "--input", '{"n": 1}', "--timezone", "Europe/Paris"]
    added = cli("schedule", "add", "hourly", "--workflow", flow, *options, "--catch-up", "none")
    assert added.exit_code == 0, added
    assert added.data == {"name": "hourly", "accepted": True, "next_ms": T0 + 3_600_000}
    (listed,) = cli("schedule", "list").data["schedules"]
    assert listed == {
        "name": "hourly", "workflow": str(Path(flow).resolve()), "cron": "0 * * * *",
        "input": {"n": 1}, "timezone": "Europe/Paris", "overlap": "skip", "catch_up": "none",
        "origin": "cli", "paused": False, "next_ms": T0 + 3_600_000, "last_slot_ms": None,
        "last_run_id": None, "last_error": None, "created_ms": T0, "updated_ms": T0,
    }  # fmt: skip
    assert cli("schedule", "pause", "hourly").data == {
        "name": "hourly", "accepted": True, "paused": True,
    }  # fmt: skip
    resumed = cli("schedule", "resume", "hourly", now=T0 + 7_200_000 + 1).data
    assert resumed == {"name": "hourly", "accepted": True, "paused": False,
                       "next_ms": T0 + 3 * 3_600_000}  # fmt: skip
    assert cli("schedule", "delete", "hourly").data == {
        "name": "hourly", "accepted": True, "deleted": True,
    }  # fmt: skip
    assert cli("schedule", "list").data == {"schedules": []}


def test_a_taken_name_is_e016_and_an_unknown_one_e017(cli: Cli) -> None:
    flow = write(cli, "tick.yaml", TICK)
    assert cli("schedule", "add", "s", "--workflow", flow, "--every", "1m").exit_code == 0
    again = cli("schedule", "add", "s", "--workflow", flow, "--every", "1m")
    assert (again.exit_code, again.code) == (2, "PLAIT-E016")
    for verb in ("pause", "resume", "delete"):
        unknown = cli("schedule", verb, "nope")
        assert (unknown.exit_code, unknown.code) == (2, "PLAIT-E017"), verb


@pytest.mark.parametrize(
    ("args", "names"),
    [
        (["--cron", "61 * * * *"], "--cron '61 * * * *'"),
        (["--cron", "every day"], "--cron 'every day'"),
        (["--every", "-5s"], "--every '-5s': must be a positive duration"),
        (["--every", "0s"], "--every '0s': must be a positive duration"),
        (["--every", "soon"], "--every 'soon'"),
        (["--cron", "* * * * *", "--timezone", "Mars/Olympus"], "--timezone 'Mars/Olympus'"),
        (["--every", "1m", "--overlap", "queue"], "--overlap 'queue'"),
        (["--every", "1m", "--catch-up", "all"], "--catch-up 'all'"),
        (["--every", "1m", "--cron", "* * * * *"], "exactly one of --cron or --every"),
        ([], "exactly one of --cron or --every"),
    ],
)
def test_bad_schedule_input_is_e019_naming_the_option(
    cli: Cli, args: list[str], names: str
) -> None:
    flow = write(cli, "tick.yaml", TICK)
    done = cli("schedule", "add", "s", "--workflow", flow, *args)
    assert (done.exit_code, done.code) == (2, "PLAIT-E019"), done
    assert names in done.data["error"]["message"]
    assert cli("schedule", "list").data == {"schedules": []}  # nothing written


def test_a_bad_name_or_workflow_is_refused_before_anything_is_written(cli: Cli) -> None:
    flow = write(cli, "tick.yaml", TICK)
    bad_name = cli("schedule", "add", "a/b", "--workflow", flow, "--every", "1m")
    assert (bad_name.code, "NAME 'a/b'" in bad_name.data["error"]["message"]) == (
        "PLAIT-E019",
        True,
    )
    broken = write(cli, "broken.yaml", "name: x\nnodes: [{id: a, tool: missing}]\n")
    refused = cli("schedule", "add", "s", "--workflow", broken, "--every", "1m")
    assert refused.code == "PLAIT-E004"
    assert cli("schedule", "list").data == {"schedules": []}


def test_check_names_each_bad_field_of_a_files_schedules(cli: Cli) -> None:
    flow = write(cli, "bad.yaml", TICK + (
        "schedules:\n"
        "  - {name: a, cron: '99 * * * *'}\n"
        "  - {name: b, every: -1h}\n"
        "  - {name: c, cron: '0 9 * * *', timezone: Atlantis/Capital}\n"
        "  - {name: d, every: 1h, cron: '0 * * * *'}\n"
        "  - {name: a, every: 1h, when: always}\n"
    ))  # fmt: skip
    done = cli.raw("check", flow, "--json")
    assert (done.exit_code, done.code) == (2, "PLAIT-E019")
    problems = [(p["line"], p["message"]) for p in done.data["error"]["problems"]]
    assert problems == [
        (5, "schedules[0]: cron '99 * * * *': not a valid cron expression"
            " ([99 * * * *] is not acceptable, out of range)"),
        (6, "schedules[1]: every '-1h': must be a positive duration"),
        (7, "schedules[2]: timezone 'Atlantis/Capital': unknown time zone"),
        (8, "schedule 'd': give exactly one of schedules[3]: cron or schedules[3]: every"),
        (9, "schedules[4]: unknown key 'when'"),
        (9, "schedules[4]: name 'a' is used twice"),
    ]  # fmt: skip


def test_sync_registers_a_files_schedules_and_follows_its_edits(cli: Cli) -> None:
    text = (
        TICK + "schedules:\n  - {name: nightly, cron: '0 2 * * *'}\n  - {name: often, every: 15m}\n"
    )
    flow = write(cli, "scheduled.yaml", text)
    first = cli("schedule", "sync", flow).data
    assert first == {"workflow": str(Path(flow).resolve()), "accepted": True,
                     "added": ["nightly", "often"], "updated": [], "unchanged": [],
                     "removed": []}  # fmt: skip
    assert cli.raw("check", flow).exit_code == 0
    write(cli, "scheduled.yaml", TICK + "schedules:\n  - {name: nightly, cron: '0 3 * * *'}\n")
    second = cli("schedule", "sync", flow).data
    assert (second["updated"], second["removed"], second["added"]) == (["nightly"], ["often"], [])
    (nightly,) = cli("schedule", "list").data["schedules"]
    assert (nightly["cron"], nightly["origin"], nightly["next_ms"]) == (
        "0 3 * * *", "file", T0 + 3 * 3_600_000,
    )  # fmt: skip
    assert cli("schedule", "sync", flow).data["unchanged"] == ["nightly"]


def test_sync_refuses_a_name_another_schedule_holds(cli: Cli) -> None:
    flow = write(cli, "tick.yaml", TICK)
    cli("schedule", "add", "nightly", "--workflow", flow, "--every", "1h")
    other = write(cli, "other.yaml", TICK + "schedules:\n  - {name: nightly, every: 1m}\n")
    refused = cli("schedule", "sync", other)
    assert (refused.exit_code, refused.code) == (2, "PLAIT-E016")
    (kept,) = cli("schedule", "list").data["schedules"]
    assert kept["every_ms"] == 3_600_000


def test_gc_deletes_the_slot_rows_of_the_runs_it_deletes(cli: Cli) -> None:
    flow = write(cli, "tick.yaml", TICK)
    assert cli("schedule", "add", "s", "--workflow", flow, "--every", "1m").exit_code == 0
    fired = cli("worker", "--once", now=T0 + 60_000)
    assert fired.data["statuses"] == {"completed": 1}, fired.data
    assert [r["schedule"]["name"] for r in cli("runs").data["runs"]] == ["s"]

    gone = cli("gc", "--older-than", "1h", now=T0 + 60_000 + 2 * 3_600_000)

    assert gone.data["deleted"] == 1, gone.data
    assert cli("runs").data["runs"] == []
    assert cli("schedule", "list").data["schedules"][0]["next_ms"] > T0 + 60_000  # not again
    with sqlite3.connect(cli.db_file) as con:
        assert con.execute("SELECT COUNT(*) FROM schedule_slots").fetchone()[0] == 0
