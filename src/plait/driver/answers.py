"""Answering asks (docs/architecture.md §8): checks, in order, then one journaled result.

An answer is checked in this order: the run exists (E017); the ask is pending,
unanswered and unexpired (E011); an approval's responder is not the run's
principal nor one who edited its state (a fork's ``editors``) (E012); the answer
matches the ask's schema (E028). A refused answer is journaled as a
``rejected_response`` record before the error is raised, and never counts as the first
answer. ``respond`` only journals; ``resume`` (or a worker) drives the run on.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from plait.core.canonical import CanonicalJSONError, require_json
from plait.core.errors import PlaitError
from plait.core.keys import child_run_id
from plait.core.outcomes import Completed, EffectOutcome, Failed, journal_bytes
from plait.core.pending import announced
from plait.core.state import SchedulerState
from plait.driver.checkpoints import latest_state
from plait.store.base import Store
from plait.store.records import RecordWrite, ResultWrite, Write


def pending_asks(
    store: Store,
    run_id: str,
    state: SchedulerState | None = None,
    *,
    children: bool = True,
    now_ms: int | None = None,
) -> list[dict[str, Any]]:
    """The asks ``run_id`` waits on, each as announced, with its ``run_id``: its own (not
    timers) and, with ``children``, those of the child runs it waits on (§3.9).

    ``state`` is the run's latest checkpoint (read when not given). An ask whose answer is
    journaled is not pending, though that checkpoint may still hold it: the run is parked
    on its other asks and the next drive settles it (a park checkpoints only new asks).
    Nor, given the clock (``now_ms``), is an ask that has expired: it can no longer be
    answered (PLAIT-E011), and the next drive fails it with Timeout.
    """
    if state is None:
        state = latest_state(store, run_id)
    if state is None or state.is_terminal():
        return []
    entries = [e for _, e in sorted(state.pending_asks.items()) if e.is_ask or e.child is not None]
    if not entries:
        return []
    keys = [entry.key for entry in entries]
    settled = store.settled(run_id, keys)
    asks: list[dict[str, Any]] = []
    for entry, key in zip(entries, keys, strict=True):
        if key in settled:
            continue
        if entry.ask is not None:
            if now_ms is None or not expired(entry.ask, now_ms):
                asks.append(dict(announced(entry.ask), run_id=run_id))
        elif children:  # the driver resumes the child this names (``child_run_id``)
            child = child_run_id(run_id, key)  # a fork's own child
            child_state = _child_state(store, child)
            if child_state is not None:
                asks.extend(pending_asks(store, child, child_state, now_ms=now_ms))
    return asks


def expired(ask: dict[str, Any], now_ms: int) -> bool:
    """Whether an ask's ``expires_at`` (Unix seconds) has passed at ``now_ms``."""
    expires_at = ask.get("expires_at")
    return expires_at is not None and now_ms // 1000 > expires_at


def owner_of(
    store: Store, run_id: str, ask_id: str, state: SchedulerState | None = None
) -> str | None:
    """The run that registered ``ask_id``, answered or not: ``run_id`` or a child run it
    waits on, so a child's ask is answered through its parent (§3.9); None if none did."""
    if state is None:
        state = latest_state(store, run_id)
    if state is None or state.is_terminal():
        return None
    entry = state.pending_asks.get(ask_id)
    if entry is not None and entry.is_ask:
        return run_id
    for _, entry in sorted(state.pending_asks.items()):
        if entry.child is not None:
            child = child_run_id(run_id, entry.key)  # a fork's own child
            child_state = _child_state(store, child)
            found = None if child_state is None else owner_of(store, child, ask_id, child_state)
            if found is not None:
                return found
    return None


def _child_state(store: Store, child: str) -> SchedulerState | None:
    """A child run's latest state; None before it has one, or when there is no such run
    (a listing shows what exists rather than failing)."""
    try:
        return latest_state(store, child)
    except PlaitError as exc:
        if exc.code == "E017":
            return None
        raise


@dataclass(frozen=True)
class Answer:
    """One answer to one ask: a ``result``, a ``deny`` reason, or an approval decision."""

    ask_id: str
    result: Any = None
    deny: str | None = None
    approve: bool | None = None
    reason: str | None = None


Refuse = Callable[[str, str, str], PlaitError]
"""(ask id, code, message) -> the error to raise, after journaling the refusal or not."""


def respond(
    store: Store,
    run_id: str,
    ask_id: str,
    *,
    by: str,
    now_ms: int,
    result: Any = None,
    deny: str | None = None,
    approve: bool | None = None,
    reason: str | None = None,
) -> dict[str, Any]:
    """Journal one answer to ``ask_id``; returns the accepted answer's summary.

    A refused answer is journaled as a ``rejected_response`` record first.
    """

    def refuse(ask: str, code: str, message: str) -> PlaitError:
        body = {"ask_id": ask, "by": by, "code": f"PLAIT-{code}", "message": message}
        store.commit(run_id, None, [RecordWrite("rejected_response", body)])
        return PlaitError(code, message)

    answer = Answer(ask_id, result, deny, approve, reason)
    _journal(store, run_id, [answer], by=by, now_ms=now_ms, refuse=refuse)
    return {"run_id": run_id, "ask_id": ask_id, "accepted": True, "by": by}


def respond_all(
    store: Store, run_id: str, answers: Sequence[Answer], *, by: str, now_ms: int
) -> list[dict[str, Any]]:
    """Journal several answers to asks of ``run_id`` at once, or none of them.

    Every answer is checked as ``respond`` checks one; the first refused one raises and
    nothing is journaled, not even the refusal. The accepted ones are one commit.
    """

    def refuse(ask: str, code: str, message: str) -> PlaitError:
        return PlaitError(code, message)

    ids = [a.ask_id for a in answers]
    repeated = sorted({i for i in ids if ids.count(i) > 1})
    if repeated:
        raise PlaitError("E028", f"ask(s) {', '.join(repeated)} answered twice in one batch")
    _journal(store, run_id, answers, by=by, now_ms=now_ms, refuse=refuse)
    return [{"run_id": run_id, "ask_id": i, "accepted": True, "by": by} for i in ids]


def _journal(
    store: Store,
    run_id: str,
    answers: Sequence[Answer],
    *,
    by: str,
    now_ms: int,
    refuse: Refuse,
) -> None:
    store.get_run(run_id)  # E017
    manifest = store.manifests(run_id)[-1]
    state = latest_state(store, run_id)
    pending = [] if state is None else list(state.pending_asks.values())
    answered = store.settled(run_id, [e.key for e in pending])
    writes: list[Write] = []
    for answer in answers:
        ask_id = answer.ask_id
        try:
            require_json(answer.result, "result")
        except CanonicalJSONError as exc:  # a malformed request, not a refused answer
            raise PlaitError("E019", f"answer to ask '{ask_id}': {exc}") from None
        entry = None if state is None or state.is_terminal() else state.pending_asks.get(ask_id)
        if entry is None or entry.ask is None:
            raise refuse(ask_id, "E011", f"run '{run_id}' has no pending ask '{ask_id}'")
        key = entry.key
        if key in answered:
            raise refuse(ask_id, "E011", f"ask '{ask_id}' was already answered")
        ask = entry.ask
        if expired(ask, now_ms):
            raise refuse(ask_id, "E011", f"ask '{ask_id}' expired at {ask['expires_at']}")
        outcome = _outcome(run_id, ask, by, manifest, answer, refuse)
        writes.append(ResultWrite(key, outcome.to_json(), now_ms, journal_bytes(outcome)))
        writes.append(RecordWrite("answer", {"ask_id": ask_id, "by": by}))
    try:
        store.commit(run_id, None, writes)
    except PlaitError as exc:
        if exc.code == "E020" and "already has a result" in str(exc):
            one = len(answers) == 1
            which = f"ask '{answers[0].ask_id}'" if one else f"an ask of run '{run_id}'"
            raise PlaitError("E011", f"{which} was already answered") from exc
        raise


def _outcome(
    run_id: str,
    ask: dict[str, Any],
    by: str,
    manifest: dict[str, Any],
    answer: Answer,
    refuse: Refuse,
) -> EffectOutcome:
    ask_id = answer.ask_id
    result, deny, approve, reason = answer.result, answer.deny, answer.approve, answer.reason
    if ask.get("approval"):
        if by == manifest.get("principal"):
            raise refuse(
                ask_id,
                "E012",
                f"'{by}' started run '{run_id}' and cannot approve its own request",
            )
        if by in manifest.get("editors", ()):  # `plait fork --set`: they made this state
            raise refuse(
                ask_id,
                "E012",
                f"'{by}' edited the state of run '{run_id}' (a fork) and cannot approve its"
                " requests",
            )
        if approve is None:
            if deny is not None:
                approve, reason = False, deny
            elif isinstance(result, dict) and isinstance(result.get("approved"), bool):
                approve, reason = result["approved"], result.get("reason", reason)
            else:
                raise refuse(
                    ask_id,
                    "E028",
                    'an approval is answered with {"approved": true|false, "reason"?: "..."}',
                )
        return Completed({"approved": approve, "by": by, "reason": reason})
    if approve is not None:
        raise refuse(
            ask_id,
            "E028",
            f"ask '{ask_id}' is not an approval: answer it with `plait respond --result`",
        )
    if deny is not None:
        return Failed("UserAborted", f"denied by {by}: {deny}")
    schema = output_schema(manifest, ask)
    if schema is not None:
        import jsonschema  # only an answer checked against a schema pays for it

        errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(result), key=str)
        if errors:
            where = "/".join(str(p) for p in errors[0].absolute_path) or "(root)"
            raise refuse(
                ask_id,
                "E028",
                f"answer to ask '{ask_id}' does not match its schema at {where}:"
                f" {errors[0].message}",
            )
    return Completed(result)


def output_schema(manifest: dict[str, Any], ask: dict[str, Any]) -> Any:
    """The answer schema of the ask node ``ask`` names in ``manifest``'s version."""
    for node in manifest["workflow"]["nodes"]:
        if node["id"] == ask["node"] and node["kind"] == "ask":
            return node["executor"]["spec"].get("output_schema")
    return None
