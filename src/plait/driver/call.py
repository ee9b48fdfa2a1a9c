"""What a running tool may know about the effect it serves.

``current_call()`` inside a Python tool returns the run id, node, attempt and
the idempotency key of the effect (the same key on a redelivery), so a tool
with side effects can deduplicate them — the way a subprocess tool reads
``PLAIT_IDEMPOTENCY_KEY``.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass


@dataclass(frozen=True)
class CallInfo:
    run_id: str
    node: str
    task_path: str
    attempt: int
    effect_seq: int
    idempotency_key: str


_current: ContextVar[CallInfo | None] = ContextVar("plait_current_call", default=None)


def current_call() -> CallInfo | None:
    """The effect the calling tool is serving, or None outside a tool call."""
    return _current.get()


def set_current_call(info: CallInfo | None) -> None:
    _current.set(info)
