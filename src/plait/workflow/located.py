"""Values read from a file that remember their lines, and the problems met reading them.

The YAML and JSON readers build these; the loader turns a problem's place in the
document (``("nodes", 3, "retries")``) into the line it names. Builder-made
definitions hold plain dicts and lists instead, which ``plain`` also produces.
This module never reads a file.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

MAX_VALUES = 1_000_000
MAX_DEPTH = 100

Place = tuple[str | int, ...]
"""Where a problem is, as a path into the document: ``("nodes", 3, "retries")``."""

Found = list[tuple[int | None, str]]
"""Problems met while parsing: (line, message)."""


class LineMap(dict[str, Any]):
    """A mapping read from a file, with the line of itself and of each key."""

    def __init__(self, line: int) -> None:
        super().__init__()
        self.line = line
        self.key_lines: dict[str, int] = {}


class LineList(list[Any]):
    """A list read from a file, with the line of itself and of each item."""

    def __init__(self, line: int) -> None:
        super().__init__()
        self.line = line
        self.item_lines: list[int] = []


class Refused(Exception):
    """A document a reader gives up on: the line and why."""

    def __init__(self, line: int | None, message: str) -> None:
        super().__init__(message)
        self.line = line
        self.message = message


def plain(value: Any) -> Any:
    """Plain dicts and lists (what a definition keeps), from file values or builder values."""
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value


def line_at(doc: Any, place: Place) -> int | None:
    """The line of the deepest part of ``place`` that the document has."""
    line: int | None = getattr(doc, "line", None)
    node = doc
    for part in place:
        if isinstance(node, LineMap) and isinstance(part, str) and part in node:
            line, node = node.key_lines.get(part, line), node[part]
        elif isinstance(node, LineList) and isinstance(part, int) and 0 <= part < len(node):
            line, node = node.item_lines[part], node[part]
        else:
            break
    return line


def show(value: Any) -> str:
    """A value as the user wrote it, JSON-style and short."""
    try:
        text = json.dumps(value, ensure_ascii=False, default=repr)
    except ValueError:  # NaN, circular, an int with more digits than Python prints
        try:
            text = repr(value)
        except ValueError:
            text = f"an integer of {value.bit_length()} bits" if isinstance(value, int) else "?"
    return text if len(text) <= 60 else text[:57] + "..."


def combine_surrogates(text: str, line: int | None, found: Found) -> str:
    """Join escaped UTF-16 surrogate pairs (``\\ud83d\\ude00``); a lone one is a problem."""
    if not any("\ud800" <= ch <= "\udfff" for ch in text):
        return text
    try:
        return text.encode("utf-16", "surrogatepass").decode("utf-16")
    except UnicodeDecodeError:
        found.append((line, "a string contains a lone UTF-16 surrogate (not valid Unicode)"))
        return text.encode("utf-8", "replace").decode("utf-8")
