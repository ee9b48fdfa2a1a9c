"""``plait run --stream``: the pieces of each model turn printed as the provider sends them.

For a human, answer text goes to stdout as it comes and each tool call shows as
``→ name {arguments…}`` on a line of its own; thinking is not printed. With ``--json``
every delta is one line ``{"delta": {...}}`` (``TurnDelta.to_json``) before the run's
usual object, which stays the last line. Printing is observation only: the journal keeps
each completed turn, whatever was printed.
"""

from __future__ import annotations

import sys

from plait.cli.output import Output
from plait.driver.deltas import TurnDelta


class DeltaPrinter:
    """A delta observer that prints; remembers the turn and call it is in to break lines."""

    def __init__(self, out: Output) -> None:
        self._out = out
        self._at: tuple[str, int, str, int] | None = None  # run, turn, kind, call index
        self._line_open = False

    def __call__(self, turn: TurnDelta) -> None:
        if self._out.json_mode:
            self._out.data({"delta": turn.to_json()})
            return
        delta = turn.delta
        if delta.kind == "thinking":
            return
        at = (turn.run_id, turn.turn, delta.kind, delta.index)
        if at != self._at:
            self._at = at
            if self._line_open:
                self._write("\n")
            if delta.kind == "tool_call":
                self._write(f"→ {delta.name or '?'} ")
        self._write(delta.text)

    def finish(self) -> None:
        """End the streamed text's line before the run's summary."""
        if self._line_open:
            self._write("\n")

    def _write(self, text: str) -> None:
        if not text:
            return
        sys.stdout.write(text)
        sys.stdout.flush()
        self._line_open = not text.endswith("\n")
