"""A run on a SQLite store whose lease is held, and the rows of a counting loop's waves:
what the tests of a wave's commit and of the poll between waves drive by hand."""

from __future__ import annotations

from pathlib import Path

from plait.core.keys import JournalKey
from plait.store import (
    CheckpointWrite,
    IntentWrite,
    LeaseOwner,
    RecordWrite,
    ResultWrite,
    RunInfo,
    SqliteStore,
    Write,
)

RUN = "r1"
OWNER = LeaseOwner("host-a", 1, 0)


def wave(n: int) -> list[Write]:
    """The rows of a counting loop's wave: feed, result, checkpoint, next intent."""
    done = JournalKey(RUN, "", "step", n, 0, "tool")
    nxt = JournalKey(RUN, "", "step", n + 1, 0, "tool")
    return [
        RecordWrite("feed", {"events": [{"clock": n}]}),
        ResultWrite(done, {"Completed": {"result": {"i": n}}}, n, 8),
        CheckpointWrite(n, b'{"i":%d}' % n),
        IntentWrite(nxt, "step", {"i": n}, n + 1, n, f"idem-{n}"),
    ]


def leased(path: Path) -> tuple[SqliteStore, int]:
    """A store on ``path`` holding run ``RUN`` under a lease, its first wave committed
    (the commit that reads the last seq); the store and the lease's token."""
    store = SqliteStore(path)
    store.create_run(RunInfo(RUN, "wf", "running", "alice", None, 1, 1), {"m": 1})
    token = store.acquire_lease(RUN, OWNER, 0, 60_000, lambda _: True)
    store.commit(RUN, token, wave(1))
    return store, token
