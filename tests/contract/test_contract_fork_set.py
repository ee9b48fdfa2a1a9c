"""`plait fork RUN_ID --at N --set KEY=JSON ... [--as PRINCIPAL]` (issue #16, part 6).

A fork whose context has some keys replaced (LangGraph's ``update_state``): the edit is
journaled in the fork's ``fork`` record with the principal who made it, and ``verify``
rebuilds the fork's seed checkpoint from the base's checkpoint with that edit, so a
tampered edit or seed fails verification like any other event.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from typing import Any

import pytest

from contract.support import HOUR, T0, Cli
from plait.core.canonical import dumpb
from plait.store import open_store

DAY = 24 * HOUR

SUMS = """\
name: sums
nodes:
  - {id: a, tool: one}
  - {id: b, tool: one}
edges:
  - {from: a, to: b}
reducers: {x: sum}
tools:
  one: {python: "contract_tools:one"}
"""


def fork_record(cli: Cli, run_id: str) -> dict[str, Any]:
    """The body of the fork's journaled ``fork`` record."""
    store = open_store(cli.db)
    try:
        (record,) = [r for r in store.load_journal(run_id).records if r.kind == "fork"]
        return dict(record.body)
    finally:
        store.close()


def seed_seq(cli: Cli, run_id: str) -> int:
    """The journal seq of the fork's seed: the checkpoint just before its fork record."""
    db = sqlite3.connect(cli.db_file)
    (seq,) = db.execute(
        "SELECT seq FROM journal WHERE run_id = ? AND item = 'record' AND record_kind = 'fork'",
        (run_id,),
    ).fetchone()
    db.close()
    return int(seq) - 1


def rewrite_row(cli: Cli, run_id: str, seq: int, change: Any) -> None:
    """Replace the inline JSON of journal row ``seq`` by ``change(value)``, keeping its
    SHA-256 and size consistent, as a tamperer with write access to the store could."""
    db = sqlite3.connect(cli.db_file)
    (payload,) = db.execute(
        "SELECT payload FROM journal WHERE run_id = ? AND seq = ?", (run_id, seq)
    ).fetchone()
    stored = json.loads(payload)
    assert set(stored) == {"j"}, "small rows are stored whole, as {'j': value}"
    value = change(stored["j"])
    data = dumpb(value)
    db.execute(
        "UPDATE journal SET payload = ?, sha256 = CASE WHEN sha256 IS NULL THEN NULL ELSE ? END,"
        " size = CASE WHEN size IS NULL THEN NULL ELSE ? END WHERE run_id = ? AND seq = ?",
        (
            json.dumps({"j": value}, separators=(",", ":")),
            hashlib.sha256(data).hexdigest(),
            len(data),
            run_id,
            seq,
        ),
    )
    db.commit()
    db.close()


# -- the edit ----------------------------------------------------------------------------------


def test_set_replaces_a_context_key_and_the_fork_goes_on_with_it(cli: Cli):
    base = cli.run("loop.yaml", "base").data

    fork = cli("fork", "base", "--at", "2", "--set", "i=8", "--budget", "supersteps=50")

    assert fork.exit_code == 0, fork
    # At superstep 2 the base had i=2; from i=8 the loop needs two more counts, then finish.
    assert fork.data["context"] == {"i": 10, "finished": True}
    assert fork.data["spent"]["supersteps"] == 5
    assert cli("show", "base").data == base
    assert cli("verify", fork.data["run_id"]).data["verified"] is True


def test_set_replaces_the_value_whole_without_the_keys_reducer(cli: Cli):
    (cli.folder / "sums.yaml").write_text(SUMS)
    assert cli.run("sums.yaml", "base").data["context"] == {"x": 2}

    fork = cli("fork", "base", "--at", "1", "--set", "x=100")

    # x: sum would make 1 + 100 at the fork point; the edit replaces it, then b adds 1.
    assert fork.data["context"] == {"x": 101}


def test_set_may_add_new_keys_of_any_json_value(cli: Cli):
    cli.run("loop.yaml", "base")

    fork = cli(
        "fork", "base", "--at", "2", "--set", 'note={"by": ["ops", 1.0]}', "--set", "flag=null"
    )

    assert {"note": {"by": ["ops", 1.0]}, "flag": None}.items() <= fork.data["context"].items()
    assert cli("verify", fork.data["run_id"]).data["verified"] is True


def test_the_edit_and_its_principal_are_journaled_in_the_fork_record(cli: Cli):
    cli.run("loop.yaml", "base")

    fork = cli("fork", "base", "--at", "2", "--set", "i=8", "--set", "a=[1]", "--as", "bob")

    fork_id = fork.data["run_id"]
    record = fork_record(cli, fork_id)
    assert record == {"from_run": "base", "from_seq": record["from_seq"], "by": "bob",
                      "set": {"a": [1], "i": 8}}  # fmt: skip
    assert list(record["set"]) == ["a", "i"]  # sorted, as the core applies them
    listed = {r["run_id"]: r["principal"] for r in cli("runs").data["runs"]}
    assert listed == {"base": "alice", fork_id: "bob"}


def test_a_fork_without_set_journals_who_made_it_and_no_edit(cli: Cli):
    cli.run("loop.yaml", "base")

    fork = cli("fork", "base", "--at", "2", principal="carol")

    record = fork_record(cli, fork.data["run_id"])
    assert record["by"] == "carol" and "set" not in record
    assert cli("verify", fork.data["run_id"]).data["verified"] is True


def test_who_edited_a_forks_state_cannot_approve_its_requests(cli: Cli):
    cli.run("approval.yaml", "base")
    fork_id = cli("fork", "base", "--at", "1", "--set", "started=true", "--as", "bob").data[
        "run_id"
    ]
    refork_id = cli("fork", fork_id, "--as", "carol").data["run_id"]

    def approve(run_id: str, who: str) -> Any:
        ask_id = cli.only_ask(run_id)["ask_id"]
        return cli("approve", run_id, ask_id, "--as", who)

    assert approve(fork_id, "bob").code == "PLAIT-E012"  # bob made this state
    assert approve(refork_id, "bob").code == "PLAIT-E012"  # and the state it was forked from
    assert approve(fork_id, "alice").code == "PLAIT-E012"  # the run's principal, as ever
    assert approve(fork_id, "dave").exit_code == 0
    assert approve(refork_id, "carol").exit_code == 0  # carol forked without an edit


@pytest.mark.parametrize(
    "items",
    [
        ["i"],  # no '='
        ["=1"],  # no key
        ["i={"],  # not JSON
        ["i=NaN"],  # not JSON either (canonical JSON has no NaN)
        ['i={"a": 1, "a": 2}'],  # a key twice in one object
        ["i=1", "i=2"],  # the same key twice
        ["$inbox=[]"],  # reserved: the steering messages the journal delivered
        ["$send=[]"],  # reserved: a result's spawn request, never context
    ],
)
def test_a_bad_set_item_is_refused_naming_it_and_nothing_is_created(cli: Cli, items):
    cli.run("loop.yaml", "base")

    done = cli("fork", "base", "--at", "2", *[a for item in items for a in ("--set", item)])

    assert (done.exit_code, done.code) == (2, "PLAIT-E019")
    assert done.data["error"]["message"].startswith(f"--set {items[-1]!r}: ")
    assert cli.run_ids() == ["base"]


def test_set_on_a_run_without_a_checkpoint_is_refused_and_nothing_is_created(cli: Cli):
    cli.run("loop.yaml", "queued", "--detach")

    done = cli("fork", "queued", "--set", "i=8")

    assert (done.exit_code, done.code) == (2, "PLAIT-E019")
    assert cli.run_ids() == ["queued"]


def test_a_bad_principal_is_refused_and_nothing_is_created(cli: Cli):
    cli.run("loop.yaml", "base")

    done = cli("fork", "base", "--set", "i=8", "--as", " bob ")

    assert (done.exit_code, done.code) == (2, "PLAIT-E019")
    assert cli.run_ids() == ["base"]


# -- verify ------------------------------------------------------------------------------------


def test_forks_of_forks_with_edits_verify(cli: Cli):
    cli.run("loop.yaml", "base")
    first = cli("fork", "base", "--at", "2", "--set", "i=5").data["run_id"]

    second = cli("fork", first, "--at", "3", "--set", "i=8", "--budget", "supersteps=50")

    assert second.data["context"] == {"i": 10, "finished": True}
    verified = cli("verify", "--all").data
    assert (verified["verified"], verified["failed"]) == (3, 0)


def test_a_fork_onto_another_workflow_with_an_edit_verifies(cli: Cli):
    cli.run("loop.yaml", "base")
    loop = (cli.folder / "loop.yaml").read_text()
    bigger = loop.replace("max_supersteps: 4", "max_supersteps: 9")
    (cli.folder / "loop-v2.yaml").write_text(bigger)

    fork = cli("fork", "base", "--at", "2", "--set", "i=7", "--workflow", cli.flow("loop-v2.yaml"))

    assert fork.data["context"] == {"i": 10, "finished": True}
    assert cli("verify", fork.data["run_id"]).data["verified"] is True


@pytest.mark.parametrize(
    ("what", "change"),
    [
        ("the edited value", lambda body: {**body, "set": {"i": 9}}),
        ("the edit dropped", lambda body: {k: v for k, v in body.items() if k != "set"}),
        ("the base checkpoint", lambda body: {**body, "from_seq": body["from_seq"] - 4}),
        ("a reserved key", lambda body: {**body, "set": {**body["set"], "$inbox": []}}),
    ],
)
def test_a_tampered_fork_record_fails_verification_at_the_seed(cli: Cli, what, change):
    cli.run("loop.yaml", "base")
    fork_id = cli("fork", "base", "--at", "2", "--set", "i=8").data["run_id"]
    assert cli("verify", fork_id).data["verified"] is True

    rewrite_row(cli, fork_id, seed_seq(cli, fork_id) + 1, change)
    done = cli("verify", fork_id)

    assert done.exit_code == 1, what
    assert done.data["verified"] is False
    assert done.data["error"].startswith("PLAIT-E009 superstep 2: ")
    assert done.data["diverged_at"]["superstep"] == 2
    assert "seed" in done.data["diverged_at"]["what"]


def test_a_tampered_seed_checkpoint_fails_verification_at_the_seed(cli: Cli):
    """The seed's bytes, SHA-256 and size rewritten alike (the edit i=8 made i=9): only
    rebuilding the seed from the base finds it there, not at a later checkpoint."""
    cli.run("loop.yaml", "base")
    fork_id = cli("fork", "base", "--at", "2", "--set", "i=8").data["run_id"]

    def nine(checkpoint: dict[str, Any]) -> dict[str, Any]:
        scheduler = {**checkpoint["scheduler"], "context": {"i": 9}}
        return {**checkpoint, "scheduler": scheduler}

    rewrite_row(cli, fork_id, seed_seq(cli, fork_id), nine)
    done = cli("verify", fork_id)

    assert done.exit_code == 1
    assert done.data["diverged_at"]["superstep"] == 2
    assert "seed checkpoint" in done.data["diverged_at"]["what"]
    assert "scheduler.context" in done.data["diverged_at"]["what"]


def test_a_fork_whose_base_was_collected_verifies_with_a_note_that_its_seed_was_not_checked(
    cli: Cli,
):
    cli.run("loop.yaml", "base")
    fork_id = cli("fork", "base", "--at", "2", "--set", "i=8", now=T0 + 2 * DAY).data["run_id"]
    assert cli("gc", "--older-than", "1d", now=T0 + 2 * DAY).data["runs"] == ["base"]

    done = cli("verify", fork_id)

    assert done.exit_code == 0
    assert done.data["verified"] is True
    assert done.data["note"] == (
        "the fork's seed (superstep 2) was not checked: its base run 'base' is no longer"
        " in the store"
    )


def test_verify_of_a_fork_with_its_base_present_has_no_note(cli: Cli):
    cli.run("loop.yaml", "base")
    fork_id = cli("fork", "base", "--at", "2", "--set", "i=8").data["run_id"]

    assert "note" not in cli("verify", fork_id).data


def test_on_postgresql_too_a_fork_with_an_edit_goes_on_with_it_and_verifies(
    cli: Cli, postgres_url: str
):
    def on_pg(*args: str) -> dict[str, Any]:
        done = cli.raw(*args, "--db", postgres_url, "--json")
        assert done.exit_code in (0, 1), done
        return done.data

    on_pg("run", cli.flow("loop.yaml"), "--run-id", "base")

    fork = on_pg("fork", "base", "--at", "2", "--set", "i=8", "--budget", "supersteps=50")

    assert fork["context"] == {"i": 10, "finished": True}
    assert on_pg("verify", fork["run_id"])["verified"] is True
