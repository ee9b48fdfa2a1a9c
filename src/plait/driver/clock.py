"""The driver's clock, injectable so tests never sleep.

``PLAIT_NOW_MS`` pins the reading (milliseconds since the Unix epoch); it is
read here, by the driver, never by the core.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from plait.driver.env_numbers import whole_number

Clock = Callable[[], int]


def system_clock() -> int:
    return time.time_ns() // 1_000_000


def clock_from_env() -> Clock:
    """A fixed clock when ``PLAIT_NOW_MS`` is set, else the system clock."""
    value = whole_number("PLAIT_NOW_MS", 0)
    if value is None:
        return system_clock
    return lambda: value
