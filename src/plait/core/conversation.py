"""Conversations (docs/chat.md): a run that goes on from earlier runs' transcripts.

A continuation run's input carries the history under the reserved key ``$history``:
``{"messages": [...], "prompt_tokens": N, ...}`` plus what the driver records of where
the history came from (the conversation, the earlier runs, a digest). When the run's
entry loop opens, its transcript starts with those messages, then its own first entry;
the key leaves the context (the loop holds the history now), and the loop measures its
first turn from ``prompt_tokens`` (the last turn the history was sent with), so a long
conversation folds before its next turn like any long transcript (§6.5). Because the
history is in the input, the run is verified against the history it started with,
whatever later turns of the conversation do; being the earlier runs' entries, it is
stored as the same content-addressed nodes (§5.3), not as a copy.
"""

from __future__ import annotations

from typing import Any

from plait.core.transcript import Entry

HISTORY_KEY = "$history"
"""The reserved input key holding a continuation's history."""


def take_history(
    context: dict[str, Any],
) -> tuple[list[dict[str, Any]], int, dict[str, Any]] | None:
    """``(history entries, prompt tokens of its last turn, context without the key)``
    when ``context`` continues a conversation, else None."""
    history = context.get(HISTORY_KEY)
    if not isinstance(history, dict):
        return None
    entries: list[dict[str, Any]] = [
        Entry(m) for m in history.get("messages", ()) if isinstance(m, dict)
    ]
    tokens = history.get("prompt_tokens", 0)
    rest = {k: v for k, v in context.items() if k != HISTORY_KEY}
    return entries, tokens if type(tokens) is int and tokens > 0 else 0, rest
