"""Strict JSON (RFC 8259) into values that remember their lines.

``json.loads`` forgets positions and keeps the last of duplicate keys; this
small reader keeps the line of every key and item and collects duplicates as
problems, so a ``.json`` workflow file reports problems by line like a YAML one.
"""

from __future__ import annotations

import bisect
import json
import math
import re
from collections.abc import Callable
from typing import Any

from plait.workflow.located import (
    MAX_DEPTH,
    Found,
    LineList,
    LineMap,
    Refused,
    combine_surrogates,
)

_scanstring: Callable[[str, int, bool], tuple[str, int]] = json.decoder.scanstring  # type: ignore[attr-defined]
_JSON_NUMBER = re.compile(r"(-?(?:0|[1-9][0-9]*))(\.[0-9]+)?([eE][-+]?[0-9]+)?", re.ASCII)


class _JsonReader:
    """Strict JSON (RFC 8259) into line-remembering values; duplicate keys are collected."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.newlines = [i for i, ch in enumerate(text) if ch == "\n"]
        self.found: Found = []

    def line(self, pos: int) -> int:
        return bisect.bisect_left(self.newlines, pos) + 1

    def refuse(self, pos: int, why: str) -> Refused:
        return Refused(self.line(pos), f"invalid JSON: {why}")

    def skip(self, pos: int) -> int:
        while pos < len(self.text) and self.text[pos] in " \t\n\r":
            pos += 1
        return pos

    def document(self) -> Any:
        value, end = self.value(0, 0)
        end = self.skip(end)
        if end != len(self.text):
            raise self.refuse(end, "extra data after the JSON value")
        return value

    def value(self, pos: int, depth: int) -> tuple[Any, int]:
        pos = self.skip(pos)
        if depth > MAX_DEPTH:
            raise self.refuse(pos, f"values are nested more than {MAX_DEPTH} levels deep")
        text = self.text
        if pos >= len(text):
            raise self.refuse(pos, "unexpected end of file")
        ch = text[pos]
        if ch == "{":
            return self.object(pos, depth)
        if ch == "[":
            return self.array(pos, depth)
        if ch == '"':
            return self.string(pos)
        for word, constant in (("true", True), ("false", False), ("null", None)):
            if text.startswith(word, pos):
                return constant, pos + len(word)
        match = _JSON_NUMBER.match(text, pos)
        if match is None:
            raise self.refuse(pos, f"unexpected character {ch!r}")
        integer, fraction, exponent = match.groups()
        try:
            if fraction or exponent:
                number: int | float = float(match.group())
                if not math.isfinite(number):
                    raise ValueError("too large")
            else:
                number = int(integer)
        except ValueError as exc:
            raise self.refuse(pos, f"number out of range ({exc})") from None
        return number, match.end()

    def string(self, pos: int) -> tuple[str, int]:
        try:
            value, end = _scanstring(self.text, pos + 1, True)
        except json.JSONDecodeError as exc:
            raise self.refuse(exc.pos, exc.msg) from None
        return combine_surrogates(value, self.line(pos), self.found), end

    def object(self, pos: int, depth: int) -> tuple[LineMap, int]:
        result = LineMap(self.line(pos))
        pos = self.skip(pos + 1)
        if self.text.startswith("}", pos):
            return result, pos + 1
        while True:
            pos = self.skip(pos)
            if not self.text.startswith('"', pos):
                raise self.refuse(pos, "expected a key in double quotes")
            key_line = self.line(pos)
            key, pos = self.string(pos)
            pos = self.skip(pos)
            if not self.text.startswith(":", pos):
                raise self.refuse(pos, "expected ':' after a key")
            value, pos = self.value(pos + 1, depth + 1)
            if key in result:
                self.found.append(
                    (key_line, f"duplicate key '{key}' (first at line {result.key_lines[key]})")
                )
            else:
                result[key] = value
                result.key_lines[key] = key_line
            pos = self.skip(pos)
            if self.text.startswith(",", pos):
                pos += 1
            elif self.text.startswith("}", pos):
                return result, pos + 1
            else:
                raise self.refuse(pos, "expected ',' or '}'")

    def array(self, pos: int, depth: int) -> tuple[LineList, int]:
        result = LineList(self.line(pos))
        pos = self.skip(pos + 1)
        if self.text.startswith("]", pos):
            return result, pos + 1
        while True:
            pos = self.skip(pos)
            result.item_lines.append(self.line(pos))
            value, pos = self.value(pos, depth + 1)
            result.append(value)
            pos = self.skip(pos)
            if self.text.startswith(",", pos):
                pos += 1
            elif self.text.startswith("]", pos):
                return result, pos + 1
            else:
                raise self.refuse(pos, "expected ',' or ']'")


def parse_json(text: str) -> tuple[Any, Found]:
    """The document (None when unreadable) and every problem met reading it."""
    reader = _JsonReader(text)
    try:
        return reader.document(), reader.found
    except Refused as exc:
        return None, [(exc.line, exc.message)]
