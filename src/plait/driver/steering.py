"""Commands from outside a drive: cancel, steering messages, raised budgets, answers.

Each only journals (one commit) and marks the run's top-level run due, so a worker —
or the next ``resume`` — feeds it to the core; none of them drives a run.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from plait.driver.admission import check_ceilings, check_input
from plait.driver.answers import Answer, owner_of, respond, respond_all
from plait.driver.children import descendants
from plait.driver.host import Host
from plait.driver.wake import set_wake, wake_root
from plait.store.records import RecordWrite


def cancel(host: Host, run_id: str, reason: str, by: str) -> None:
    """Journal a cancel for the run and its descendants; each next drive feeds it."""
    host.store.get_run(run_id)
    body = {"by": by, "reason": reason}
    for target in [run_id, *descendants(host, run_id)]:
        host.store.commit(target, None, [RecordWrite("cancel", body)])
    wake_root(host.store, run_id, host.clock())


def send(host: Host, run_id: str, message: Any) -> None:
    """Journal a steering message; the next superstep moves it into context["$inbox"]."""
    check_input(message, "message")
    host.store.get_run(run_id)
    host.store.commit(run_id, None, [RecordWrite("inbox", {"message": message})])
    wake_root(host.store, run_id, host.clock())  # a parked run takes it when driven on


def raise_budget(host: Host, run_id: str, raised: dict[str, Any], by: str) -> None:
    """Journal raised ceilings and who raised them (fed as BudgetRaised)."""
    check_ceilings(raised, "raise_budget")
    info = host.store.get_run(run_id)
    body = {"budgets": raised, "by": by}
    host.store.commit(run_id, None, [RecordWrite("budget_raise", body)])
    if info.parent_run_id is not None:
        # A child's own wake time keeps its tree from gc until a drive of the child
        # feeds the raise: the root's does not keep a finished root that is not
        # budget-exhausted, and a budget-exhausted child's parent has failed (its
        # node did), so only `resume CHILD` goes on with it.
        set_wake(host.store, run_id, host.clock())
    wake_root(host.store, run_id, host.clock())  # a worker drives the tree on


def answer(host: Host, run_id: str, ask_id: str, by: str, **given: Any) -> dict[str, Any]:
    """Answer a pending ask (journaled only). A child's ask is answerable through its
    parent's run id (§3.9); an answered ask still has its owner, so answering it again
    is "already answered" (PLAIT-E011)."""
    owner = owner_of(host.store, run_id, ask_id) or run_id
    accepted = respond(host.store, owner, ask_id, by=by, now_ms=host.clock(), **given)
    wake_root(host.store, owner, host.clock())
    return accepted


def answer_all(host: Host, run_id: str, answers: Sequence[Answer], by: str) -> list[dict[str, Any]]:
    """Answer several pending asks of ``run_id`` itself in one commit, or none of them."""
    accepted = respond_all(host.store, run_id, answers, by=by, now_ms=host.clock())
    wake_root(host.store, run_id, host.clock())
    return accepted
