"""Conversations: starting a run as the next turn of one, and listing them (docs/chat.md).

A conversation is an ordered list of runs (``Store.conversation_runs``: each run joins it
in the transaction that creates it). A new turn goes on from the *last completed* run's
transcript — which itself began with the turns before it — so the history is that run's
entry loop's last model request plus its answer, exactly as journaled. The history
enters the new run's input under ``$history`` (``core/conversation.py``) with what it was
read from (the runs, a digest of the messages, the prompt tokens of that last request):
pinned in the run's manifest, so resume and verify use the history the run started with,
and stored as the same content-addressed nodes the earlier runs' journals hold (§5.3).

A new turn waits for none: while the conversation's last run is queued, running or
parked, a new turn is refused (PLAIT-E031) rather than started without that run's
messages; a failed or canceled run is passed over. Only a workflow whose entry node is
abstract (an ``Agent``'s, or a file starting with an LLM node) can be a turn: another
has no transcript to go on from (PLAIT-E031).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from hashlib import sha256
from typing import Any

from plait.core.agents import AGENT_PREFIX, HANDOFF_PREFIX
from plait.core.canonical import canonical_text
from plait.core.conversation import HISTORY_KEY
from plait.core.errors import PlaitError
from plait.core.keys import child_run_id
from plait.driver.run_ids import name_problem, refuse_name
from plait.store.base import Store
from plait.store.records import IntentRecord, Journal, RunInfo

UNFINISHED = ("queued", "running", "parked")
"""Statuses of a conversation's last run that refuse a new turn (it would miss them)."""


def check_conversation(conversation: str) -> None:
    """PLAIT-E031 for a conversation id that is blank, too long or holds a control char."""
    problem = name_problem(conversation)
    if problem is not None:
        raise refuse_name("E031", "conversation id", conversation, problem)


def entry_loop(pinned: Mapping[str, Any], conversation: str) -> str:
    """The entry node's id; PLAIT-E031 when it is not an abstract (LLM) node."""
    nodes = list(pinned.get("nodes") or ())
    first = nodes[0] if nodes else {}
    if first.get("kind") != "abstract":
        raise PlaitError(
            "E031",
            f"conversation '{conversation}': workflow '{pinned.get('name')}' starts with"
            f" {first.get('kind', 'no')} node '{first.get('id')}', not an LLM node, so it has"
            " no transcript to continue (start the workflow with an abstract node)",
        )
    return str(first["id"])


def with_history(
    store: Store,
    pinned: Mapping[str, Any],
    input: Any,
    *,
    conversation: str | None,
    message_history: Sequence[Mapping[str, Any]] | None,
) -> Any:
    """``input`` with the history the new run goes on from (unchanged when there is none).

    ``message_history`` (a previous result's) wins over the conversation's own history.
    """
    if conversation is not None:
        check_conversation(conversation)
    if conversation is None and message_history is None:
        return input
    where = conversation if conversation is not None else "message_history"
    node = entry_loop(pinned, where)
    if input is not None and not isinstance(input, dict):
        raise PlaitError("E031", f"conversation '{where}': the run's input must be an object")
    history: dict[str, Any]
    if message_history is not None:
        messages = [dict(m) for m in message_history]
        history = {"messages": messages, "prompt_tokens": 0, "runs": []}
    else:
        assert conversation is not None
        runs = [r for _, r in store.conversation_runs(conversation)]
        if runs and runs[-1].status in UNFINISHED:
            last = runs[-1]
            raise PlaitError(
                "E031",
                f"conversation '{conversation}': its last run '{last.run_id}' is {last.status};"
                " a new turn would not see its messages (resume, answer or cancel it first)",
            )
        done = [r for r in runs if r.status == "completed"]
        if not done:
            return input
        messages, tokens = transcript(store, done[-1].run_id, node)
        history = {"messages": messages, "prompt_tokens": tokens}
        history["runs"] = [r.run_id for r in done]
    if not messages:
        return input
    if conversation is not None:
        history["conversation"] = conversation
    history["sha256"] = sha256(canonical_text(messages).encode("utf-8")).hexdigest()
    return {**(input or {}), HISTORY_KEY: history}


def transcript(store: Store, run_id: str, node: str) -> tuple[list[dict[str, Any]], int]:
    """The loop of ``node`` in ``run_id`` as journaled (its last request plus the answer)
    and that request's prompt tokens; empty when the loop never got an answer. A loop
    that ended by handing the conversation over (a handoff, §3.10) goes on in the
    receiving agent's child run: that run's transcript, which holds this one, is it."""
    journal = store.load_journal(run_id)
    last: IntentRecord | None = None
    for intent in journal.intents:
        key = intent.key
        folding = isinstance(intent.input, dict) and "fold" in intent.input
        if key.kind == "llm" and key.node == node and not key.task_path and not folding:
            last = intent
    result = journal.results.get(last.key) if last is not None else None
    if last is None or result is None or "Completed" not in result.outcome:
        return [], 0
    answer = result.outcome["Completed"].get("result")
    answer = answer if isinstance(answer, dict) else {}
    calls = list(answer.get("tool_calls") or [])
    handed = _handed_to(journal, node, calls)
    if handed is not None:
        return transcript(store, *handed)
    assert isinstance(last.input, dict)
    messages = [dict(m) for m in last.input.get("messages", ())]
    entry: dict[str, Any] = {"role": "assistant", "text": answer.get("text"), "tool_calls": calls}
    if "spec" in answer:
        entry["spec"] = answer["spec"]
    messages.append(entry)
    tokens = (answer.get("usage") or {}).get("input_tokens", 0)
    return messages, tokens if isinstance(tokens, int) else 0


def _handed_to(journal: Journal, node: str, calls: list[Any]) -> tuple[str, str] | None:
    """``(child run id, receiving node)`` when the loop's last answer was a handoff."""
    if len(calls) != 1 or not isinstance(calls[0], dict):
        return None
    name = str(calls[0].get("name") or "")
    if not name.startswith(HANDOFF_PREFIX):
        return None
    target = name[len(HANDOFF_PREFIX) :]
    for intent in reversed(journal.intents):
        key = intent.key
        if intent.executor == AGENT_PREFIX + target and key.node == node and not key.task_path:
            return child_run_id(journal.run_id, key), target
    return None


def conversations(store: Store, conversation: str | None = None) -> list[dict[str, Any]]:
    """One object per conversation (``plait conversations --json``), latest update first."""
    grouped: dict[str, list[RunInfo]] = {}
    for name, run in store.conversation_runs(conversation):
        grouped.setdefault(name, []).append(run)
    rows = [_row(name, runs) for name, runs in grouped.items()]
    rows.sort(key=lambda row: (-int(row["updated_ms"]), str(row["conversation"])))
    return rows


def _row(name: str, runs: list[RunInfo]) -> dict[str, Any]:
    last = runs[-1]
    return {
        "conversation": name,
        "runs": [r.run_id for r in runs],
        "turns": len(runs),
        "completed": sum(1 for r in runs if r.status == "completed"),
        "created_ms": runs[0].created_ms,
        "updated_ms": max(r.updated_ms for r in runs),
        "last_run_id": last.run_id,
        "last_status": last.status,
    }
