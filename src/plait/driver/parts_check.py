"""Content parts checked before a run is created (PLAIT-E032): nothing is lost.

A part a provider would refuse — an unknown media type, data that is not base64, more
bytes than ``PLAIT_MAX_PART_BYTES`` — would otherwise fail the run's first turn after
the run (and the part's bytes) were journaled. Checking the input first keeps a refused
part out of the store altogether, and the message names the part and the cause.
"""

from __future__ import annotations

import binascii
from base64 import b64decode
from typing import Any

from plait.core.errors import PlaitError
from plait.core.parts import FILE_TYPES, IMAGE_TYPES, PARTS_KEY, is_part
from plait.driver.env_numbers import whole_number

MAX_PART_ENV = "PLAIT_MAX_PART_BYTES"
DEFAULT_MAX_PART_BYTES = 5 * 1024 * 1024
"""Anthropic's bound on one image; OpenAI's is larger, so both accept what passes."""


def max_part_bytes() -> int:
    """Decoded bytes one content part may hold (``PLAIT_MAX_PART_BYTES``)."""
    return whole_number(MAX_PART_ENV, 1) or DEFAULT_MAX_PART_BYTES


def check_parts(input: Any, where: str = "the run's input") -> None:
    """PLAIT-E032 for the first content part of ``input`` that no provider would take."""
    if not isinstance(input, dict) or PARTS_KEY not in input:
        return
    parts = input[PARTS_KEY]
    if not isinstance(parts, list) or not parts:
        raise _refused(where, f"'{PARTS_KEY}' must be a non-empty list of content parts")
    limit = max_part_bytes()
    for index, part in enumerate(parts):
        problem = part_problem(part, limit)
        if problem is not None:
            raise _refused(where, f"{PARTS_KEY}[{index}]: {problem}")


def part_problem(part: Any, limit: int) -> str | None:
    """Why ``part`` cannot be sent, or None."""
    if not is_part(part):
        return (
            "not a content part ({type: text, text} | {type: image|file, media_type, data}"
            " | {type: image, url})"
        )
    kind = part["type"]
    if kind == "text" or "url" in part:
        return None
    accepted = IMAGE_TYPES if kind == "image" else FILE_TYPES
    if part["media_type"] not in accepted:
        return (
            f"media type '{part['media_type']}' is not accepted for a {kind} part"
            f" (accepted: {', '.join(accepted)})"
        )
    data = part["data"]
    size = len(data) * 3 // 4 - (len(data) - len(data.rstrip("=")))  # base64's own length
    if size > limit:  # refused without decoding megabytes
        return _too_large(size, limit)
    try:
        size = len(b64decode(data, validate=True))
    except (binascii.Error, ValueError):
        return "'data' is not base64"
    return _too_large(size, limit) if size > limit else None


def _too_large(size: int, limit: int) -> str:
    return f"{size} bytes, more than the {limit} a part may hold ({MAX_PART_ENV})"


def _refused(where: str, why: str) -> PlaitError:
    return PlaitError("E032", f"content part refused in {where}: {why}")
