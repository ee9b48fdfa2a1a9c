"""Verbs that read runs back: `show`, `trace`, `runs`, `verify` (one id, several, --all)."""

from __future__ import annotations

import sqlite3

import pytest

from contract.support import ASK_KEYS, HOUR, RUN_OBJECT_KEYS, SPENT_KEYS, T0, TRACE_KEYS, Cli

# -- show --------------------------------------------------------------------------------------


def test_show_of_a_parked_run_exits_3_with_outcome_null_and_the_asks(cli: Cli):
    cli.run("approval.yaml", "r1")

    done = cli("show", "r1", now=T0 + HOUR)

    assert done.exit_code == 3
    run = done.data
    assert set(run) >= RUN_OBJECT_KEYS
    assert run["status"] == "parked" and run["outcome"] is None
    (ask,) = run["asks"]
    assert set(ask) >= ASK_KEYS
    assert (ask["node"], ask["approval"], ask["expires_at"]) == ("approve", True, T0 // 1000 + 3600)
    assert ask == cli.only_ask("r1")  # the same ask, run_id included, as `asks` lists it
    assert set(run["spent"]) >= SPENT_KEYS


def test_show_exits_with_the_code_of_the_status(cli: Cli):
    cli.run("outcomes.yaml", "ok", "--input", '{"route": "end"}')
    cli.run("outcomes.yaml", "bad", "--input", '{"route": "fail"}')

    assert cli("show", "ok").exit_code == 0
    assert cli("show", "bad").exit_code == 1


def test_elapsed_ms_counts_the_park_and_wall_ms_does_not(cli: Cli):
    cli.run("approval.yaml", "r1")
    ask_id = cli.only_ask("r1")["ask_id"]
    cli("approve", "r1", ask_id, "--as", "bob", now=T0 + HOUR)

    spent = cli("resume", "r1", now=T0 + HOUR).data["spent"]

    assert spent["elapsed_ms"] >= HOUR > spent["wall_ms"]


# -- trace -------------------------------------------------------------------------------------


def test_every_trace_entry_has_every_field(cli: Cli):
    cli.run("outcomes.yaml", "r1", "--input", '{"route": "fail"}')
    cli.run("approval.yaml", "r2")
    cli.run("agent.yaml", "r3")

    for run_id in ("r1", "r2", "r3"):
        done = cli("trace", run_id)
        assert done.exit_code == 0
        assert done.data["run_id"] == run_id
        for entry in done.data["entries"]:
            assert set(entry) >= TRACE_KEYS, entry
            assert ("result" in entry) != ("failure" in entry) or entry["status"] == "pending"
            assert set(entry["usage"]) == {"input_tokens", "output_tokens", "usd_micros"}


def test_trace_kinds_and_statuses(cli: Cli):
    cli.run("outcomes.yaml", "r1", "--input", '{"route": "fail"}')
    cli.run("approval.yaml", "r2")
    cli.run("agent.yaml", "r3")

    failed = cli("trace", "r1").data["entries"]
    parked = cli("trace", "r2").data["entries"]
    agent = cli("trace", "r3").data["entries"]

    assert [(e["node"], e["kind"], e["status"], e["attempt"]) for e in failed] == [
        ("ok", "tool", "completed", 1),
        ("fail", "tool", "failed", 1),
        ("fail", "tool", "failed", 2),
    ]
    assert failed[1]["failure"] == {"cause": "ExecutorError", "detail": "ValueError: kaboom"}
    assert [(e["kind"], e["status"]) for e in parked] == [("tool", "completed"), ("ask", "pending")]
    assert [(e["kind"], e["effect_seq"]) for e in agent] == [
        ("llm", 0),
        ("tool", 1),
        ("llm", 2),
        ("tool", 0),
    ]
    assert agent[0]["usage"] == {"input_tokens": 12, "output_tokens": 5, "usd_micros": 0}
    assert agent[1]["input"] == {"q": "x"} and agent[1]["result"] == {"found": "x"}
    assert all(e["task_path"] == "" and e["redeliveries"] == 0 for e in agent)


# -- runs --------------------------------------------------------------------------------------


def test_runs_lists_newest_first_and_filters_by_status(cli: Cli):
    cli.run("approval.yaml", "old")
    cli.run("outcomes.yaml", "new", "--input", '{"route": "end"}', now=T0 + 1000)

    every = cli("runs")
    parked = cli("runs", "--status", "parked")
    wrong = cli("runs", "--status", "sleeping")

    assert every.exit_code == 0
    rows = every.data["runs"]
    assert {"run_id", "workflow", "status", "principal", "created_ms", "updated_ms"} <= set(rows[0])
    assert [r["run_id"] for r in parked.data["runs"]] == ["old"]
    assert (wrong.exit_code, wrong.code) == (2, "PLAIT-E019")


# -- verify ------------------------------------------------------------------------------------


def _tamper(cli: Cli, run_id: str) -> None:
    """Change one journaled tool result (count's i: 2 -> 7): verify must see it."""
    db = sqlite3.connect(cli.db_file)
    rows = db.execute(
        "SELECT seq, payload FROM journal WHERE run_id = ? AND item = 'result' ORDER BY seq",
        (run_id,),
    ).fetchall()
    seq, payload = rows[1]
    assert '"i":2' in payload, payload
    db.execute(
        "UPDATE journal SET payload = ? WHERE run_id = ? AND seq = ?",
        (payload.replace('"i":2', '"i":7'), run_id, seq),
    )
    db.commit()
    db.close()


def test_verify_one_run(cli: Cli):
    cli.run("loop.yaml", "r1")

    done = cli("verify", "r1")

    assert done.exit_code == 0
    assert done.data == {"run_id": "r1", "verified": True, "checkpoints": 5, "up_to": "terminal"}


def test_verify_of_a_parked_and_of_a_queued_run(cli: Cli):
    cli.run("approval.yaml", "parked")
    cli.run("approval.yaml", "queued", "--detach")

    assert cli("verify", "parked").data["up_to"] == "park"
    queued = cli("verify", "queued")
    assert queued.exit_code == 0
    assert queued.data["up_to"] == "superstep 0"  # CONTRACT.md: terminal | park | superstep N


def test_a_verification_failure_exits_1_with_the_e009_message(cli: Cli):
    cli.run("loop.yaml", "r1")
    _tamper(cli, "r1")

    done = cli("verify", "r1")

    assert done.exit_code == 1
    report = done.data
    assert report["verified"] is False and report["run_id"] == "r1"
    assert report["error"].startswith("PLAIT-E009 superstep 2:")
    assert report["up_to"] == "superstep 2"


@pytest.mark.parametrize("how", ["ids", "all"])
def test_verify_of_several_runs_counts_them(cli: Cli, how):
    cli.run("loop.yaml", "good")
    cli.run("loop.yaml", "bad")
    _tamper(cli, "bad")

    done = cli("verify", "good", "bad") if how == "ids" else cli("verify", "--all")

    assert done.exit_code == 1
    report = done.data
    assert (report["verified"], report["failed"]) == (1, 1)
    assert sorted(r["run_id"] for r in report["runs"]) == ["bad", "good"]
    assert all({"run_id", "verified", "checkpoints", "up_to"} <= set(r) for r in report["runs"])


def test_verify_all_of_good_runs_exits_0(cli: Cli):
    cli.run("loop.yaml", "a")
    cli.run("approval.yaml", "b")

    done = cli("verify", "--all")

    assert done.exit_code == 0
    assert (done.data["verified"], done.data["failed"]) == (2, 0)


def test_verify_refusals(cli: Cli):
    cli.run("loop.yaml", "r1")

    unknown = cli("verify", "r1", "nope")
    nothing = cli("verify")

    assert (unknown.exit_code, unknown.code) == (2, "PLAIT-E017")
    assert (nothing.exit_code, nothing.code) == (2, "PLAIT-E019")


@pytest.mark.parametrize("epoch", [0, 5, 999])
def test_a_run_of_an_unknown_engine_epoch_is_neither_resumed_nor_verified(cli: Cli, epoch: int):
    cli.run("approval.yaml", "r1")
    db = sqlite3.connect(cli.db_file)
    (payload,) = db.execute("SELECT payload FROM manifests WHERE run_id = 'r1'").fetchone()
    assert '"engine_epoch":4' in payload, payload  # new runs are written by epoch 4
    db.execute(
        "UPDATE manifests SET payload = ? WHERE run_id = 'r1'",
        (payload.replace('"engine_epoch":4', f'"engine_epoch":{epoch}'),),
    )
    db.commit()
    db.close()

    resumed = cli("resume", "r1")
    verified = cli("verify", "r1")

    assert (resumed.exit_code, resumed.code) == (2, "PLAIT-E026")
    assert verified.exit_code == 1
    assert verified.data["verified"] is False
    assert verified.data["error"].startswith("PLAIT-E026")
    assert f"engine epoch {epoch};" in verified.data["error"]


def test_a_fork_of_a_parked_run_answered_and_resumed_verifies(cli: Cli):
    cli.run("approval.yaml", "base")
    fork_id = cli("fork", "base").data["run_id"]
    ask_id = cli.only_ask(fork_id)["ask_id"]
    cli("approve", fork_id, ask_id, "--as", "bob")

    assert cli("resume", fork_id).exit_code == 0

    done = cli("verify", fork_id)
    assert done.exit_code == 0, done
    assert done.data["up_to"] == "terminal"
