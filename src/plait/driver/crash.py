"""Crash injection for tests: kill this process at a chosen journal boundary.

``PLAIT_CRASH_AT=intent:N`` kills the driver right after the commit that made
its N-th intent durable (before that effect is dispatched);
``PLAIT_CRASH_AT=result:N`` kills it after the N-th effect executed but before
its result is committed; ``PLAIT_CRASH_AT=migrate:1`` kills ``plait migrate`` holding
the run's lease before its commit, ``migrate:2`` right after it. Counts are per
process: every drive in it (a child run driven inside its parent's drive, a parked
run's children resumed by the parent's resume) shares one counter. Read by the driver
only; the core never sees it.
"""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass

_SHARED: dict[str, CrashPoint] = {}
"""The process's crash point per ``PLAIT_CRASH_AT`` value: counts are per process."""


@dataclass
class CrashPoint:
    boundary: str
    n: int
    seen: int = 0

    @staticmethod
    def from_env() -> CrashPoint | None:
        spec = os.environ.get("PLAIT_CRASH_AT", "").strip()
        if not spec:
            return None
        point = _SHARED.get(spec)
        if point is None:
            boundary, _, n = spec.partition(":")
            if boundary not in ("intent", "result", "migrate") or not n.isdigit():
                raise ValueError(
                    f"PLAIT_CRASH_AT must be intent:N, result:N or migrate:N, got {spec!r}"
                )
            point = _SHARED[spec] = CrashPoint(boundary, int(n))
        return point

    def passed(self, boundary: str, count: int = 1) -> None:
        """Count ``count`` boundaries of this kind; die when the N-th is reached."""
        if boundary != self.boundary:
            return
        self.seen += count
        if self.seen >= self.n:
            os.kill(os.getpid(), signal.SIGKILL)
