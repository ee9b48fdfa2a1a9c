"""``--input JSON`` and ``--input @FILE``: a verb's JSON argument, read before any store."""

from __future__ import annotations

from typing import Any

from plait import files
from plait.core.canonical import CanonicalJSONError, loads
from plait.core.errors import PlaitError


def parse_input(value: str | None, option: str = "--input") -> Any:
    """``--input JSON`` or ``--input @FILE`` (``option`` names it in errors: PLAIT-E019);
    absent means no input ({})."""
    if value is None:
        return None
    text = value
    if value.startswith("@"):
        try:
            text = files.read_text(value[1:])
        except files.UnreadableFile as exc:
            reason = exc.refusal.reason.removeprefix("cannot read the file: ")
            shown = files.shown(value)
            raise PlaitError("E019", f"{option} {shown}: cannot read the file: {reason}") from None
    try:
        # Text no UTF-8 can hold (a lone surrogate escape) parses; the Runtime refuses it.
        return loads(text, unique_keys=True)
    except CanonicalJSONError as exc:
        raise PlaitError("E019", f"{option}: not valid JSON: {exc}") from exc
