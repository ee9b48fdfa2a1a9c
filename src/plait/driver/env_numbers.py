"""Numbers the driver reads from its environment (``PLAIT_NOW_MS``, ``PLAIT_LEASE_TTL_MS``,
``PLAIT_MAX_CHECKPOINT_BYTES``): one reader, so a malformed value is PLAIT-E019 naming the
variable, never a traceback, whichever of them it is."""

from __future__ import annotations

import os

from plait.core.errors import PlaitError


def whole_number(name: str, minimum: int) -> int | None:
    """The value of ``name`` as a whole number >= ``minimum``; None when unset or blank."""
    value = os.environ.get(name, "").strip()
    if not value:
        return None
    if not value.isascii() or not value.isdigit() or int(value) < minimum:
        raise PlaitError(
            "E019", f"{name} must be a whole number of at least {minimum}, not {value!r}"
        )
    return int(value)
