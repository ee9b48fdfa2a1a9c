"""`raise-budget AXIS=VALUE`, `fork --at/--workflow/--budget`, `gc --older-than`, `worker`."""

from __future__ import annotations

import json

import pytest

from contract.support import HOUR, T0, Cli

DAY = 24 * HOUR

# -- raise-budget ------------------------------------------------------------------------------


def test_raise_budget_then_resume_goes_on(cli: Cli):
    cli.run("loop.yaml", "r1")

    raised = cli("raise-budget", "r1", "supersteps=20")
    resumed = cli("resume", "r1")

    assert raised.exit_code == 0
    assert raised.data == {"run_id": "r1", "accepted": True, "budgets": {"max_supersteps": 20}}
    assert resumed.exit_code == 0 and resumed.data["context"] == {"i": 10, "finished": True}


@pytest.mark.parametrize("item", ["supersteps=2.5", "tokens=0.5", "storage_bytes=1e-3"])
def test_raise_budget_refuses_a_fraction_of_a_count(cli: Cli, item):
    cli.run("loop.yaml", "r1")

    done = cli("raise-budget", "r1", item)

    assert done.exit_code == 2, done
    error = done.data["error"]
    assert error["code"] == "PLAIT-E019" and "must be a whole number" in error["message"]
    assert cli("resume", "r1").data["status"] == "budget_exhausted"  # nothing was raised


def test_raise_budget_keeps_each_axis_in_its_unit(cli: Cli):
    cli.run("loop.yaml", "r1")

    done = cli(
        "raise-budget",
        "r1",
        "usd=2.5",
        "wall_s=3",
        "wall_ms=5000",
        "tokens=100",
        "storage_bytes=9",
    )

    assert done.data["budgets"] == {
        "max_usd_micros": 2_500_000,
        "max_wall_ms": 5000,
        "max_tokens": 100,
        "max_storage_bytes": 9,
    }


@pytest.mark.parametrize(
    "ceiling",
    [
        "speed=1",
        "supersteps",
        "supersteps=",
        "supersteps=-1",
        "supersteps=inf",
        "tokens=1e400",
        "usd=nan",
    ],
)
def test_a_bad_ceiling_is_e019(cli: Cli, ceiling):
    cli.run("loop.yaml", "r1")

    done = cli("raise-budget", "r1", ceiling)

    assert (done.exit_code, done.code) == (2, "PLAIT-E019")


def test_raise_budget_of_an_unknown_run_is_e017(cli: Cli):
    done = cli("raise-budget", "nope", "supersteps=5")

    assert (done.exit_code, done.code) == (2, "PLAIT-E017")


# -- fork --------------------------------------------------------------------------------------


def test_fork_at_a_superstep_with_a_budget_and_the_base_is_untouched(cli: Cli):
    base = cli.run("loop.yaml", "base").data

    fork = cli("fork", "base", "--at", "2", "--budget", "supersteps=50")

    assert fork.exit_code == 0
    assert fork.data["run_id"].startswith("base-fork-")
    assert fork.data["context"] == {"i": 10, "finished": True}
    assert cli("show", "base").data == base


THREE_TURNS = """\
name: three-turns
nodes:
  - {id: one, instruction: First.}
  - {id: two, instruction: Second.}
  - {id: three, instruction: Third.}
edges:
  - {from: one, to: two}
  - {from: two, to: three}
llm: {model: "scripted:three_turns.json", max_tokens: 100}
budgets: {max_tokens: 150}
"""


def test_a_fork_goes_on_with_the_scripted_responses_its_history_has_not_used(cli: Cli):
    """CONTRACT.md: the n-th LLM effect of the run gets the n-th response. A fork's run
    holds its base's turns up to the fork point (and its base's base's), so it continues
    the script where its history left it."""
    usage = {"usage": {"input_tokens": 100, "output_tokens": 10}}  # 110 tokens a turn
    answers = [{"text": json.dumps({key: n}), **usage} for n, key in enumerate("abc", 1)]
    (cli.folder / "three_turns.json").write_text(json.dumps(answers))
    (cli.folder / "three_turns.yaml").write_text(THREE_TURNS)
    base = cli.run("three_turns.yaml", "base")
    assert (base.data["status"], base.data["context"]) == ("budget_exhausted", {"a": 1})

    first = cli("fork", "base", "--budget", "tokens=250")
    second = cli("fork", first.data["run_id"], "--budget", "tokens=400000")

    assert (first.data["status"], first.data["context"]) == ("budget_exhausted", {"a": 1, "b": 2})
    assert second.exit_code == 0, second
    assert second.data["context"] == {"a": 1, "b": 2, "c": 3}
    assert cli("verify", "--all").data["failed"] == 0


def test_fork_onto_another_workflow_file(cli: Cli):
    cli.run("loop.yaml", "base")
    bigger = (
        (cli.folder / "loop.yaml").read_text().replace("max_supersteps: 4", "max_supersteps: 40")
    )
    (cli.folder / "loop-v2.yaml").write_text(bigger)

    done = cli("fork", "base", "--workflow", cli.flow("loop-v2.yaml"))

    assert done.exit_code == 0, done
    assert done.data["status"] == "completed"


def test_fork_refusals(cli: Cli):
    cli.run("loop.yaml", "base")

    assert cli("fork", "nope").code == "PLAIT-E017"
    assert cli("fork", "base", "--at", "99").code == "PLAIT-E017"
    assert cli("fork", "base", "--workflow", cli.flow("approval.yaml")).code == "PLAIT-E010"
    assert cli("fork", "base", "--budget", "speed=3").code == "PLAIT-E019"


# -- gc ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("age", "later", "deleted"), [("30d", 31 * DAY, True), ("12h", 11 * HOUR, False)]
)
def test_gc_deletes_finished_runs_older_than_the_duration(cli: Cli, age, later, deleted):
    cli.run("outcomes.yaml", "done", "--input", '{"route": "end"}')
    cli.run("approval.yaml", "parked")

    done = cli("gc", "--older-than", age, now=T0 + later)

    assert done.exit_code == 0
    expected = {"deleted": 1, "runs": ["done"]} if deleted else {"deleted": 0, "runs": []}
    assert done.data == expected
    assert "parked" in cli.run_ids()


@pytest.mark.parametrize(
    "after_it_ended", [("cancel", "done", "--reason", "late"), ("send", "done", "hello")]
)
def test_gc_deletes_a_finished_run_that_a_cancel_or_a_message_reached_after_it_ended(
    cli: Cli, after_it_ended
):
    cli.run("outcomes.yaml", "done", "--input", '{"route": "end"}')
    assert cli(*after_it_ended).data == {"run_id": "done", "accepted": True}

    done = cli("gc", "--older-than", "1h", now=T0 + 2 * HOUR)

    assert (done.exit_code, done.data) == (0, {"deleted": 1, "runs": ["done"]})
    assert cli.run_ids() == []


def test_gc_keeps_a_budget_exhausted_run_whose_budget_was_raised(cli: Cli):
    cli.run("loop.yaml", "spent")
    cli("raise-budget", "spent", "supersteps=50")

    done = cli("gc", "--older-than", "1h", now=T0 + 2 * HOUR)

    assert done.data == {"deleted": 0, "runs": []}
    assert cli("resume", "spent", now=T0 + 2 * HOUR).data["status"] == "completed"


def test_gc_of_a_bad_duration_is_e019(cli: Cli):
    done = cli("gc", "--older-than", "30 days")

    assert (done.exit_code, done.code) == (2, "PLAIT-E019")


# -- worker ------------------------------------------------------------------------------------


def test_worker_drives_a_queued_run_with_the_model_it_was_started_with(cli: Cli):
    # `run --detach --model` pins the override: the worker resumes with it, not with the
    # model the workflow file names (which would no longer match the pin, PLAIT-E010).
    cli.run("agent.yaml", "m1", "--detach", "--model", "scripted:models/by_node.json")

    done = cli("worker", "--once")

    assert done.exit_code == 0, done.data
    assert done.data["statuses"] == {"completed": 1}
    shown = cli("show", "m1").data
    assert shown["status"] == "completed"
    assert cli("verify", "m1").data["verified"] is True


def test_worker_once_drives_a_queued_run(cli: Cli):
    cli.run("approval.yaml", "r1", "--detach")

    done = cli("worker", "--once", "--concurrency", "2")

    assert done.exit_code == 0
    assert done.data["driven"] == 1 and done.data["statuses"] == {"parked": 1}
    assert cli("show", "r1").data["status"] == "parked"
