"""The first entries of an abstract node's transcript, as each engine epoch writes them.

The opening of a loop is journaled (it is the start of every ``llm`` effect's
``messages``), so how it looks is part of what a run's engine epoch pins (§5.5): a run
is replayed with the epoch it was written by, and each epoch keeps its own opening here.

- Epoch 1: ONE user entry, ``{"instruction": ..., "context": ...}``, sent as JSON text.
- Epoch 2: the instruction as a ``system`` entry (none when it is empty), then the run's
  input as a ``user`` entry: a context holding one string is that text, content parts
  (``$parts``) are a list of parts, anything else is the context object (sent as
  canonical JSON text).

A conversation's next run opens with the earlier runs' transcript (``continued_entries``)
and a handoff's receiving agent with the handed transcript (``handed_entries``).
Pure: depends only on its arguments.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from plait.core.canonical import dumps
from plait.core.parts import PARTS_KEY, is_parts

SYSTEM_ENTRIES_EPOCH = 2
"""The first engine epoch whose transcripts open with a ``system`` entry."""


def opening_entries(
    instruction: str, context: Mapping[str, Any], epoch: int
) -> list[dict[str, Any]]:
    """The entries a fresh loop starts with."""
    if epoch < SYSTEM_ENTRIES_EPOCH:
        return [{"role": "user", "content": {"instruction": instruction, "context": context}}]
    return [*_system(instruction), {"role": "user", "content": user_content(context)}]


def continued_entries(
    earlier: Sequence[Mapping[str, Any]], instruction: str, context: Mapping[str, Any], epoch: int
) -> list[dict[str, Any]]:
    """A conversation's next loop: the earlier runs' transcript, then this run's opening.
    From epoch 2 on, this node's instruction is the one system entry, first."""
    if epoch < SYSTEM_ENTRIES_EPOCH:
        return [*(dict(m) for m in earlier), *opening_entries(instruction, context, epoch)]
    kept = [dict(m) for m in earlier if m.get("role") != "system"]
    return [*_system(instruction), *kept, {"role": "user", "content": user_content(context)}]


def handed_entries(
    handed: Sequence[Mapping[str, Any]], instruction: str, note: dict[str, Any], epoch: int
) -> list[dict[str, Any]]:
    """A receiving agent's first entries: the handed transcript, the transfer call's
    result (``note``) and the receiving node's instruction."""
    if epoch < SYSTEM_ENTRIES_EPOCH:
        kept = [dict(m) for m in handed]
        return [*kept, note, {"role": "user", "content": {"instruction": instruction}}]
    # The receiver's instruction replaces the sender's as the system text.
    kept = [dict(m) for m in handed if m.get("role") != "system"]
    return [*_system(instruction), *kept, note]


def user_content(context: Mapping[str, Any]) -> Any:
    """The run's input as the content of a user entry (epoch 2 on).

    One string value (``{"prompt": "..."}``, ``{"input": "..."}``) is that text; content
    parts are the parts, after a text part with the other keys when there are any;
    anything else is the context object itself.
    """
    parts = context.get(PARTS_KEY)
    if isinstance(parts, list) and is_parts(parts):
        rest = {k: v for k, v in context.items() if k != PARTS_KEY}
        text = _text(rest)
        head = [{"type": "text", "text": text if isinstance(text, str) else dumps(text)}]
        return [*head, *parts] if rest else list(parts)
    return _text(context)


def _text(context: Mapping[str, Any]) -> Any:
    if len(context) == 1:
        (only,) = context.values()
        if isinstance(only, str):
            return only
    return dict(context)


def _system(instruction: str) -> list[dict[str, Any]]:
    return [{"role": "system", "content": instruction}] if instruction else []
