"""A worker's stop is safe in a signal handler: it takes no lock the interrupted main
thread may hold (``driver/wakeup.py``). With ``threading.Event`` it could hang a worker
on SIGTERM: the handler ran while the main thread held the Event's lock inside ``wait``."""

from __future__ import annotations

import signal
import threading
from contextlib import ExitStack

from plait import Runtime
from plait.driver.wakeup import Wakeup
from plait.driver.worker import Worker


def _locks_of(worker: Worker) -> list[object]:
    """Every lock the worker's own synchronisation objects hold while in use."""
    locks: list[object] = []
    for value in vars(worker).values():
        if isinstance(value, threading.Event):
            locks.append(value._cond)  # type: ignore[attr-defined]
        elif isinstance(value, type(threading.Lock())):
            locks.append(value)
    return locks


def test_stop_completes_while_the_calling_thread_holds_every_lock_of_the_worker(tmp_path):
    """What a signal handler meets in the worst case: the thread it interrupts is inside
    one of the worker's locks. ``stop`` must complete anyway, and wake the loop."""
    with Runtime(f"sqlite:///{tmp_path}/w.db") as rt:
        worker = Worker(rt, once=True)
        done: list[bool] = []

        def handler_in_the_worst_place() -> None:
            with ExitStack() as held:
                for lock in _locks_of(worker):
                    held.enter_context(lock)  # type: ignore[arg-type]
                worker.stop()
                done.append(worker.stopping)

        thread = threading.Thread(target=handler_in_the_worst_place, daemon=True)
        thread.start()
        thread.join(60)  # a deadlock detector, not a measure of time
        assert done == [True]
        assert worker.report.stopped == "signal"
        assert worker.run().stopped == "signal"  # woken and stopped at once, nothing claimed


def test_a_wakeup_behaves_as_an_event_and_wakes_a_wait_from_a_signal_handler():
    wakeup = Wakeup()
    try:
        assert not wakeup.wait(0)
        wakeup.set()
        wakeup.set()
        assert wakeup.wait(0) and wakeup.wait(0)  # stays set until cleared
        wakeup.clear()
        assert not wakeup.wait(0)
        previous = signal.signal(signal.SIGALRM, lambda *_: wakeup.set())
        try:
            signal.setitimer(signal.ITIMER_REAL, 0.01)
            assert wakeup.wait(120)  # woken by the handler, not by the timeout
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
    finally:
        wakeup.close()
    wakeup.set()  # after close: nothing to wake, no error
    wakeup.clear()
