"""Names a checkpoint and a journal spell: the budget axes and a tool call's executor.

Apart from ``core.env`` (which re-exports them) so that reading a run back (``plait
show``, ``plait asks``) decodes a checkpoint without importing the plan, its conditions
and reducers, which only a step needs.
"""

from __future__ import annotations

from enum import StrEnum


class BudgetAxis(StrEnum):
    """A budget axis; the value is its name in JSON and on the command line."""

    SUPERSTEPS = "supersteps"
    TOKENS = "tokens"
    USD = "usd"
    WALL_MS = "wall_ms"
    STORAGE_BYTES = "storage_bytes"


CALL_PREFIX = "call:"
"""Executor of a model-issued tool call: ``call:<tool name>``; its input is the arguments.
Named here, apart from the loop that emits them, so readers of a journal (``plait
show``) need not import it."""
