"""Who this process is, for leases: host, pid and process start time (docs/architecture.md §5.7).

A claimant on the same host may take a lease over at once when its holder's
process no longer exists; the start time tells a recycled pid apart.
"""

from __future__ import annotations

import os
import socket
from functools import cache

from plait.store.records import LeaseOwner


def _start_ticks(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    # The command name may contain spaces; fields resume after the last ')'.
    fields = stat[stat.rfind(b")") + 2 :].split()
    return int(fields[19])


@cache
def this_process() -> LeaseOwner:
    pid = os.getpid()
    return LeaseOwner(socket.gethostname(), pid, _start_ticks(pid) or 0)


def owner_alive(owner: LeaseOwner) -> bool:
    """False only when we can tell the holder's process is gone (same host)."""
    if owner.host != socket.gethostname():
        return True
    try:
        os.kill(owner.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    ticks = _start_ticks(owner.pid)
    return ticks is None or owner.started_ms == 0 or ticks == owner.started_ms
