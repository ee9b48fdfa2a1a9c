"""Agent.resume with approvals and deferred results, and Agent.send (§6.7, §8, §10).

Answers are keyed by the model's tool call id and journaled by ask id through
``Runtime.respond``; a batch with any invalid answer journals nothing.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from typing import Any

import pytest
from pydantic import BaseModel

from plait import (
    Agent,
    AgentRunState,
    Approval,
    DeferredError,
    PlaitError,
    RunStatus,
    Runtime,
    Workflow,
)
from plait.store.records import Journal

NOW_MS = 1_700_000_000_000


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


def turn(text: str | None, *calls: dict[str, Any]) -> dict[str, Any]:
    answer: dict[str, Any] = {"usage": {"input_tokens": 10, "output_tokens": 5}}
    if text is not None:
        answer["text"] = text
    if calls:
        answer["tool_calls"] = list(calls)
    return answer


class Desk:
    """An agent with an approval-required ``refund`` and a deferred ``ship``; counts runs."""

    def __init__(self, spec: str, db: str) -> None:
        self.refunds: list[str] = []
        self.shipped: list[str] = []
        self.agent: Agent[Any] = Agent(
            spec,
            instructions="Handle the order.",
            db=db,
            principal="alice",
            clock=lambda: NOW_MS,
        )

        @self.agent.tool(approval=True)
        def refund(order_id: str) -> dict:
            """Refund an order."""
            self.refunds.append(order_id)
            return {"refunded": order_id}

        @self.agent.tool(deferred=True)
        def ship(order_id: str) -> dict:
            """Ship an order (done by the warehouse, not by this function)."""
            self.shipped.append(order_id)
            return {}


def journal(db: str, run_id: str) -> Journal:
    with Runtime(db) as runtime:
        return runtime.store.load_journal(run_id)


def snapshot(db: str, run_id: str) -> tuple[int, int, int]:
    j = journal(db, run_id)
    return len(j.intents), len(j.results), len(j.records)


def tool_entries(state: AgentRunState[Any]) -> list[dict[str, Any]]:
    return [dict(m) for m in state.message_history if m["role"] == "tool"]


def test_an_approval_required_call_parks_and_is_listed_with_its_call_id(scripted, db):
    desk = Desk(scripted([turn(None, call("refund", order_id="A-1")), turn("done")]), db)

    parked = desk.agent.run_sync("Refund A-1.", run_id="run-park")

    assert parked.status is RunStatus.WAITING
    assert parked.has_pending_hitl()
    (waiting,) = parked.pending_approvals()
    assert parked.pending_deferred_tools() == ()
    assert list(parked.pending_hitl_tool_returns()) == [waiting]
    asked = parked.message_history[-1]["tool_calls"][0]
    assert waiting.tool_call_id == asked["id"]  # the model's call id, not the ask id
    assert waiting.tool_name == "refund" and waiting.args == {"order_id": "A-1"}
    with Runtime(db) as runtime:
        (ask,) = runtime.asks("run-park")
    assert waiting.ask_id == ask["ask_id"] and ask["approval"] is True
    assert desk.refunds == []
    assert desk.agent.verify("run-park").verified


def test_an_approved_call_runs_once_and_the_run_completes(scripted, db):
    desk = Desk(scripted([turn(None, call("refund", order_id="A-1")), turn("refunded")]), db)
    parked = desk.agent.run_sync("Refund A-1.")
    (waiting,) = parked.pending_approvals()

    done = desk.agent.resume_sync(parked.run_id, approvals={waiting.tool_call_id: True}, by="bob")

    assert done.status is RunStatus.COMPLETED and done.output == "refunded"
    assert desk.refunds == ["A-1"]
    assert not done.has_pending_hitl()
    assert tool_entries(done) == [
        {
            "role": "tool",
            "tool_call_id": waiting.tool_call_id,
            "content": {"refunded": "A-1"},
            "is_error": False,
        }
    ]
    answers = [r.body for r in journal(db, parked.run_id).records if r.kind == "answer"]
    assert answers == [{"ask_id": waiting.ask_id, "by": "bob"}]
    assert desk.agent.verify(parked.run_id).verified
    # resuming again reads the finished run back; the tool does not run twice
    assert desk.agent.resume_sync(parked.run_id) == done
    assert desk.refunds == ["A-1"]


@pytest.mark.parametrize(
    ("answer", "content"),
    [(Approval(False, "no"), "denied by bob: no"), (False, "denied by bob")],
)
def test_a_denied_call_never_runs_and_the_model_reads_a_tool_error(scripted, db, answer, content):
    desk = Desk(scripted([turn(None, call("refund", order_id="A-1")), turn("not refunded")]), db)
    parked = desk.agent.run_sync("Refund A-1.")
    (waiting,) = parked.pending_approvals()

    done = desk.agent.resume_sync(parked.run_id, approvals={waiting.tool_call_id: answer}, by="bob")

    assert done.status is RunStatus.COMPLETED and done.output == "not refunded"
    assert desk.refunds == []
    assert tool_entries(done) == [
        {"role": "tool", "tool_call_id": waiting.tool_call_id, "content": content, "is_error": True}
    ]
    assert done.usage.tool_calls == 0  # no tool effect was ever made
    assert desk.agent.verify(parked.run_id).verified


def test_a_deferred_result_is_delivered_to_the_model_and_the_tool_never_runs(scripted, db):
    spec = scripted([turn(None, call("ship", order_id="A-1")), turn("shipped")])
    desk = Desk(spec, db)
    parked = desk.agent.run_sync("Ship A-1.")
    assert parked.status is RunStatus.WAITING and parked.pending_approvals() == ()
    (waiting,) = parked.pending_deferred_tools()
    assert waiting.tool_name == "ship" and waiting.content is None

    done = desk.agent.resume_sync(
        parked.run_id, deferred={waiting.tool_call_id: {"tracking": "T-9"}}
    )

    assert done.status is RunStatus.COMPLETED and done.output == "shipped"
    assert desk.shipped == []
    assert tool_entries(done) == [
        {
            "role": "tool",
            "tool_call_id": waiting.tool_call_id,
            "content": {"tracking": "T-9"},
            "is_error": False,
        }
    ]
    llm_inputs = [e["input"] for e in desk.agent.trace(parked.run_id) if e["kind"] == "llm"]
    assert llm_inputs[-1]["messages"][-1]["content"] == {"tracking": "T-9"}
    assert desk.agent.verify(parked.run_id).verified


def test_a_deferred_error_and_a_pydantic_result(scripted, db):
    class Tracking(BaseModel):
        tracking: str

    spec = scripted(
        [turn(None, call("ship", order_id="A-1"), call("ship", order_id="B-2")), turn("half")]
    )
    desk = Desk(spec, db)
    parked = desk.agent.run_sync("Ship A-1 and B-2.")
    first, second = parked.pending_deferred_tools()  # in the order the model called them
    assert (first.args, second.args) == ({"order_id": "A-1"}, {"order_id": "B-2"})

    done = desk.agent.resume_sync(
        parked.run_id,
        deferred={
            first.tool_call_id: DeferredError("out of stock"),
            second.tool_call_id: Tracking(tracking="T-2"),
        },
        by="warehouse",
    )

    assert done.status is RunStatus.COMPLETED
    assert [(e["content"], e["is_error"]) for e in tool_entries(done)] == [
        ("UserAborted: denied by warehouse: out of stock", True),
        ({"tracking": "T-2"}, False),
    ]
    assert desk.agent.verify(parked.run_id).verified


def test_approvals_and_deferred_results_together(scripted, db):
    spec = scripted(
        [turn(None, call("refund", order_id="A-1"), call("ship", order_id="A-1")), turn("ok")]
    )
    desk = Desk(spec, db)
    parked = desk.agent.run_sync("Refund and ship A-1.")
    (approval,) = parked.pending_approvals()
    (deferred,) = parked.pending_deferred_tools()
    assert list(parked.pending_hitl_tool_returns()) == [approval, deferred]

    done = desk.agent.resume_sync(
        parked.run_id,
        approvals={approval.tool_call_id: Approval(True, "within policy")},
        deferred={deferred.tool_call_id: {"tracking": "T-1"}},
        by="bob",
    )

    assert done.status is RunStatus.COMPLETED and desk.refunds == ["A-1"]
    assert {e["tool_call_id"]: e["content"] for e in tool_entries(done)} == {
        approval.tool_call_id: {"refunded": "A-1"},
        deferred.tool_call_id: {"tracking": "T-1"},
    }
    assert desk.agent.verify(parked.run_id).verified


def test_an_unknown_tool_call_id_names_it_and_the_pending_ones_and_records_nothing(scripted, db):
    spec = scripted(
        [turn(None, call("refund", order_id="A-1"), call("ship", order_id="A-1")), turn("ok")]
    )
    desk = Desk(spec, db)
    parked = desk.agent.run_sync("Refund and ship A-1.")
    (approval,) = parked.pending_approvals()
    (deferred,) = parked.pending_deferred_tools()
    before = snapshot(db, parked.run_id)

    with pytest.raises(PlaitError) as raised:
        desk.agent.resume_sync(
            parked.run_id,
            approvals={approval.tool_call_id: True, "call-nope": True},
            deferred={deferred.tool_call_id: {"tracking": "T-1"}},
            by="bob",
        )

    assert raised.value.code == "E011"
    message = str(raised.value)
    assert "'call-nope'" in message
    assert f"'{approval.tool_call_id}' (refund, approval)" in message
    assert f"'{deferred.tool_call_id}' (ship, deferred)" in message
    assert snapshot(db, parked.run_id) == before  # not even the valid answers
    assert desk.agent.state(parked.run_id) == parked
    assert desk.agent.verify(parked.run_id).verified

    done = desk.agent.resume_sync(
        parked.run_id,
        approvals={approval.tool_call_id: True},
        deferred={deferred.tool_call_id: {"tracking": "T-1"}},
        by="bob",
    )
    assert done.status is RunStatus.COMPLETED and desk.refunds == ["A-1"]
    assert desk.agent.verify(parked.run_id).verified


def _invalid_batches(
    approval: str, deferred: str
) -> list[tuple[str, dict[str, Any], dict[str, Any], str | None, str]]:
    """(code, approvals, deferred, by, what the message says) for batches refused whole."""
    valid_deferred = {deferred: {"tracking": "T-1"}}
    return [
        ("E012", {approval: True}, valid_deferred, None, "cannot approve its own request"),
        ("E012", {approval: True}, valid_deferred, "alice", "cannot approve its own request"),
        ("E028", {approval: True, deferred: True}, {}, "bob", "give its result in deferred="),
        ("E028", {}, {approval: {"ok": 1}, deferred: 1}, "bob", "answer it in approvals="),
        ("E028", {approval: True}, {approval: 1, deferred: 1}, "bob", "in both approvals="),
        ("E028", {approval: "yes"}, valid_deferred, "bob", "must be True, False or Approval"),
        ("E028", {approval: True}, {deferred: {1.5, 2}}, "bob", "is not JSON"),
        ("E028", {approval: True}, {deferred: float("nan")}, "bob", "is not JSON"),
        ("E028", {approval: True}, {}, "bob", f"unanswered: '{deferred}' (ship, deferred)"),
    ]


@pytest.mark.parametrize("case", range(9))
def test_an_invalid_batch_is_refused_whole_before_anything_is_journaled(scripted, db, case):
    spec = scripted(
        [turn(None, call("refund", order_id="A-1"), call("ship", order_id="A-1")), turn("ok")]
    )
    desk = Desk(spec, db)
    parked = desk.agent.run_sync("Refund and ship A-1.")
    (approval,) = parked.pending_approvals()
    (deferred,) = parked.pending_deferred_tools()
    code, approvals, results, by, says = _invalid_batches(
        approval.tool_call_id, deferred.tool_call_id
    )[case]
    before = snapshot(db, parked.run_id)

    with pytest.raises(PlaitError) as raised:
        desk.agent.resume_sync(parked.run_id, approvals=approvals, deferred=results, by=by)

    assert raised.value.code == code and says in str(raised.value)
    assert snapshot(db, parked.run_id) == before  # no answer, no rejected_response record
    assert desk.refunds == []
    assert desk.agent.state(parked.run_id).status is RunStatus.WAITING


def test_a_call_answered_through_runtime_respond_is_no_longer_pending(scripted, db):
    desk = Desk(scripted([turn(None, call("refund", order_id="A-1")), turn("refunded")]), db)
    parked = desk.agent.run_sync("Refund A-1.")
    (waiting,) = parked.pending_approvals()
    assert waiting.ask_id is not None
    with Runtime(db, principal="bob") as runtime:
        runtime.respond(parked.run_id, waiting.ask_id, approve=True)

    answered = desk.agent.state(parked.run_id)
    assert answered.status is RunStatus.WAITING  # answered, not yet driven on
    assert not answered.has_pending_hitl()
    with pytest.raises(PlaitError) as raised:
        desk.agent.resume_sync(parked.run_id, approvals={waiting.tool_call_id: True}, by="bob")
    assert raised.value.code == "E011" and "no pending approval or deferred" in str(raised.value)

    done = desk.agent.resume_sync(parked.run_id)
    assert done.status is RunStatus.COMPLETED and desk.refunds == ["A-1"]
    assert desk.agent.verify(parked.run_id).verified


def test_answers_to_a_finished_run_are_refused(scripted, db):
    desk = Desk(scripted([turn("nothing to do")]), db)
    done = desk.agent.run_sync("Hi.")

    with pytest.raises(PlaitError) as raised:
        desk.agent.resume_sync(done.run_id, deferred={"call-1": 1})

    assert raised.value.code == "E011" and "'call-1'" in str(raised.value)
    with pytest.raises(PlaitError) as unknown:
        desk.agent.resume_sync("run-missing", approvals={"call-1": True}, by="bob")
    assert unknown.value.code == "E017"


def test_send_to_a_parked_run_waits_for_the_final_answer_and_the_next_turn_sees_it(scripted, db):
    spec = scripted(
        [
            turn(None, call("refund", order_id="A-1")),
            turn("refunded"),
            turn("refunded, and the customer was told"),
        ]
    )
    desk = Desk(spec, db)
    parked = desk.agent.run_sync("Refund A-1.")
    (waiting,) = parked.pending_approvals()

    desk.agent.send(parked.run_id, "Tell the customer.")

    assert desk.agent.state(parked.run_id).idle_messages == ("Tell the customer.",)
    done = desk.agent.resume_sync(parked.run_id, approvals={waiting.tool_call_id: True}, by="bob")
    assert done.status is RunStatus.COMPLETED
    assert done.output == "refunded, and the customer was told"
    assert done.idle_messages == ()
    assert [(m["role"], m.get("text") or m.get("content")) for m in done.message_history[-3:]] == [
        ("assistant", "refunded"),
        ("user", "Tell the customer."),
        ("assistant", "refunded, and the customer was told"),
    ]
    llm_inputs = [e["input"] for e in desk.agent.trace(parked.run_id) if e["kind"] == "llm"]
    assert llm_inputs[-1]["messages"][-1] == {"role": "user", "content": "Tell the customer."}
    assert all("Tell the customer." not in str(i) for i in llm_inputs[:-1])
    assert desk.agent.verify(parked.run_id).verified


def test_send_while_the_agent_runs_redirects_its_final_answer(scripted, db):
    spec = scripted(
        [turn(None, call("slow_lookup", order_id="A-1")), turn("first"), turn("second")]
    )
    agent: Agent[Any] = Agent(spec, instructions="Look it up.", db=db, clock=lambda: NOW_MS)
    sent: list[Callable[[], None]] = []

    @agent.tool
    async def slow_lookup(order_id: str) -> dict:
        """Look an order up."""
        sent.pop()()  # a caller steers the run while its tool call is in flight
        await asyncio.sleep(0)
        return {"order_id": order_id}

    sent.append(lambda: agent.send("run-live", "Also check B-2."))
    done = agent.run_sync("Look A-1 up.", run_id="run-live")

    assert done.status is RunStatus.COMPLETED and done.output == "second"
    assert {"role": "user", "content": "Also check B-2."} in done.message_history
    assert done.idle_messages == ()
    assert agent.verify("run-live").verified


def test_send_to_an_unknown_run_is_refused(db):
    agent: Agent[Any] = Agent("scripted:none.json", db=db)
    with pytest.raises(PlaitError) as raised:
        agent.send("run-missing", "hello")
    assert raised.value.code == "E017"


def test_an_expired_call_is_refused_and_settles_as_a_tool_error_when_driven(scripted, db):
    spec = scripted([turn(None, call("ship", order_id="A-1")), turn("gave up")])
    now = [NOW_MS]

    class ExpiringAgent(Agent[Any]):
        def workflow(self) -> Workflow:
            return dataclasses.replace(super().workflow(), asks={"ttl_s": 60})

    agent = ExpiringAgent(spec, instructions="Ship.", db=db, clock=lambda: now[0])

    @agent.tool(deferred=True)
    def ship(order_id: str) -> dict:
        """Ship an order (never called: its result is deferred)."""
        return {}

    parked = agent.run_sync("Ship A-1.")
    (waiting,) = parked.pending_deferred_tools()
    now[0] += 62_000  # past expires_at: ttl 60 s
    before = snapshot(db, parked.run_id)

    with pytest.raises(PlaitError) as raised:
        agent.resume_sync(parked.run_id, deferred={waiting.tool_call_id: {"tracking": "late"}})

    assert raised.value.code == "E011" and "expired" in str(raised.value)
    assert snapshot(db, parked.run_id) == before
    done = agent.resume_sync(parked.run_id)
    assert done.status is RunStatus.COMPLETED and done.output == "gave up"
    (entry,) = tool_entries(done)
    assert entry["is_error"] and entry["content"].startswith("Timeout: ask expired")
    assert agent.verify(parked.run_id).verified
