"""Pure transcript functions shared by the loop, the driver and verify (§6.4, §6.5).

``bound_tool_content`` decides what a tool result looks like *in the transcript*
(the journal always keeps it whole); ``fold_range`` chooses which entries a
summary replaces. Both depend only on their arguments.
"""

from __future__ import annotations

import copy
from typing import Any, NoReturn

from plait.core.canonical import JSON, dumps


class Entry(dict[str, Any]):
    """A transcript entry: a JSON object that never changes once made.

    Being immutable, a store may remember its encoding by identity, so a turn costs
    the same whatever the length of the conversation (§5.3).
    """

    __slots__ = ()

    def _immutable(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise TypeError("transcript entries never change once made")

    __setitem__ = _immutable
    __delitem__ = _immutable
    clear = _immutable
    pop = _immutable
    popitem = _immutable
    setdefault = _immutable
    update = _immutable
    __ior__ = _immutable

    def __copy__(self) -> Entry:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> dict[str, Any]:
        return {k: copy.deepcopy(v, memo) for k, v in self.items()}

    def __reduce__(self) -> tuple[Any, ...]:
        return (Entry, (dict(self),))


def content_text(value: JSON) -> str:
    """A tool result's canonical text (strings stay as they are)."""
    return value if isinstance(value, str) else dumps(value)


def bound_tool_content(value: JSON, limit: int | None) -> JSON:
    """The head of an over-long result plus a marker saying how much was left out."""
    if limit is None:
        return value
    text = content_text(value)
    if len(text) <= limit:
        return value
    omitted = len(text) - limit
    return f"{text[:limit]}… [{omitted} more characters omitted from this tool result]"


def fold_range(messages: list[dict[str, Any]]) -> tuple[int, int] | None:
    """``[start, end)`` of the entries a summary may replace, or None if nothing can fold.

    Keeps the opening (any ``system`` entries and the first entry after them: the
    instruction and the input), never separates an assistant entry from the tool
    results that follow it, and leaves the most recent exchange (from the last
    assistant entry on) unfolded.
    """
    start = 1
    while start < len(messages) and messages[start - 1].get("role") == "system":
        start += 1
    last_assistant = None
    for index in range(len(messages) - 1, 0, -1):
        if messages[index].get("role") == "assistant":
            last_assistant = index
            break
    if last_assistant is None or last_assistant <= start:
        return None
    return (start, last_assistant)


def summary_entry(text: str, folded: int, fold_number: int) -> Entry:
    """The user entry that replaces a folded range."""
    return Entry(
        role="user", content=f"[Summary {fold_number} of {folded} earlier messages] {text}"
    )
