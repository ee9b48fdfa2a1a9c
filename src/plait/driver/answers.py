"""Answering asks (ARCHITECTURE.md §8): checks, in order, then one journaled result.

An answer is checked in this order: the run exists (E017); the ask is pending,
unanswered and unexpired (E011); an approval's responder is not the run's
principal (E012); the answer matches the ask's schema (E028). A refused answer
is journaled as a ``rejected_response`` record before the error is raised, and
never counts as the first answer. ``respond`` only journals; ``resume`` (or a
worker) drives the run on.
"""

from __future__ import annotations

from typing import Any

import jsonschema

from plait.core.canonical import loads
from plait.core.errors import PlaitError
from plait.core.keys import JournalKey
from plait.core.outcomes import Completed, EffectOutcome, Failed, journal_bytes
from plait.core.state import SchedulerState
from plait.store.base import Store
from plait.store.records import RecordWrite, ResultWrite, Write


def current_state(store: Store, run_id: str) -> SchedulerState | None:
    meta = store.latest_checkpoint(run_id)
    if meta is None:
        return None
    return SchedulerState.from_json(loads(store.read_checkpoint(run_id, meta.seq))["scheduler"])


def pending_asks(store: Store, run_id: str) -> list[dict[str, Any]]:
    """The asks a run waits on (timers excluded), each as announced in its envelope."""
    state = current_state(store, run_id)
    if state is None or state.is_terminal():
        return []
    return [
        dict(entry["ask"], run_id=run_id)
        for _, entry in sorted(state.pending_asks.items())
        if "ask" in entry
    ]


def _refuse(store: Store, run_id: str, ask_id: str, by: str, code: str, message: str) -> PlaitError:
    body = {"ask_id": ask_id, "by": by, "code": f"PLAIT-{code}", "message": message}
    store.commit(run_id, None, [RecordWrite("rejected_response", body)])
    return PlaitError(code, message)


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
    """Journal one answer to ``ask_id``; returns the accepted answer's summary."""
    store.get_run(run_id)  # E017
    manifest = store.manifests(run_id)[0]
    state = current_state(store, run_id)
    entry = None if state is None or state.is_terminal() else state.pending_asks.get(ask_id)
    if entry is None or "ask" not in entry:
        raise _refuse(
            store, run_id, ask_id, by, "E011", f"run '{run_id}' has no pending ask '{ask_id}'"
        )
    key = JournalKey.from_json(entry["key"])
    if key in store.load_journal(run_id).results:
        raise _refuse(store, run_id, ask_id, by, "E011", f"ask '{ask_id}' was already answered")
    ask = entry["ask"]
    expires_at = ask.get("expires_at")
    if expires_at is not None and now_ms // 1000 > expires_at:
        raise _refuse(store, run_id, ask_id, by, "E011", f"ask '{ask_id}' expired at {expires_at}")
    outcome = _outcome(store, run_id, ask_id, ask, by, manifest, result, deny, approve, reason)
    writes: list[Write] = [
        ResultWrite(key, outcome.to_json(), now_ms, journal_bytes(outcome)),
        RecordWrite("answer", {"ask_id": ask_id, "by": by}),
    ]
    try:
        store.commit(run_id, None, writes)
    except PlaitError as exc:
        if exc.code == "E020" and "already has a result" in str(exc):
            raise PlaitError("E011", f"ask '{ask_id}' was already answered") from exc
        raise
    return {"run_id": run_id, "ask_id": ask_id, "accepted": True, "by": by}


def _outcome(
    store: Store,
    run_id: str,
    ask_id: str,
    ask: dict[str, Any],
    by: str,
    manifest: dict[str, Any],
    result: Any,
    deny: str | None,
    approve: bool | None,
    reason: str | None,
) -> EffectOutcome:
    if ask.get("approval"):
        if by == manifest.get("principal"):
            raise _refuse(
                store,
                run_id,
                ask_id,
                by,
                "E012",
                f"'{by}' started run '{run_id}' and cannot approve its own request",
            )
        if approve is None:
            if deny is not None:
                approve, reason = False, deny
            elif isinstance(result, dict) and isinstance(result.get("approved"), bool):
                approve, reason = result["approved"], result.get("reason", reason)
            else:
                raise _refuse(
                    store,
                    run_id,
                    ask_id,
                    by,
                    "E028",
                    'an approval is answered with {"approved": true|false, "reason"?: "..."}',
                )
        return Completed({"approved": approve, "by": by, "reason": reason})
    if approve is not None:
        raise _refuse(
            store,
            run_id,
            ask_id,
            by,
            "E028",
            f"ask '{ask_id}' is not an approval: answer it with `plait respond --result`",
        )
    if deny is not None:
        return Failed("UserAborted", f"denied by {by}: {deny}")
    schema = _output_schema(store, run_id, ask)
    if schema is not None:
        errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(result), key=str)
        if errors:
            where = "/".join(str(p) for p in errors[0].absolute_path) or "(root)"
            raise _refuse(
                store,
                run_id,
                ask_id,
                by,
                "E028",
                f"answer to ask '{ask_id}' does not match its schema at {where}:"
                f" {errors[0].message}",
            )
    return Completed(result)


def _output_schema(store: Store, run_id: str, ask: dict[str, Any]) -> Any:
    manifest = store.manifests(run_id)[0]
    for node in manifest["workflow"]["nodes"]:
        if node["id"] == ask["node"] and node["kind"] == "ask":
            return node["executor"]["spec"].get("output_schema")
    return None
