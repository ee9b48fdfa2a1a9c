"""Subgraphs (§3.9): a node that runs another workflow as a child run.

A child's id is derived from its parent's id and the node's journal key, so a parent
driven again finds its child instead of starting another. A parent that fails abandons
its children: each still parked is cancelled and driven to its end (§3.5 fail-fast).
A parent's drive drives its children "nested" (``Runs.resume_nested``): a drive of a
child on its own (``plait resume CHILD``) instead ends by waking its root, which a
driver then drives on to settle what the child did.
"""

from __future__ import annotations

from collections.abc import Container
from typing import TYPE_CHECKING, Any, Protocol

from plait.core.agents import AGENT_PREFIX
from plait.core.env import StepEnv
from plait.core.errors import PlaitError
from plait.core.events import Event, ResponseSettled
from plait.core.keys import JournalKey, child_run_id
from plait.core.outcomes import Completed, EffectOutcome, Failed, Usage
from plait.core.state import SchedulerState
from plait.driver.dispatcher import ChildRunner
from plait.driver.durable import DurableJournal
from plait.driver.host import Host
from plait.driver.run_result import RunResult, contract_outcome
from plait.store.records import RecordWrite

if TYPE_CHECKING:
    from plait.workflow import Workflow
    from plait.workflow.run_definition import RunDefinition


class Runs(Protocol):
    """Starting and resuming runs: what a parent needs to drive its children."""

    async def start_definition(
        self, definition: RunDefinition, input: Any, *, run_id: str | None, parent: str | None
    ) -> RunResult: ...

    async def resume_nested(self, run_id: str, workflow: Workflow | None = None) -> RunResult:
        """Drive a child on from within its parent's drive (its root is not woken);
        ``workflow``: the child's, for a parent defined in Python (no file to read)."""
        ...


def descendants(host: Host, run_id: str) -> list[str]:
    prefix = run_id + "~"
    return sorted(i.run_id for i in host.store.list_runs() if i.run_id.startswith(prefix))


def child_runner(host: Host, runs: Runs, run_id: str, definition: RunDefinition) -> ChildRunner:
    """Runs the child workflows of ``run_id``, the run being driven. A child's id is
    derived from that run's id, not from the key's: a fork inherits the keys of the
    children its base waited on, and gets children of its own (§5.6: the base run is
    never touched)."""

    async def run_child(key: JournalKey, path: str, value: Any) -> EffectOutcome | None:
        child_id = child_run_id(run_id, key)
        if host.exists(child_id):
            # A parent built in Python (an Agent calling agents) has no file its child's
            # definition could be read from again: the child is its own, rebuilt.
            own = host.definitions.child(definition, path) if definition.source is None else None
            result = await runs.resume_nested(child_id, own.workflow if own else None)
        else:
            if value is None:  # settling a child never started (the parent died first)
                value = _intent_input(host, key)  # or a fork's, from its base's journal
            child = host.definitions.child(definition, path)
            result = await runs.start_definition(child, value, run_id=child_id, parent=run_id)
        if result.status == "completed" and path.startswith(AGENT_PREFIX):
            # An agent's answer, without the reserved keys it started from; what it
            # spent is charged to the parent (its budgets count the whole tree).
            answer = {k: v for k, v in result.context.items() if not k.startswith("$")}
            spent = result.spent
            usage = Usage(
                int(spent.get("input_tokens", 0)),
                int(spent.get("output_tokens", 0)),
                int(spent.get("usd_micros", 0)),
            )
            return Completed(answer, usage)
        if result.status == "completed":
            return Completed(result.context)
        if result.status in ("parked", "running"):
            return None  # the parent parks on it
        # The child's outcome as `plait show` words it (a cancel's detail names by and reason).
        fields = contract_outcome(result.outcome) or {}
        told = ", ".join(f"{k}={v}" for k, v in fields.items() if k not in ("kind", "by", "reason"))
        return Failed("ExecutorError", f"child run '{child_id}' ended {result.status}: {told}")

    return run_child


async def cancel_children(host: Host, runs: Runs, run_id: str) -> None:
    """A run that failed abandoned the child runs it waited on (§3.5 fail-fast): cancel
    each one still parked, with its descendants, and drive it to its end, so that
    nobody is asked to answer for a failed run and its tree can be collected."""
    parked = host.store.list_runs("parked")
    for child in sorted(r.run_id for r in parked if r.parent_run_id == run_id):
        body = {"by": host.principal, "reason": f"parent run '{run_id}' failed"}
        for target in [child, *descendants(host, child)]:
            host.store.commit(target, None, [RecordWrite("cancel", body)])
        await runs.resume_nested(child)


async def settle_children(
    state: SchedulerState,
    env: StepEnv,
    children: ChildRunner,
    journal: DurableJournal,
    now: int,
    journaled: Container[JournalKey] = (),
) -> list[Event]:
    """Resume the children a parked parent waits on; settle those that finished.

    A child whose result is already ``journaled`` is left to the replay of the feed that
    gave it: an agent's loop goes on within its superstep, so the last checkpoint may
    still list a child the parent has since been given the result of."""
    events: list[Event] = []
    if state.is_terminal():
        return events
    for entry_id, entry in sorted(state.pending_asks.items()):
        if entry.child is None or entry.key in journaled:
            continue
        key = entry.key
        path = AGENT_PREFIX + entry.agent if entry.agent else env.executors[entry.node].name
        outcome = await children(key, path, None)
        if outcome is not None:
            journal.result(key, outcome, now)
            events.append(ResponseSettled(entry_id, outcome))
    return events


def _intent_input(host: Host, key: JournalKey) -> Any:
    """The input journaled with the intent of ``key`` (the child's input, §3.9)."""
    for intent in host.store.load_journal(key.run_id).intents:
        if intent.key == key:
            return intent.input
    raise PlaitError("E010", f"run '{key.run_id}' has no intent for node '{key.node}'")
