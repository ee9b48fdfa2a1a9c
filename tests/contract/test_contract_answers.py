"""Verbs that journal what people decide: `asks`, `respond`, `approve`, `deny`, `send`,
`cancel` — `{"run_id", "accepted": true, ...}` and exit 0, or a refusal and exit 2."""

from __future__ import annotations

import pytest

from contract.support import ASK_KEYS, Cli


@pytest.fixture
def parked(cli: Cli) -> str:
    """The ask id of run `r1`, parked on an approval."""
    assert cli.run("approval.yaml", "r1").exit_code == 3
    return str(cli.only_ask("r1")["ask_id"])


def test_asks_lists_pending_asks_with_every_field(cli: Cli, parked: str):
    cli.run("question.yaml", "r2")

    one = cli("asks", "r1")
    every = cli("asks")

    assert one.exit_code == every.exit_code == 0
    (ask,) = one.data["asks"]
    assert set(ask) >= ASK_KEYS and ask["ask_id"] == parked
    assert sorted(a["node"] for a in every.data["asks"]) == ["approve", "details"]


@pytest.mark.parametrize("principal", [" alice ", "alice\n", "\talice", "a\x85b"])
def test_a_principal_spelled_two_ways_is_e019_not_another_person(
    cli: Cli, parked: str, principal: str
):
    # " alice " is not bob: a principal has one spelling, so no approval of one's own run
    # slips past PLAIT-E012 through whitespace (nor a run starts under such a name).
    done = cli("approve", "r1", parked, "--as", principal)

    assert (done.exit_code, done.code) == (2, "PLAIT-E019"), done
    assert "principal" in done.data["error"]["message"]
    assert cli.only_ask("r1")["ask_id"] == parked  # nothing was journaled
    started = cli.run("approval.yaml", "r9", "--as", principal)
    assert (started.exit_code, started.code) == (2, "PLAIT-E019"), started
    assert "r9" not in cli.run_ids()


def test_approve_as_another_principal_with_a_reason(cli: Cli, parked: str):
    done = cli("approve", "r1", parked, "--as", "bob", "--reason", "looks fine")

    assert done.exit_code == 0
    assert done.data == {"run_id": "r1", "ask_id": parked, "accepted": True, "by": "bob"}
    resumed = cli("resume", "r1")
    assert resumed.exit_code == 0
    assert resumed.data["context"] == {
        "started": True,
        "approved": True,
        "by": "bob",
        "reason": "looks fine",
        "branch": "approved",
    }


def test_deny_takes_the_other_branch(cli: Cli, parked: str):
    done = cli("deny", "r1", parked, "--reason", "not today", principal="bob")

    assert done.exit_code == 0 and done.data["accepted"] is True
    context = cli("resume", "r1").data["context"]
    assert (context["approved"], context["reason"], context["branch"]) == (
        False,
        "not today",
        "denied",
    )


def test_refusals_exit_2_with_their_codes(cli: Cli, parked: str):
    assert cli("approve", "r1", parked).code == "PLAIT-E012"  # the run's own principal
    assert cli("approve", "r1", "no-such-ask", "--as", "bob").code == "PLAIT-E011"
    assert cli("approve", "nope", parked, "--as", "bob").code == "PLAIT-E017"
    assert cli("approve", "r1", parked, "--as", "bob").exit_code == 0
    again = cli("deny", "r1", parked, "--as", "carol", "--reason", "late")
    assert (again.exit_code, again.code) == (2, "PLAIT-E011")


def test_respond_result_and_deny(cli: Cli):
    cli.run("question.yaml", "r1")
    ask_id = cli.only_ask("r1")["ask_id"]

    wrong = cli("respond", "r1", ask_id, "--result", '{"acct": 1}')
    both = cli("respond", "r1", ask_id, "--result", "{}", "--deny", "no")
    neither = cli("respond", "r1", ask_id)
    bad_json = cli("respond", "r1", ask_id, "--result", "{nope")
    right = cli("respond", "r1", ask_id, "--result", '{"account": "ACC-1"}', "--as", "bob")

    assert (wrong.exit_code, wrong.code) == (2, "PLAIT-E028")
    assert (both.exit_code, both.code) == (2, "PLAIT-E019")  # a usage error
    assert (neither.exit_code, neither.code) == (2, "PLAIT-E019")
    assert (bad_json.exit_code, bad_json.code) == (2, "PLAIT-E019")
    assert "--result" in bad_json.data["error"]["message"]
    assert right.exit_code == 0
    assert right.data == {"run_id": "r1", "ask_id": ask_id, "accepted": True, "by": "bob"}
    finished = cli("resume", "r1").data
    assert finished["status"] == "completed" and finished["context"]["account"] == "ACC-1"


def test_respond_deny_on_a_free_form_ask_fails_the_run(cli: Cli):
    cli.run("question.yaml", "r1")
    ask_id = cli.only_ask("r1")["ask_id"]

    assert cli("respond", "r1", ask_id, "--deny", "no account").exit_code == 0

    done = cli("resume", "r1")
    assert done.exit_code == 1
    assert done.data["outcome"]["kind"] == "failed" and done.data["outcome"]["node"] == "details"


def test_send_and_cancel_are_accepted(cli: Cli, parked: str):
    sent = cli("send", "r1", "please hurry")
    canceled = cli("cancel", "r1", "--reason", "no longer needed")

    assert (sent.exit_code, sent.data) == (0, {"run_id": "r1", "accepted": True})
    assert (canceled.exit_code, canceled.data) == (0, {"run_id": "r1", "accepted": True})
    done = cli("resume", "r1")
    assert done.exit_code == 1
    assert done.data["status"] == "canceled"
    assert done.data["outcome"] == {
        "kind": "canceled",
        "detail": "canceled by alice: no longer needed",
        "by": "alice",
        "reason": "no longer needed",
    }
    assert cli("show", "r1").exit_code == 1


@pytest.mark.parametrize(
    "args",
    [
        ("send", "nope", "hi"),
        ("cancel", "nope"),
        ("asks", "nope"),
        ("respond", "nope", "a", "--result", "1"),
    ],
    ids=["send", "cancel", "asks", "respond"],
)
def test_an_unknown_run_is_e017(cli: Cli, args):
    done = cli(*args)

    assert (done.exit_code, done.code) == (2, "PLAIT-E017")
