"""Cancel (docs/architecture.md §3.5) and steering messages (§6.7) on parked and crashed runs.

`cancel` and `send` only journal; the next `resume` feeds them to the core. A cancel
abandons pending asks and ends the run Canceled{by, reason}. A steering message
reaches `context["$inbox"]` when the next superstep opens.
"""

from __future__ import annotations

import signal

import pytest

from hitl.support import HOUR, OWNER, T0, Plait


def canceled(call, by: str, reason: str) -> dict:
    assert call.returncode == 1, call
    run = call.data
    assert run["status"] == "canceled"
    assert run["outcome"] == {
        "kind": "canceled",
        "detail": f"canceled by {by}: {reason}",
        "by": by,
        "reason": reason,
    }
    return run


def test_cancel_a_parked_run_then_resume(plait: Plait):
    assert plait.run("approval", "r").returncode == 3
    ask = plait.only_ask("r")
    later = T0 + HOUR
    accepted = plait("cancel", "r", "--reason", "customer left", now=later, principal="carol")
    assert accepted.returncode == 0, accepted
    assert accepted.data == {"run_id": "r", "accepted": True}
    # Journaled only: the run still shows parked until a driver sees the cancel.
    assert plait("show", "r", now=later).data["status"] == "parked"

    run = canceled(plait("resume", "r", now=later), "carol", "customer left")
    assert run["asks"] == [] and run["context"] == {"started": True}
    # The pending ask was abandoned: it is no longer listed, and answering it is refused.
    assert plait("asks").data["asks"] == []
    late = plait("approve", "r", ask["ask_id"], principal="bob")
    assert (late.returncode, late.code) == (2, "PLAIT-E011")
    # Resuming again reports the same outcome; verify replays the cancel.
    canceled(plait("resume", "r"), "carol", "customer left")
    assert plait("show", "r").data["status"] == "canceled"
    assert plait.verify("r")["up_to"] == "terminal"


def test_the_first_cancel_wins_and_by_defaults_to_the_principal(plait: Plait):
    assert plait.run("question", "q").returncode == 3
    assert plait("cancel", "q", "--reason", "first").returncode == 0
    assert plait("cancel", "q", "--reason", "second", "--as", "dave").returncode == 0
    canceled(plait("resume", "q"), OWNER, "first")
    assert plait.verify("q")["up_to"] == "terminal"


def test_an_answer_and_a_cancel_both_journaled_while_parked_end_canceled(plait: Plait):
    assert plait.run("question", "q").returncode == 3
    ask = plait.only_ask("q")
    assert plait("respond", "q", ask["ask_id"], "--result", '{"note": "x"}').returncode == 0
    assert plait("cancel", "q", "--reason", "stop").returncode == 0
    run = canceled(plait("resume", "q"), OWNER, "stop")
    assert "finished" not in run["context"]
    assert plait.verify("q")["up_to"] == "terminal"


def test_cancel_of_a_parked_timer_run(plait: Plait):
    assert plait.run("timer", "t").returncode == 3
    assert plait("cancel", "t", "--reason", "no wait").returncode == 0
    canceled(plait("resume", "t"), OWNER, "no wait")  # before its wake time
    assert plait.verify("t")["up_to"] == "terminal"


def test_cancel_of_an_unknown_run_is_e017(plait: Plait):
    refused = plait("cancel", "nope")
    assert (refused.returncode, refused.code) == (2, "PLAIT-E017")


def executions(plait: Plait, run_id: str) -> list[str]:
    path = plait.folder / f"{run_id}.count"
    return path.read_text().split() if path.exists() else []


def crashed_run(plait: Plait, run_id: str, crash_at: str) -> None:
    data = f'{{"count_file": "{plait.folder / (run_id + ".count")}"}}'
    crashed = plait.run("work", run_id, "--input", data, env={"PLAIT_CRASH_AT": crash_at})
    assert crashed.returncode == -signal.SIGKILL, crashed


def test_cancel_of_a_run_crashed_before_dispatch_never_delivers_the_effect(plait: Plait):
    # Killed right after the `work` intent became durable, before it was dispatched.
    crashed_run(plait, "c", "intent:2")
    assert executions(plait, "c") == []
    assert plait("cancel", "c", "--reason", "abandon").returncode == 0
    run = canceled(plait("resume", "c"), OWNER, "abandon")
    assert run["context"] == {"count_file": str(plait.folder / "c.count"), "started": True}
    # What happens: the cancel is applied at the last checkpoint (superstep 1 closed), so
    # superstep 2 never reopens and the in-flight `work` is never (re)delivered; its
    # intent stays in the journal without a result, shown as pending.
    assert executions(plait, "c") == []
    work = [e for e in plait.trace("c") if e["node"] == "work"]
    assert [(e["status"], e["redeliveries"]) for e in work] == [("pending", 0)]
    assert plait.records("c", "redelivery") == []
    assert plait.verify("c")["up_to"] == "terminal"


def test_cancel_of_a_run_crashed_mid_effect_does_not_redeliver_it(plait: Plait):
    # Killed after `work` ran but before its result was committed.
    crashed_run(plait, "c", "result:2")
    [(node, key)] = [tuple(executions(plait, "c"))]
    assert node == "work"
    assert plait("cancel", "c", "--reason", "abandon").returncode == 0
    canceled(plait("resume", "c"), OWNER, "abandon")
    # The effect ran once (before the crash) and is not redelivered: its result is never
    # journaled, so the trace keeps it pending.
    assert executions(plait, "c") == ["work", key]
    [work] = [e for e in plait.trace("c") if e["node"] == "work"]
    assert (work["status"], work["redeliveries"]) == ("pending", 0)
    assert plait.verify("c")["up_to"] == "terminal"


def test_a_crashed_run_without_a_cancel_redelivers_once(plait: Plait):
    """The contrast: without the cancel, resume redelivers the in-flight effect."""
    crashed_run(plait, "c", "intent:2")
    done = plait("resume", "c")
    assert done.returncode == 0, done
    assert executions(plait, "c")[0::2] == ["work"]
    [work] = [e for e in plait.trace("c") if e["node"] == "work"]
    assert (work["status"], work["redeliveries"]) == ("completed", 1)


# --- steering ------------------------------------------------------------------------


def test_a_message_sent_to_a_parked_run_reaches_the_next_superstep_as_inbox(plait: Plait):
    assert plait.run("approval", "m").returncode == 3
    sent = plait("send", "m", "ship the blue one")
    assert sent.returncode == 0, sent
    assert sent.data == {"run_id": "m", "accepted": True}
    assert plait("send", "m", '{"a": 1}').returncode == 0  # a CLI message is text, kept as is
    ask = plait.only_ask("m")
    assert plait("approve", "m", ask["ask_id"], principal="bob").returncode == 0
    done = plait("resume", "m")
    assert done.returncode == 0, done
    inbox = ["ship the blue one", '{"a": 1}']
    assert done.data["context"]["$inbox"] == inbox
    # Not in the superstep that was open (the ask's), but in the next one: the node
    # dispatched there sees it in its input.
    entries = {e["node"]: e for e in plait.trace("m")}
    assert "$inbox" not in entries["approve"]["input"]
    assert entries["shipped"]["input"]["$inbox"] == inbox
    assert entries["shipped"]["superstep"] == 3
    assert plait.verify("m")["up_to"] == "terminal"


@pytest.mark.parametrize("flow", ["approval", "timer"])
def test_a_message_survives_a_resume_that_leaves_the_run_parked(plait: Plait, flow: str):
    assert plait.run(flow, "p").returncode == 3
    assert plait("send", "p", "hurry").returncode == 0
    assert plait("resume", "p", now=T0 + 1).returncode == 3  # still parked: nothing opened
    if flow == "approval":
        ask = plait.only_ask("p")
        assert plait("approve", "p", ask["ask_id"], principal="bob").returncode == 0
    done = plait("resume", "p", now=T0 + HOUR)
    assert done.returncode == 0, done
    assert done.data["context"].get("$inbox") == ["hurry"]


def test_send_to_an_unknown_run_is_e017(plait: Plait):
    refused = plait("send", "nope", "hi")
    assert (refused.returncode, refused.code) == (2, "PLAIT-E017")


# --- the Python API: queued runs, forks, run ids, waking workers ---------------------------


def counting_workflow(ran: list[int]):
    from plait import Workflow

    def work(n: int = 0) -> dict:
        ran.append(n)
        return {"n": n + 1}

    return Workflow.new("count").node("work", tool=work)


def test_cancel_of_a_queued_run_ends_it_canceled_and_nothing_runs(tmp_path):
    import asyncio

    from plait import Runtime

    ran: list[int] = []
    wf = counting_workflow(ran)
    with Runtime(f"sqlite:///{tmp_path}/p.db", principal=OWNER) as rt:
        asyncio.run(rt.enqueue(wf, {"n": 0}, run_id="q"))
        rt.cancel("q", "not needed", by="bob")
        done = rt.resume_sync("q", workflow=wf)
        assert done.status == "canceled"
        assert done.outcome == {"Canceled": {"by": "bob", "reason": "not needed"}}
        assert ran == []
        assert rt.verify("q", workflow=wf).verified


def test_a_fork_of_a_run_never_checkpointed_starts_again_from_its_input(tmp_path):
    import asyncio

    from plait import PlaitError, Runtime

    ran: list[int] = []
    wf = counting_workflow(ran)
    with Runtime(f"sqlite:///{tmp_path}/p.db", principal=OWNER) as rt:
        asyncio.run(rt.enqueue(wf, {"n": 4}, run_id="q"))
        base_before = rt.store.load_journal("q").items()
        fork = rt.fork_sync("q", workflow=wf)
        with pytest.raises(PlaitError) as caught:
            rt.fork_sync("q", at=2, workflow=wf)
        fork_report = rt.verify(fork.run_id, workflow=wf)
        base_after = rt.store.load_journal("q").items()
        base_status = rt.show("q").status

    assert fork.status == "completed" and fork.context == {"n": 5}
    assert ran == [4]
    assert fork_report.verified
    assert base_after == base_before and base_status == "queued"  # the base is untouched
    assert caught.value.code == "E017" and "no checkpoint at superstep 2" in str(caught.value)


@pytest.mark.parametrize("run_id", ["a~b", " ", "x" * 300, "tab\there"])
def test_the_python_api_refuses_run_ids_the_cli_refuses(tmp_path, run_id):
    from plait import PlaitError, Runtime

    with Runtime(f"sqlite:///{tmp_path}/p.db", principal=OWNER) as rt:
        with pytest.raises(PlaitError) as caught:
            rt.run_sync(counting_workflow([]), {}, run_id=run_id)
        assert caught.value.code == "E019"
        assert rt.store.list_runs() == []


def test_a_message_sent_to_a_parked_run_makes_it_due_for_a_worker(plait: Plait):
    from plait import Runtime

    assert plait.run("approval", "s").returncode == 3
    with Runtime(plait.db, principal=OWNER, clock=lambda: T0 + HOUR) as rt:
        assert rt.store.wake_of("s") is None  # parked on a human: nothing due
        rt.send("s", "please hurry")
        assert rt.store.wake_of("s") == T0 + HOUR
