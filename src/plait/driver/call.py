"""What a running tool may know about the effect it serves.

``current_call()`` inside a Python tool returns the run id, node, attempt and
the idempotency key of the effect (the same key on a redelivery), so a tool
with side effects can deduplicate them — the way a subprocess tool reads
``PLAIT_IDEMPOTENCY_KEY``.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass

from plait.core.keys import JournalKey


@dataclass(frozen=True)
class CallInfo:
    run_id: str
    node: str
    task_path: str
    attempt: int
    effect_seq: int
    idempotency_key: str


_current: ContextVar[tuple[JournalKey, str] | None] = ContextVar("plait_current_call", default=None)
"""The effect's key and idempotency key: ``current_call`` builds its ``CallInfo`` only when
a tool asks (most never do; a frozen dataclass costs about as much as the tool call's
own bookkeeping, so it is not built for every call)."""


def current_call() -> CallInfo | None:
    """The effect the calling tool is serving, or None outside a tool call."""
    serving = _current.get()
    if serving is None:
        return None
    key, idempotency_key = serving
    return CallInfo(
        key.run_id, key.node, key.task_path, key.attempt, key.effect_seq, idempotency_key
    )


def set_current_call(key: JournalKey | None, idempotency_key: str = "") -> None:
    """The effect a tool called in this context serves (None: no effect)."""
    _current.set(None if key is None else (key, idempotency_key))
