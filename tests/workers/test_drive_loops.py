"""A worker's drive threads keep their event loop from drive to drive, and end each drive
as ``asyncio.run`` would: left tasks cancelled, a loop whose executor ran closed."""

from __future__ import annotations

import asyncio
import contextvars
import time

from plait.driver.worker import _DriveLoops

MARK: contextvars.ContextVar[str] = contextvars.ContextVar("mark", default="unset")


async def running_loop() -> asyncio.AbstractEventLoop:
    return asyncio.get_running_loop()


async def leave_a_task() -> asyncio.Task[None]:
    return asyncio.create_task(asyncio.sleep(60))


async def in_the_executor() -> asyncio.AbstractEventLoop:
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, time.sleep, 0.01)
    return loop


async def mark_and_read() -> str:
    seen = MARK.get()
    MARK.set("set by a drive")
    return seen


def test_drives_on_one_thread_share_a_loop_and_end_as_asyncio_run_ends_them():
    loops = _DriveLoops()
    try:
        first = loops.run(running_loop())
        assert loops.run(running_loop()) is first  # kept, not made again

        left = loops.run(leave_a_task())
        assert left.cancelled()  # cancelled at the end of its drive
        assert not first.is_closed()

        assert loops.run(mark_and_read()) == "unset"
        assert loops.run(mark_and_read()) == "unset"  # each drive: a fresh context

        used = loops.run(in_the_executor())
        assert used is first and used.is_closed()  # closed as asyncio.run closes it
        again = loops.run(running_loop())
        assert again is not used and not again.is_closed()
    finally:
        loops.close()
    assert again.is_closed()
