"""Ask identity and the order answers are checked in (docs/architecture.md §3.4, §8).

Ask ids are call ids of journal keys: unique per run, node generation and ordinal.
An answer is refused with E011 (unknown, settled or expired ask), E012 (the owner
approving) or E028 (malformed), each refusal leaving a `rejected_response` record
and never counting as the first answer.
"""

from __future__ import annotations

import pytest

from hitl.support import OWNER, SECOND, T0, Plait

TTL = 60 * SECOND  # account.yaml: asks: {ttl_s: 60}
EXPIRED = T0 + TTL + SECOND  # expires_at is T0/1000 + 60; refused once the second is past it


def answer(plait: Plait, run_id: str, ask_id: str, value: str, **kw):
    return plait("respond", run_id, ask_id, "--result", value, **kw)


def rejections(plait: Plait, run_id: str) -> list[tuple[str, str]]:
    return [(r.body["ask_id"], r.body["code"]) for r in plait.records(run_id, "rejected_response")]


def test_ask_ids_differ_per_run(plait: Plait):
    assert plait.run("approval", "one").returncode == 3
    assert plait.run("approval", "two").returncode == 3
    first, second = plait.only_ask("one"), plait.only_ask("two")
    assert first["node"] == second["node"] == "approve"
    assert first["ask_id"] != second["ask_id"]
    assert len(first["ask_id"]) == 64  # a SHA-256 call id, hex


def test_the_second_generation_of_an_ask_in_a_loop_has_a_new_id(plait: Plait):
    assert plait.run("account", "loop").returncode == 3
    first = plait.only_ask("loop")
    t1, t2 = T0 + 10 * SECOND, T0 + 50 * SECOND
    assert answer(plait, "loop", first["ask_id"], '{"account": "again"}', now=t1).returncode == 0
    parked = plait("resume", "loop", now=t1)
    assert parked.returncode == 3, parked
    second = plait.only_ask("loop")
    assert second["node"] == "account" and second["ask_id"] != first["ask_id"]
    assert second["input"] == {"started": True, "account": "again"}
    assert second["expires_at"] == t1 // 1000 + 60  # its own ttl, from when it was asked
    # The first generation's id is settled now: answering it again is refused.
    stale = answer(plait, "loop", first["ask_id"], '{"account": "x"}', now=t1)
    assert (stale.returncode, stale.code) == (2, "PLAIT-E011")
    assert answer(plait, "loop", second["ask_id"], '{"account": "acme"}', now=t2).returncode == 0
    done = plait("resume", "loop", now=t2)
    assert done.returncode == 0, done
    assert done.data["context"] == {"started": True, "account": "acme", "finished": True}
    # Two parks: both waits count as elapsed time, neither as wall time.
    assert (done.data["spent"]["elapsed_ms"], done.data["spent"]["wall_ms"]) == (50 * SECOND, 0)
    # Attempts are monotone per node across generations: the keys differ by attempt.
    attempts = [e["attempt"] for e in plait.trace("loop") if e["node"] == "account"]
    assert attempts == [1, 2]
    assert plait.verify("loop")["up_to"] == "terminal"


def test_two_approval_calls_in_one_turn_are_two_asks_told_apart_by_ordinal(plait: Plait):
    calls = [
        {"name": "pay", "arguments": {"amount": 1}},
        {"name": "pay", "arguments": {"amount": 2}},
    ]
    plait.scripted([{"text": "", "tool_calls": calls}, {"text": '{"done": true}'}])
    parked = plait.run("payments", "pay")
    assert parked.returncode == 3, parked
    asks = parked.data["asks"]
    assert len(asks) == 2 and len({a["ask_id"] for a in asks}) == 2
    assert sorted(a["input"]["amount"] for a in asks) == [1, 2]
    assert {(a["node"], a["tool_name"], a["approval"]) for a in asks} == {("agent", "pay", True)}
    # Addressed by id, never by position: approve the amount-2 call first.
    for ask in sorted(asks, key=lambda a: -a["input"]["amount"]):
        assert plait("approve", "pay", ask["ask_id"], principal="bob").returncode == 0
    done = plait("resume", "pay")
    assert done.returncode == 0, done
    assert done.data["context"] == {"done": True}
    paid = [e["result"] for e in plait.trace("pay") if e["kind"] == "tool" and e["node"] == "agent"]
    assert sorted(p["paid"] for p in paid) == [1, 2]
    assert plait.verify("pay")["up_to"] == "terminal"


def test_approved_calls_run_in_the_order_the_model_made_them(plait: Plait):
    calls = [{"name": "pay", "arguments": {"amount": n}} for n in range(1, 7)]
    plait.scripted([{"text": "", "tool_calls": calls}, {"text": '{"done": true}'}])
    asks = plait.run("payments", "pay").data["asks"]
    by_id = [a["input"]["amount"] for a in sorted(asks, key=lambda a: a["ask_id"])]
    assert by_id != [1, 2, 3, 4, 5, 6]  # else this test could not tell the two orders apart

    for ask in sorted(asks, key=lambda a: -a["input"]["amount"]):  # approved last to first
        assert plait("approve", "pay", ask["ask_id"], principal="bob").returncode == 0
    assert plait("resume", "pay").returncode == 0

    ran = [e for e in plait.trace("pay") if e["kind"] == "tool"]
    assert [e["result"]["paid"] for e in sorted(ran, key=lambda e: e["effect_seq"])] == [
        1, 2, 3, 4, 5, 6
    ]  # fmt: skip
    assert plait.verify("pay")["up_to"] == "terminal"


def test_an_unknown_ask_id_is_e011_and_recorded(plait: Plait):
    assert plait.run("question", "q").returncode == 3
    refused = answer(plait, "q", "0" * 64, "{}")
    assert refused.returncode == 2, refused
    assert refused.code == "PLAIT-E011"
    assert rejections(plait, "q") == [("0" * 64, "PLAIT-E011")]
    # A timer's id is not an ask either (nobody answers a timer).
    assert plait.run("timer", "t").returncode == 3
    [timer] = [e for e in plait.trace("t") if e["node"] == "cool_off"]
    assert timer["status"] == "pending"


def test_a_second_answer_to_the_same_ask_is_e011_and_the_first_wins(plait: Plait):
    assert plait.run("question", "q").returncode == 3
    ask = plait.only_ask("q")
    assert answer(plait, "q", ask["ask_id"], '{"note": "first"}').returncode == 0
    again = answer(plait, "q", ask["ask_id"], '{"note": "second"}', principal="bob")
    assert (again.returncode, again.code) == (2, "PLAIT-E011")
    done = plait("resume", "q")
    assert done.returncode == 0, done
    assert done.data["context"]["note"] == "first"
    # ... and again once the run has moved on.
    late = answer(plait, "q", ask["ask_id"], '{"note": "third"}')
    assert (late.returncode, late.code) == (2, "PLAIT-E011")
    assert rejections(plait, "q") == [(ask["ask_id"], "PLAIT-E011")] * 2
    assert [r.body["by"] for r in plait.records("q", "answer")] == [OWNER]


def test_an_expired_ask_is_refused_and_settles_failed_timeout_without_a_retry(plait: Plait):
    started = plait.run("account", "x")
    assert started.returncode == 3
    ask = started.data["asks"][0]
    assert ask["expires_at"] == T0 // 1000 + 60
    refused = answer(plait, "x", ask["ask_id"], '{"account": "acme"}', now=EXPIRED)
    assert (refused.returncode, refused.code) == (2, "PLAIT-E011")
    assert "expired" in refused.data["error"]["message"]
    assert rejections(plait, "x") == [(ask["ask_id"], "PLAIT-E011")]

    ended = plait("resume", "x", now=EXPIRED)
    assert ended.returncode == 1, ended
    run = ended.data
    assert run["status"] == "failed"
    assert run["outcome"]["kind"] == "failed" and run["outcome"]["node"] == "account"
    assert run["outcome"]["detail"].startswith("Timeout:")
    # `retries: 2` on the node: an expiry is never retried (one attempt, no second ask).
    entries = [e for e in plait.trace("x") if e["node"] == "account"]
    assert len(entries) == 1 and entries[0]["failure"]["cause"] == "Timeout"
    assert plait.verify("x")["up_to"] == "terminal"


def test_an_ask_answered_in_time_is_not_expired_by_a_late_resume(plait: Plait):
    assert plait.run("account", "x").returncode == 3
    ask = plait.only_ask("x")
    assert answer(plait, "x", ask["ask_id"], '{"account": "acme"}', now=T0 + TTL).returncode == 0
    done = plait("resume", "x", now=EXPIRED + 3_600 * SECOND)
    assert done.returncode == 0, done
    assert done.data["context"]["account"] == "acme"


def test_the_owner_approving_is_e012_and_another_principal_may(plait: Plait):
    assert plait.run("approval", "r").returncode == 3
    ask = plait.only_ask("r")
    own = plait("approve", "r", ask["ask_id"])  # alice started the run
    assert (own.returncode, own.code) == (2, "PLAIT-E012")
    own_deny = plait("deny", "r", ask["ask_id"], "--reason", "mine")
    assert (own_deny.returncode, own_deny.code) == (2, "PLAIT-E012")
    via_respond = plait("respond", "r", ask["ask_id"], "--result", '{"approved": true}')
    assert (via_respond.returncode, via_respond.code) == (2, "PLAIT-E012")
    # `--as` wins over PLAIT_PRINCIPAL.
    as_owner = plait("approve", "r", ask["ask_id"], "--as", OWNER, principal="bob")
    assert (as_owner.returncode, as_owner.code) == (2, "PLAIT-E012")
    # None of the refusals counted: the ask is still pending, and bob may approve.
    assert plait.only_ask("r")["ask_id"] == ask["ask_id"]
    ok = plait("approve", "r", ask["ask_id"], "--as", "bob")
    assert ok.returncode == 0 and ok.data["by"] == "bob"
    assert rejections(plait, "r") == [(ask["ask_id"], "PLAIT-E012")] * 4


def test_a_malformed_answer_is_e028_and_the_ask_stays_pending(plait: Plait):
    assert plait.run("account", "m").returncode == 3
    ask = plait.only_ask("m")
    for bad in ('{"acct": "acme"}', '{"account": 7}', '"acme"'):
        refused = answer(plait, "m", ask["ask_id"], bad)
        assert (refused.returncode, refused.code) == (2, "PLAIT-E028"), bad
    assert plait.only_ask("m")["ask_id"] == ask["ask_id"]
    assert plait("resume", "m").returncode == 3  # nothing settled
    good = answer(plait, "m", ask["ask_id"], '{"account": "acme"}')
    assert good.returncode == 0, good
    done = plait("resume", "m")
    assert done.returncode == 0, done
    assert done.data["context"] == {"started": True, "account": "acme", "finished": True}
    assert rejections(plait, "m") == [(ask["ask_id"], "PLAIT-E028")] * 3
    assert plait.verify("m")["up_to"] == "terminal"


def test_a_malformed_approval_is_e028(plait: Plait):
    assert plait.run("approval", "r").returncode == 3
    ask = plait.only_ask("r")
    for bad in ('{"approved": "yes"}', '{"ok": true}', "true"):
        refused = answer(plait, "r", ask["ask_id"], bad, principal="bob")
        assert (refused.returncode, refused.code) == (2, "PLAIT-E028"), bad
    ok = answer(
        plait, "r", ask["ask_id"], '{"approved": false, "reason": "later"}', principal="bob"
    )
    assert ok.returncode == 0, ok
    assert rejections(plait, "r") == [(ask["ask_id"], "PLAIT-E028")] * 3


def test_checks_run_in_order_e011_before_e012_before_e028(plait: Plait):
    assert plait.run("approval", "r").returncode == 3
    ask = plait.only_ask("r")
    # The owner sending a malformed approval: E012 (the principal) comes before E028.
    owner_bad = answer(plait, "r", ask["ask_id"], '{"approved": "yes"}')
    assert owner_bad.code == "PLAIT-E012"
    assert plait("approve", "r", ask["ask_id"], principal="bob").returncode == 0
    # Already answered: E011 comes before both.
    settled = answer(plait, "r", ask["ask_id"], '{"approved": "yes"}')
    assert settled.code == "PLAIT-E011"
    assert [code for _, code in rejections(plait, "r")] == ["PLAIT-E012", "PLAIT-E011"]


def test_respond_all_journals_every_answer_or_none(tmp_path):
    """Several asks of one run answered in one commit; one bad answer writes nothing."""
    import asyncio

    from plait import PlaitError, Runtime, Workflow
    from plait.driver.answers import Answer

    def start() -> dict:
        return {}

    def end() -> dict:
        return {"done": True}

    wf = (
        Workflow.new("two-asks")
        .node("start", tool=start)
        .node("a", ask={"prompt": "First?"})
        .node("b", ask={"prompt": "Second?", "approval": True})
        .node("end", tool=end)
        .edge("start", "a")
        .edge("start", "b")
        .edge("a", "end")
        .edge("b", "end")
    )
    with Runtime(f"sqlite:///{tmp_path}/p.db", principal="alice") as rt:
        asks = {a["node"]: a["ask_id"] for a in asyncio.run(rt.start(wf, {}, run_id="r")).asks}
        before = len(rt.store.load_journal("r").items())
        bad = [Answer(asks["a"], result={"x": 1}), Answer(asks["b"], approve=True)]
        with pytest.raises(PlaitError) as caught:
            rt.respond_all("r", bad, by="alice")  # alice owns the run: E012 on the second
        assert caught.value.code == "E012"
        assert len(rt.store.load_journal("r").items()) == before  # not even the first
        twice = [Answer(asks["a"], result=1), Answer(asks["a"], result=2)]
        with pytest.raises(PlaitError) as caught:
            rt.respond_all("r", twice, by="bob")
        assert caught.value.code == "E028"
        good = [Answer(asks["a"], result={"x": 1}), Answer(asks["b"], approve=True)]
        assert [a["ask_id"] for a in rt.respond_all("r", good, by="bob")] == [
            asks["a"],
            asks["b"],
        ]
        journal = rt.store.load_journal("r")
        assert [r.kind for r in journal.records if r.kind == "answer"] == ["answer", "answer"]
        done = rt.resume_sync("r", workflow=wf)
        assert done.status == "completed" and done.context["done"] is True
        assert rt.verify("r", workflow=wf).verified
