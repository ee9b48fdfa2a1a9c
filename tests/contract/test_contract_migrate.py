"""`plait migrate RUN_ID --workflow FILE [--map OLD=NEW] [--restart-at-entry]` (issue #16,
part 5): a run that is not being driven moves onto a new version; every refusal is listed
with PLAIT-E030 (or E019 for bad input), exit 2, and leaves the store as it was. A
migrated run resumes on its new version and verifies, migration included."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any

from contract.support import Cli, plait_process


def version(cli: Cli, name: str, *edits: tuple[str, str], base: str = "approval.yaml") -> str:
    """A new version of ``base``: each ``(old, new)`` text replaced once."""
    text = Path(cli.flow(base)).read_text()
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new, 1)
    Path(cli.flow(name)).write_text(text)
    return cli.flow(name)


ADD_AUDIT = (
    ("  - id: held\n", "  - id: audit\n    tool: start\n  - id: held\n"),
    (
        "  - {from: approve, to: held",
        "  - {from: shipped, to: audit}\n  - {from: approve, to: held",
    ),
)


def store_rows(cli: Cli) -> dict[str, list[Any]]:
    """Every row of every table: what "nothing written" compares."""
    with sqlite3.connect(cli.db_file) as con:
        tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        return {t: sorted(map(repr, con.execute(f"SELECT * FROM {t}"))) for t in sorted(tables)}


def parked(cli: Cli, run_id: str = "r") -> str:
    """A run parked at its approval; returns the ask id."""
    assert cli.run("approval.yaml", run_id).exit_code == 3
    return str(cli.only_ask(run_id)["ask_id"])


def approve_and_resume(cli: Cli, run_id: str, ask: str) -> dict[str, Any]:
    assert cli("approve", run_id, ask, "--as", "bob").exit_code == 0
    return cli("resume", run_id).data


def verified(cli: Cli, run_id: str) -> bool:
    done = cli("verify", run_id)
    return done.exit_code == 0 and done.data["verified"] is True


# --- moves that are accepted ----------------------------------------------------------


def test_a_parked_run_moves_onto_an_added_node_and_runs_it(cli: Cli):
    ask = parked(cli)
    before = cli("show", "r").data["plan_hash"]
    new = version(cli, "v2.yaml", *ADD_AUDIT)

    done = cli("migrate", "r", "--workflow", new)

    assert done.exit_code == 0
    assert set(done.data) == {"run_id", "accepted", "from", "to"}
    assert done.data["run_id"] == "r" and done.data["accepted"] is True
    assert done.data["from"] == before
    assert done.data["to"] == cli.raw("check", new, "--json").data["plan_hash"]
    shown = cli("show", "r").data
    assert shown["status"] == "parked" and shown["asks"][0]["ask_id"] == ask
    assert shown["plan_hash"] == done.data["to"] and shown["migrated_from"] == [before]
    finished = approve_and_resume(cli, "r", ask)
    assert finished["status"] == "completed"
    assert [e["node"] for e in cli("trace", "r").data["entries"]][-1] == "audit"
    assert verified(cli, "r")


def test_a_removed_idle_node_and_its_edge_are_dropped(cli: Cli):
    ask = parked(cli)
    new = version(
        cli,
        "v2.yaml",
        ("  - id: held\n    tool: take_no\n", ""),
        ("  - {from: approve, to: held, when: '!approved'}\n", ""),
    )

    assert cli("migrate", "r", "--workflow", new).exit_code == 0
    finished = approve_and_resume(cli, "r", ask)

    assert finished["status"] == "completed" and finished["context"]["branch"] == "approved"
    assert verified(cli, "r")


def test_a_renamed_node_is_matched_with_map(cli: Cli):
    ask = parked(cli)
    new = version(
        cli,
        "v2.yaml",
        ("  - id: shipped\n", "  - id: ship\n"),
        ("to: shipped", "to: ship"),
    )

    done = cli("migrate", "r", "--workflow", new, "--map", "shipped=ship")

    assert done.exit_code == 0
    assert approve_and_resume(cli, "r", ask)["status"] == "completed"
    assert [e["node"] for e in cli("trace", "r").data["entries"]][-1] == "ship"
    assert verified(cli, "r")


def test_a_changed_condition_decides_on_the_new_version(cli: Cli):
    ask = parked(cli)
    new = version(
        cli,
        "v2.yaml",
        ("when: approved}", "when: SWAP}"),
        ("when: '!approved'}", "when: approved}"),
        ("when: SWAP}", "when: '!approved'}"),
    )

    assert cli("migrate", "r", "--workflow", new).exit_code == 0
    finished = approve_and_resume(cli, "r", ask)

    assert finished["context"]["branch"] == "denied"  # the swapped branches, as the new file says
    assert verified(cli, "r")


def test_restart_at_entry_keeps_the_context_and_runs_the_new_plan_from_its_entry(cli: Cli):
    old_ask = parked(cli)
    new = version(cli, "v2.yaml", ("Ship it?", "Ship it now?"))

    assert cli("migrate", "r", "--workflow", new, "--restart-at-entry").exit_code == 0
    assert cli("show", "r").data["status"] == "queued"
    again = cli("resume", "r").data

    assert again["status"] == "parked" and again["context"]["started"] is True
    ask = again["asks"][0]
    assert ask["ask_id"] != old_ask and ask["prompt"] == "Ship it now?"
    starts = [e for e in cli("trace", "r").data["entries"] if e["node"] == "start"]
    assert [e["attempt"] for e in starts] == [1, 2]  # the entry ran again, under a new key
    assert approve_and_resume(cli, "r", ask["ask_id"])["status"] == "completed"
    assert verified(cli, "r")


def test_a_failed_run_moves_onto_a_fixed_version_and_its_failed_node_runs_again(cli: Cli):
    broken = version(
        cli,
        "broken.yaml",
        (
            'take_yes: {python: "contract_tools:take_yes"}',
            'take_yes: {python: "contract_tools:boom"}',
        ),
    )
    assert cli("run", broken, "--run-id", "f").exit_code == 3
    ask = cli.only_ask("f")["ask_id"]
    failed = approve_and_resume(cli, "f", ask)
    assert failed["status"] == "failed" and failed["outcome"]["node"] == "shipped"

    assert cli("migrate", "f", "--workflow", cli.flow("approval.yaml")).exit_code == 0
    assert cli("show", "f").data["status"] == "queued"
    fixed = cli("resume", "f").data

    assert fixed["status"] == "completed" and fixed["context"]["branch"] == "approved"
    assert verified(cli, "f")


def test_a_run_migrated_twice_names_both_earlier_versions_and_verifies(cli: Cli):
    ask = parked(cli)
    first = cli("show", "r").data["plan_hash"]
    v2 = version(cli, "v2.yaml", *ADD_AUDIT)
    v3 = version(cli, "v3.yaml", ("Ship it?", "Ship?"), base="v2.yaml")

    second = cli("migrate", "r", "--workflow", v2).data["to"]
    third = cli("migrate", "r", "--workflow", v3).data["to"]

    shown = cli("show", "r").data
    assert shown["migrated_from"] == [first, second] and shown["plan_hash"] == third
    assert approve_and_resume(cli, "r", ask)["status"] == "completed"
    assert verified(cli, "r")
    # verify on every core leaves a migrated run to one process: the same report
    assert cli("verify", "r", "--workers", "3").data == cli("verify", "r", "--workers", "1").data
    said = cli.raw("show", "r", "--db", cli.db)
    human = said.stdout + said.stderr
    assert f"versions: {first} -> {second} -> {third}" in human


# --- refusals: E030 (or E019), exit 2, nothing written -----------------------------------


def refused(cli: Cli, *args: str) -> dict[str, Any]:
    before = store_rows(cli)
    done = cli("migrate", *args)
    assert done.exit_code == 2, done.data
    assert store_rows(cli) == before
    return dict(done.data["error"])


def test_removing_the_node_a_run_waits_on_is_refused(cli: Cli):
    parked(cli)
    new = version(
        cli,
        "v2.yaml",
        (
            "  - id: approve\n    ask: {prompt: Ship it?, approval: true}\n",
            "  - id: approve\n    tool: start\n",
        ),
    )
    gone = version(
        cli,
        "v3.yaml",
        ("  - id: approve\n    ask: {prompt: Ship it?, approval: true}\n", ""),
        ("  - {from: start, to: approve}\n", "  - {from: start, to: shipped}\n"),
        ("  - {from: approve, to: shipped, when: approved}\n", ""),
        (
            "  - {from: approve, to: held, when: '!approved'}\n",
            "  - {from: start, to: held, when: '!started'}\n",
        ),
    )

    kind = refused(cli, "r", "--workflow", new)
    removed = refused(cli, "r", "--workflow", gone)

    assert kind["code"] == "PLAIT-E030" and "'approve'" in kind["message"]
    assert "ask node" in kind["message"] and "tool node" in kind["message"]
    assert removed["code"] == "PLAIT-E030" and "has no node 'approve'" in removed["message"]


def test_renaming_the_node_a_run_waits_on_is_refused(cli: Cli):
    parked(cli)
    new = version(
        cli,
        "v2.yaml",
        ("  - id: approve\n", "  - id: gate\n"),
        ("to: approve", "to: gate"),
        ("from: approve", "from: gate"),
        ("from: approve", "from: gate"),
    )

    error = refused(cli, "r", "--workflow", new, "--map", "approve=gate")

    assert error["code"] == "PLAIT-E030" and "cannot be renamed" in error["message"]


def test_a_map_naming_unknown_nodes_lists_each(cli: Cli):
    parked(cli)

    error = refused(
        cli,
        "r",
        "--workflow",
        cli.flow("approval.yaml"),
        "--map",
        "nope=shipped",
        "--map",
        "held=gone",
    )

    assert error["code"] == "PLAIT-E030"
    messages = [p["message"] for p in error["problems"]]
    assert any("no node 'nope'" in m for m in messages)
    assert any("no node 'gone'" in m for m in messages)
    assert all(p["code"] == "PLAIT-E030" for p in error["problems"])


def test_a_malformed_map_is_bad_input(cli: Cli):
    parked(cli)

    error = refused(cli, "r", "--workflow", cli.flow("approval.yaml"), "--map", "shipped")

    assert error["code"] == "PLAIT-E019" and "OLD=NEW" in error["message"]


def test_a_live_key_whose_reducer_changed_kind_is_refused(cli: Cli):
    parked(cli)  # the context holds "started"
    new = version(
        cli,
        "v2.yaml",
        ("asks: {ttl_s: 3600}\n", "asks: {ttl_s: 3600}\nreducers: {started: append}\n"),
    )

    error = refused(cli, "r", "--workflow", new)

    assert error["code"] == "PLAIT-E030" and "'started'" in error["message"]
    assert "lww" in error["message"] and "append" in error["message"]


def test_an_answer_the_new_schema_refuses_is_refused(cli: Cli):
    question = version(
        cli,
        "q.yaml",
        (
            "ask: {prompt: Ship it?, approval: true}",
            "ask: {prompt: How many?, output_schema: {type: object}}",
        ),
        ("when: approved}", "when: 'n > 0'}"),
        ("when: '!approved'}", "when: 'n <= 0'}"),
    )
    assert cli("run", question, "--run-id", "q").exit_code == 3
    ask = cli.only_ask("q")["ask_id"]
    assert cli("respond", "q", ask, "--result", '{"n": 2}').exit_code == 0
    stricter = version(
        cli,
        "q2.yaml",
        ("output_schema: {type: object}", "output_schema: {type: object, required: [count]}"),
        base="q.yaml",
    )

    error = refused(cli, "q", "--workflow", stricter)

    assert error["code"] == "PLAIT-E030" and ask in error["message"]
    assert "no longer accepts" in error["message"]


def test_a_completed_a_queued_and_an_unknown_run_are_refused(cli: Cli):
    ask = parked(cli, "done")
    approve_and_resume(cli, "done", ask)
    assert cli("run", cli.flow("approval.yaml"), "--run-id", "waiting", "--detach").exit_code == 3

    completed = refused(cli, "done", "--workflow", cli.flow("approval.yaml"))
    queued = refused(cli, "waiting", "--workflow", cli.flow("approval.yaml"))
    unknown = refused(cli, "ghost", "--workflow", cli.flow("approval.yaml"))

    assert completed["code"] == "PLAIT-E030" and "completed" in completed["message"]
    assert "fork" in completed["message"]
    assert queued["code"] == "PLAIT-E030" and "queued" in queued["message"]
    assert unknown["code"] == "PLAIT-E017"


def test_a_missing_or_invalid_new_file_is_refused(cli: Cli):
    parked(cli)
    Path(cli.flow("bad.yaml")).write_text("name: bad\nnodes: [{id: a, tool: nope}]\nedges: []\n")

    missing = refused(cli, "r", "--workflow", cli.flow("nowhere.yaml"))
    invalid = refused(cli, "r", "--workflow", cli.flow("bad.yaml"))

    assert missing["code"] == "PLAIT-E019"
    assert invalid["code"].startswith("PLAIT-E0") and invalid["code"] != "PLAIT-E030"


def test_a_run_driven_elsewhere_is_refused(cli: Cli):
    ask = parked(cli)
    cli("approve", "r", ask, "--as", "bob")
    with sqlite3.connect(cli.db_file) as con:  # as a worker's claim leaves it
        con.execute("UPDATE runs SET status = 'running' WHERE run_id = 'r'")

    error = refused(cli, "r", "--workflow", version(cli, "v2.yaml", *ADD_AUDIT))

    assert error["code"] == "PLAIT-E030" and "running" in error["message"]


# --- a crash at each boundary of a migration ---------------------------------------------


def test_a_crash_at_every_boundary_of_a_migration_loses_nothing(cli: Cli):
    new = version(cli, "v2.yaml", *ADD_AUDIT)
    env = {"PYTHONPATH": os.pathsep.join([str(cli.folder), os.environ.get("PYTHONPATH", "")])}
    for boundary in (1, 2):
        run_id = f"c{boundary}"
        ask = parked(cli, run_id)
        before = store_rows(cli)["journal"]

        crashed = plait_process(
            "migrate", run_id, "--workflow", new, "--db", cli.db, "--json",
            cwd=cli.folder, env={**env, "PLAIT_CRASH_AT": f"migrate:{boundary}"},
        )  # fmt: skip

        assert crashed.returncode == -9
        written = store_rows(cli)["journal"] != before
        assert written is (boundary == 2)  # before the commit nothing, after it everything
        if boundary == 1:  # nothing happened: migrating again takes the dead process's lease
            assert cli("migrate", run_id, "--workflow", new).exit_code == 0
        assert cli("show", run_id).data["migrated_from"]
        finished = approve_and_resume(cli, run_id, ask)
        assert finished["status"] == "completed"
        assert [e["node"] for e in cli("trace", run_id).data["entries"]][-1] == "audit"
        assert verified(cli, run_id)


# --- verify re-derives the migration ------------------------------------------------------


def test_a_tampered_migration_fails_verification(cli: Cli):
    ask = parked(cli)
    assert cli("migrate", "r", "--workflow", version(cli, "v2.yaml", *ADD_AUDIT)).exit_code == 0
    approve_and_resume(cli, "r", ask)
    with sqlite3.connect(cli.db_file) as con:  # the journal now claims another mapping
        rows = con.execute(
            "SELECT seq, payload FROM journal WHERE run_id = 'r' AND record_kind = 'migrate'"
        ).fetchall()
        assert len(rows) == 1
        seq, payload = rows[0]
        assert '"restart_at_entry":false' in payload
        con.execute(
            "UPDATE journal SET payload = ? WHERE run_id = 'r' AND seq = ?",
            (payload.replace('"restart_at_entry":false', '"restart_at_entry":true'), seq),
        )

    done = cli("verify", "r")

    assert done.exit_code == 1 and done.data["verified"] is False
    assert "migration" in done.data["diverged_at"]["what"]


def test_a_fork_of_a_migrated_run_lives_on_the_version_of_its_checkpoint(cli: Cli):
    parked(cli)
    first = cli("show", "r").data["plan_hash"]
    moved = cli("migrate", "r", "--workflow", version(cli, "v2.yaml", *ADD_AUDIT)).data

    before = cli("fork", "r", "--at", "2").data  # the park, written before the migration
    after = cli("fork", "r").data  # the latest: the migrated checkpoint

    assert before["status"] == after["status"] == "parked"
    assert before["plan_hash"] == first and "migrated_from" not in before
    assert after["plan_hash"] == moved["to"] and "migrated_from" not in after
    ask = after["asks"][0]["ask_id"]
    assert approve_and_resume(cli, after["run_id"], ask)["status"] == "completed"
    assert [e["node"] for e in cli("trace", after["run_id"]).data["entries"]][-1] == "audit"
    assert verified(cli, before["run_id"]) and verified(cli, after["run_id"])


def test_on_postgresql_too_a_parked_run_migrates_resumes_and_verifies(cli: Cli, postgres_url: str):
    def on_pg(*args: str, code: int = 0) -> dict[str, Any]:
        done = cli.raw(*args, "--db", postgres_url, "--json")
        assert done.exit_code == code, done
        return dict(done.data)

    on_pg("run", cli.flow("approval.yaml"), "--run-id", "p1", code=3)
    moved = on_pg("migrate", "p1", "--workflow", version(cli, "v2.yaml", *ADD_AUDIT))
    gone = version(
        cli,
        "v3.yaml",
        ("  - id: approve\n", "  - id: gate\n"),
        ("to: approve", "to: gate"),
        ("from: approve", "from: gate"),
        ("from: approve", "from: gate"),
    )
    refused = on_pg("migrate", "p1", "--workflow", gone, code=2)["error"]
    (ask,) = on_pg("asks", "p1")["asks"]
    on_pg("approve", "p1", ask["ask_id"], "--as", "bob")

    finished = on_pg("resume", "p1")

    assert refused["code"] == "PLAIT-E030"
    assert finished["status"] == "completed" and finished["plan_hash"] == moved["to"]
    assert finished["migrated_from"] == [moved["from"]]
    assert on_pg("verify", "p1")["verified"] is True


def test_a_worker_drives_a_migrated_failed_run_on_by_itself(cli: Cli):
    broken = version(
        cli,
        "broken.yaml",
        (
            'take_yes: {python: "contract_tools:take_yes"}',
            'take_yes: {python: "contract_tools:boom"}',
        ),
    )
    assert cli("run", broken, "--run-id", "f").exit_code == 3
    approve_and_resume(cli, "f", cli.only_ask("f")["ask_id"])
    assert cli("migrate", "f", "--workflow", cli.flow("approval.yaml")).exit_code == 0

    done = cli("worker", "--once")

    assert done.data["statuses"] == {"completed": 1}, done.data
    assert cli("show", "f").data["context"]["branch"] == "approved"
    assert verified(cli, "f")
