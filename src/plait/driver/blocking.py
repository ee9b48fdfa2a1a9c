"""Running a drive to its end from synchronous code (``Runtime.run_sync`` and its kin)."""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def run_blocking(drive: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(drive)``, its main task ending with no result of its own: as it puts
    the SIGINT handler back, asyncio's runner formats the repr of that task, result
    included (a run's whole context, megabytes for a long one), only to drop it."""
    import asyncio  # not at import: ``plait runs`` and its kin never drive anything

    held: list[T] = []

    async def holding() -> None:
        held.append(await drive)

    asyncio.run(holding())
    return held[0]
