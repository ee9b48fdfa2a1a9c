"""The server's own drivers: ``Worker`` loops in the server's process (``serve --workers N``).

Theory of operation:

- **What they drive.** Each loop is a ``plait worker`` in a thread: it claims runnable
  runs of the server's store (queued, woken by an answer, a cancel, a message, a raise,
  a due timer or an expired ask, abandoned by a dead driver) and drives them, each in a
  thread of its own, under the store's lease, so drivers in other servers and
  ``plait worker`` processes on the same store never drive one run at once.
- **Waking.** A request that journals something (a new run, an answer, a cancel, ...)
  wakes the loops (``wake``), so they claim at once even on SQLite, which has no
  notifications; on PostgreSQL the store's notifications wake them for what other
  processes journal too. Otherwise they claim every ``poll_ms``.
- **Waiting for a drive.** ``POST /runs?wait=`` reads the run's status again whenever a
  drive of this server ends (``wait_for_drive``), and at least every ``poll_s`` for
  drives of other processes.
- **Deltas.** The turns a loop drives stream to the server's ``DeltaHub`` while an event
  stream watches their run (``server.deltas``).
- **Stopping.** ``stop`` (the app's lifespan ends: SIGTERM, Ctrl-C) stops claiming and
  waits for the drives in flight to finish or park, as ``plait worker`` does on SIGTERM.

With no loops (``--workers 0``) the server only journals: runs wait for ``plait worker``.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable

from plait.driver.deltas import DeltaObserver
from plait.driver.runtime import Runtime
from plait.driver.worker import DEFAULT_POLL_MS, Worker

DEFAULT_WORKERS = 1
DEFAULT_CONCURRENCY = 4


def log_to_stderr(line: str) -> None:
    """A driver's log line on the server's stderr, beside uvicorn's log."""
    sys.stderr.write(f"plait serve: {line}\n")
    sys.stderr.flush()


class ServerDrivers:
    """``workers`` worker loops on store ``db``, each driving up to ``concurrency`` runs."""

    def __init__(
        self,
        db: str,
        principal: str,
        *,
        workers: int = 0,
        concurrency: int = DEFAULT_CONCURRENCY,
        poll_ms: int = DEFAULT_POLL_MS,
        log: Callable[[str], None] = log_to_stderr,
        deltas: DeltaObserver | None = None,
    ) -> None:
        self.db = db
        self.deltas = deltas
        self.principal = principal
        self.workers = workers
        self.concurrency = concurrency
        self.poll_ms = poll_ms
        self._log = log
        self._loops: list[tuple[Worker, threading.Thread]] = []
        self._ended = threading.Condition()
        self._drives_ended = 0

    def start(self) -> None:
        """Open a runtime per loop and start each in a thread (the app's startup)."""
        for n in range(self.workers):
            runtime = Runtime(self.db, principal=self.principal, deltas=self.deltas)
            try:
                worker = Worker(
                    runtime,
                    concurrency=self.concurrency,
                    poll_ms=self.poll_ms,
                    log=self._log,
                    drive_ended=self._drive_ended,
                )
            except BaseException:
                runtime.close()
                raise
            thread = threading.Thread(
                target=self._loop, args=(worker,), name=f"plait-serve-worker-{n}", daemon=True
            )
            self._loops.append((worker, thread))
            thread.start()
        if self.workers:
            self._log(
                f"{self.workers} driver loop(s), {self.concurrency} run(s) each at once,"
                f" on {self.db.split('@')[-1]}"
            )

    def _loop(self, worker: Worker) -> None:
        try:
            worker.run()
        except BaseException as exc:  # a loop that dies says so; the API keeps serving
            self._log(f"a driver loop stopped: {type(exc).__name__}: {exc}")
        finally:
            worker.runtime.close()

    def wake(self) -> None:
        """Something was journaled here that may make a run claimable: claim now."""
        for worker, _ in self._loops:
            worker.wake()

    def stop(self) -> None:
        """Stop claiming; return once every drive in flight has finished or parked."""
        for worker, _ in self._loops:
            worker.stop()
        for _, thread in self._loops:
            thread.join()
        self._loops.clear()

    # --- waiting for drives (POST /runs?wait=) ---

    def _drive_ended(self, run_id: str) -> None:
        with self._ended:
            self._drives_ended += 1
            self._ended.notify_all()

    def drives_ended(self) -> int:
        """How many drives of this server have ended (read it before looking at a run)."""
        with self._ended:
            return self._drives_ended

    def wait_for_drive(self, seen: int, timeout_s: float) -> None:
        """Return once a drive ended after ``seen`` was read, or after ``timeout_s``."""
        with self._ended:
            self._ended.wait_for(lambda: self._drives_ended != seen, timeout_s)
