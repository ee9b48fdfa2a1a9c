"""Workers: claim runnable runs from a shared store and drive them (docs/architecture.md §11, §5.7).

``plait worker`` runs one ``Worker``. Theory of operation:

- **Claiming.** The main thread claims up to ``concurrency`` runs at a time with the
  store's ``claim_work`` (PostgreSQL: ``FOR UPDATE SKIP LOCKED``; SQLite: one ``BEGIN
  IMMEDIATE``): queued runs, running runs whose lease expired or was given up (a killed
  worker), and parked runs whose wake time has come (an answer, an expired ask, a due
  timer, a cancel or a budget raise; ``Runtime`` records wake times). Only top-level
  runs are claimed: a child run is driven by its parent's drive. The claim takes each
  lease, returns its fencing token, consumes the wake time and marks a queued, parked or
  budget-exhausted run ``running`` in the same transaction, so a worker that dies
  mid-drive (or whose drive is refused) leaves a running run whose lease lapses (or was
  given up), and the next claim takes it over. A claimed run with nothing to drive (a
  finished run a cancel woke) gets its status back (``Runtime.resume``).
- **Driving.** Each claimed run is driven in a thread of its own (its own event loop,
  kept for the thread's next drive: ``_DriveLoops``) by ``Runtime.resume(run_id,
  token=..., manifest=...)`` (the manifest, read once, is handed on; the runtime's
  ``Definitions`` loads each version of a run's file once, with the model the run
  pinned, and builds its definition once): the drive writes under the claimed token, which every
  journal write checks in its own transaction (a worker whose lease was taken over stops
  with PLAIT-E021 and writes nothing), and releases the lease when the run finishes or
  parks. Threads keep one run's blocking tools from stalling the others.
- **Leases.** The drive renews its lease as the journaled clock advances; the worker
  also renews every in-flight lease every TTL/3 of real time, so a long tool call keeps
  its lease while the worker lives. A killed worker's leases lapse after the TTL and
  another worker takes the runs over; the in-flight effects are redelivered once, with
  the same idempotency keys.
- **Waking.** On PostgreSQL a listener thread waits on ``LISTEN plait_runs`` (enqueue,
  respond, cancel and raise-budget notify), so an idle worker claims new work at once;
  every ``poll_ms`` it claims anyway (timers, expired leases, a lost notification).
  SQLite has no notifications: workers on a file poll. The listener's connection and
  the pool's (one per run in flight, one for claiming) are opened when the worker starts
  (``open``), before its first claim: its first drives do not open them.
- **Schedules.** Before claiming, the loop starts the runs of due schedule slots
  (``scheduling.fire_due``: a slot's run and its slot row in one transaction, so one
  run per slot however many workers look), when the earliest next slot has come and at
  least every ``poll_ms``; it sleeps no longer than until that slot. The runs are
  queued, so the claim that follows drives them.
- **Stopping.** ``stop()`` (SIGTERM) stops claiming; the drives in flight go on until
  their runs finish or park (a drive is not interrupted between waves: stopping there
  would leave intents committed but not dispatched, which the next driver would have to
  redeliver), then ``run`` returns. ``once`` drains: the worker returns when nothing is
  claimable and nothing is in flight.
- **Failures.** A storage error while claiming is retried every ``poll_ms`` (``once``
  gives up). A drive that fails (PLAIT-E021 lease lost, E010 a run started from
  Python, which has no file to load, E008, a storage error) is reported and its run is
  not claimed again by this worker for a back-off (2, 4, ... 60 s; never again with
  ``once``, nor after a refusal it would meet every time: ``SETTLED_REFUSALS``); other
  workers may try it. A drive that failed because the database went
  away could not release its lease either: the worker releases it once the database is
  back (``Host.retry_releases``, before each claim), so the run is claimed again
  after the back-off rather than after the lease TTL. A lost notification connection is
  opened again at once, then every second (polling every ``poll_ms`` meanwhile).
- **Limits.** The leases of child runs (subgraphs) are renewed only by their drive's
  commits, not by the worker's timer. A wake time is the clock reading of the process
  that journaled the answer: workers whose clocks lag behind it claim the run late by
  the skew. ``plait gc`` leaves content-addressed payload nodes (``collect_garbage``).

The clock is the runtime's (``PLAIT_NOW_MS`` pins it), the lease TTL ``PLAIT_LEASE_TTL_MS``.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from plait.core.errors import PlaitError
from plait.driver.defaults import lease_ttl
from plait.driver.owner import owner_alive, this_process
from plait.driver.runtime import Runtime
from plait.driver.scheduling import fire_due
from plait.driver.wakeup import Wakeup
from plait.store.base import Listener, ScheduleStore, WorkStore
from plait.store.records import LeaseOwner
from plait.store.sqlite import SqliteStore
from plait.workflow.run_definition import Definitions

DEFAULT_POLL_MS = 1000
MAX_BACKOFF_S = 60.0
CLAIM_BATCH = 256  # runs claimed in one transaction at most (the loop claims again at once)
SETTLED_REFUSALS = frozenset({"E006", "E008", "E010", "E015", "E026"})
"""Refusals a drive of the same run by the same worker meets again every time: a model
that cannot run here, a dangling intent under ``on_dangling: fail``, a changed file, a
checkpoint over this process's limit (whose wave's effects each attempt would run again),
an engine epoch this plait does not replay. Their remedies (fork, a new file, another
worker or setting) never reach a running worker, so it does not claim such a run again."""
_LISTEN_SLICE_S = 0.5  # one wait of the listener thread (interrupt() ends it at once)
_RELISTEN_S = 1.0  # a lost notification connection is opened again this often (at most)


def retry_delay_s(code: str, failures: int) -> float:
    """Seconds before this worker claims a run again after its ``failures``-th failed drive
    (``code``: the PLAIT code, or ``internal``): doubling up to MAX_BACKOFF_S, never again
    for a SETTLED_REFUSALS code."""
    if code in SETTLED_REFUSALS:
        return math.inf
    return min(MAX_BACKOFF_S, 2.0**failures)


@dataclass
class WorkerReport:
    """What one worker did: runs driven (by the status each drive ended in) and errors."""

    owner: LeaseOwner
    statuses: Counter[str] = field(default_factory=Counter)
    errors: list[dict[str, Any]] = field(default_factory=list)
    redelivered: int = 0
    stopped: str = "drained"

    def to_json(self) -> dict[str, Any]:
        return {
            "worker": {"host": self.owner.host, "pid": self.owner.pid},
            "driven": sum(self.statuses.values()) + len(self.errors),
            "statuses": dict(sorted(self.statuses.items())),
            "redelivered": self.redelivered,
            "errors": self.errors,
            "stopped": self.stopped,
        }


@dataclass
class _Claim:
    run_id: str
    token: int


class _TrackedExecutor(ThreadPoolExecutor):
    """asyncio's default executor as ``asyncio.run`` makes it, telling whether it was used."""

    used = False

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        self.used = True
        return super().submit(fn, *args, **kwargs)


class _DriveLoops:
    """One event loop per drive thread, kept from drive to drive: ``asyncio.run`` per drive
    made (a selector, a wake-up socket pair) and closed one every time, a good part of
    what a short run cost the worker's client.

    Each drive ends as ``asyncio.run`` ends it: tasks it left are cancelled (their errors
    reported to the loop's handler); and when it leaves what only closing the loop settles
    (async generators not finished, or the default executor's threads: a sync tool that
    ran there, say one that overran its timeout and still runs), the loop is closed exactly
    as ``asyncio.run`` closes it, waiting for those threads, and the next drive gets a new
    one. Each drive's task runs in a fresh copy of the thread's context, as before."""

    def __init__(self) -> None:
        self._local = threading.local()
        self._lock = threading.Lock()
        self._loops: set[asyncio.AbstractEventLoop] = set()

    def run(self, coro: Any) -> Any:
        """``asyncio.run(coro)`` on this thread's loop."""
        loop: asyncio.AbstractEventLoop | None = getattr(self._local, "loop", None)
        if loop is None:
            loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)  # as asyncio.run does, for this thread
            executor = _TrackedExecutor(thread_name_prefix="asyncio")  # made lazily before
            loop.set_default_executor(executor)
            self._local.loop, self._local.executor = loop, executor
            with self._lock:
                self._loops.add(loop)
        try:
            return loop.run_until_complete(coro)
        finally:
            _cancel_left_tasks(loop)
            if self._local.executor.used or getattr(loop, "_asyncgens", True):
                self._local.loop = None
                with self._lock:
                    self._loops.discard(loop)
                try:
                    loop.run_until_complete(loop.shutdown_asyncgens())
                    loop.run_until_complete(loop.shutdown_default_executor())
                finally:
                    asyncio.set_event_loop(None)
                    loop.close()

    def close(self) -> None:
        """Close the loops kept (their threads have ended: nothing runs on them)."""
        with self._lock:
            loops, self._loops = self._loops, set()
        for loop in loops:
            loop.close()


def _cancel_left_tasks(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel what a drive left running on ``loop`` and wait for it, as ``asyncio.run``
    does at its end (an error other than the cancel goes to the loop's handler)."""
    left = asyncio.all_tasks(loop)
    if not left:
        return
    for task in left:
        task.cancel()
    loop.run_until_complete(asyncio.gather(*left, return_exceptions=True))
    for task in left:
        if task.cancelled():
            continue
        if task.exception() is not None:
            loop.call_exception_handler(
                {
                    "message": "unhandled exception during asyncio.run() shutdown",
                    "exception": task.exception(),
                    "task": task,
                }
            )


class Worker:
    """Claims runnable runs of ``runtime``'s store and drives up to ``concurrency`` at once."""

    def __init__(
        self,
        runtime: Runtime,
        *,
        concurrency: int = 4,
        poll_ms: int = DEFAULT_POLL_MS,
        once: bool = False,
        log: Callable[[str], None] | None = None,
        owner: LeaseOwner | None = None,
        drive_ended: Callable[[str], None] | None = None,
    ) -> None:
        if concurrency < 1:
            raise PlaitError("E019", f"--concurrency must be at least 1, not {concurrency}")
        if poll_ms < 1:
            raise PlaitError("E019", f"--poll-ms must be at least 1, not {poll_ms}")
        store = runtime.store
        if not isinstance(store, WorkStore):  # a Runtime(store=...) of the caller's own
            raise PlaitError("E020", f"the store {store!r} cannot hand out work to workers")
        self.runtime = runtime
        # A worker drives many runs of few files: each version of a file is loaded once.
        runtime.host.definitions = Definitions(cache_files=True)
        self.store: WorkStore = store
        # A protocol's isinstance looks up each of its members: asked once, not per claim.
        self._has_schedules = isinstance(store, ScheduleStore)
        self.concurrency = concurrency
        self.poll_s = poll_ms / 1000
        self.once = once
        self.owner = owner or this_process()
        self.ttl_ms = lease_ttl()
        self.report = WorkerReport(self.owner)
        self._log = log or (lambda line: None)
        self._drive_ended = drive_ended or (lambda run_id: None)
        self._wakeup = Wakeup()  # set by drives ending, the server and SIGTERM's handler
        self._stopping = False
        self._closing = threading.Event()
        self._lock = threading.Lock()
        self._in_flight: dict[Future[Any], _Claim] = {}
        self._failures: dict[str, tuple[int, float]] = {}  # run id -> (count, retry at)
        self._lost: set[tuple[str, int]] = set()
        self._listening: Listener | None = None  # the listener thread's current connection
        self._opened = False  # open() was called: connections and listener opened
        self._next_slot_ms: int | None = None  # the earliest next schedule slot seen
        self._schedules_at = -math.inf  # when (monotonic) schedules were last looked at
        self._strict: Runtime | None = None  # for runs whose file asks `durability: strict`
        self._loops = _DriveLoops()  # each drive thread's event loop

    # --- control ---

    def stop(self) -> None:
        """Stop claiming; ``run`` returns once the drives in flight have finished or parked.

        Called from a signal handler, so it takes no lock (``wakeup.py`` says why)."""
        if not self._stopping:
            self.report.stopped = "signal"
        self._stopping = True
        self._wakeup.set()

    def wake(self) -> None:
        """Claim now: this process journaled something that may make a run claimable (a
        server's answer); SQLite has no notifications, and PostgreSQL's come round later."""
        self._wakeup.set()

    @property
    def stopping(self) -> bool:
        return self._stopping

    # --- the loop ---

    def open(self) -> None:
        """Open the worker's connections now: its listener's and, up to the store's pool,
        one per run in flight plus the claiming loop's. ``run`` does it first if it was
        not done (a caller may do it earlier: before a clock starts, before reporting
        ready); without it the first drives would open them, one by one, while they run.
        ``run`` closes the listener when it returns."""
        if self._opened:
            return
        try:
            self.store.open_connections(self.concurrency + 1)
        except PlaitError as exc:
            if exc.code != "E020":
                raise
            # The server is away: the claim that follows says so (and, unless ``once``,
            # retries); the pool opens connections when they are needed.
        self._listening = self._listener()
        self._opened = True

    def run(self) -> WorkerReport:
        """Claim and drive until stopped (or, with ``once``, until nothing is claimable)."""
        self.open()
        listener = self._listening
        listening: threading.Thread | None = None
        if listener is not None:
            listening = threading.Thread(
                target=self._listen, args=(listener,), name="plait-listen", daemon=True
            )
            listening.start()
        pool = ThreadPoolExecutor(max_workers=self.concurrency, thread_name_prefix="plait-drive")
        renewed_at = time.monotonic()
        try:
            while True:
                self._wakeup.clear()
                self._reap()
                if self._stopping:
                    if not self._in_flight:
                        break
                    claimed = []
                else:
                    try:
                        self.runtime.host.retry_releases()  # leases a storage outage kept
                        self._fire_schedules()
                        claimed = self._claim(pool)
                    except PlaitError as exc:
                        if self.once or exc.code != "E020":
                            raise
                        # The database is unreachable for now: the runs in flight will
                        # fail their next write or finish; claiming resumes when it is back.
                        self._log(f"cannot claim: {exc}; retrying in {self.poll_s:g} s")
                        self._wakeup.wait(self.poll_s)
                        continue
                if self.once and not claimed and not self._in_flight:
                    break
                if claimed and len(self._in_flight) < self.concurrency:
                    continue  # there may be more to claim right away
                if time.monotonic() - renewed_at >= self.ttl_ms / 3000:
                    self._renew()
                    renewed_at = time.monotonic()
                self._wakeup.wait(
                    min(self.poll_s, max(self.ttl_ms / 3000, 0.05), self._until_slot())
                )
        finally:
            pool.shutdown(wait=True)
            self._loops.close()
            self._reap()
            self._closing.set()
            with self._lock:
                if self._listening is not None:
                    self._listening.interrupt()  # the listener thread returns at once
            if listening is not None:
                listening.join()
            with self._lock:
                listener, self._listening = self._listening, None
            if listener is not None:
                listener.close()
            if self._strict is not None:
                self._strict.close()
            self._wakeup.close()  # the threads that set it are done; a late wake() is a no-op
        return self.report

    def _fire_schedules(self) -> None:
        """Start the runs of due schedule slots (``scheduling.fire_due``) when the earliest
        next slot has come, and at least every poll (a schedule added meanwhile)."""
        if not self._has_schedules:
            return
        now = self.runtime.clock()
        due = self._next_slot_ms is not None and self._next_slot_ms <= now
        if not due and time.monotonic() - self._schedules_at < self.poll_s:
            return
        try:
            self._next_slot_ms = fire_due(self.runtime, self._log)
        except PlaitError as exc:
            if exc.code == "E020":
                raise
            self._log(f"cannot fire schedules: {exc}")  # a schedule deleted meanwhile, say
        self._schedules_at = time.monotonic()

    def _until_slot(self) -> float:
        """Seconds until the earliest next schedule slot (the loop wakes for it)."""
        if self._next_slot_ms is None:
            return math.inf
        return max((self._next_slot_ms - self.runtime.clock()) / 1000, 0.0)

    def _claim(self, pool: ThreadPoolExecutor) -> list[_Claim]:
        # A huge --concurrency claims in batches (a store's LIMIT is a 64-bit integer).
        free = min(self.concurrency - len(self._in_flight), CLAIM_BATCH)
        if free <= 0:
            return []
        claims = [
            _Claim(run_id, token)
            for run_id, token in self.store.claim_work(
                self.owner,
                self.runtime.clock(),
                self.ttl_ms,
                free,
                exclude=self._excluded(),
                owner_alive=owner_alive,  # a dead driver's run on this host: taken at once
            )
        ]
        for claim in claims:
            future = pool.submit(self._drive, claim)
            self._in_flight[future] = claim
            future.add_done_callback(lambda _: self._wakeup.set())
        return claims

    def _excluded(self) -> list[str]:
        """Runs not to claim: those backing off, and those of drives not yet reaped (a drive
        that ended after this loop's ``_reap`` has released its lease, and its failure is
        not counted yet: claimed again, its refusal would be met, or its effects run, twice)."""
        now = time.monotonic()
        backing_off = {
            run_id
            for run_id, (_, retry_at) in self._failures.items()
            if self.once or retry_at > now
        }
        return sorted(backing_off | {claim.run_id for claim in self._in_flight.values()})

    def _reap(self) -> None:
        for future in [f for f in self._in_flight if f.done()]:
            claim = self._in_flight.pop(future)
            exc = future.exception()
            if exc is None:
                status, redelivered = future.result()
                self.report.statuses[status] += 1
                self.report.redelivered += redelivered
                self._failures.pop(claim.run_id, None)
                self._log(f"run {claim.run_id}: {status}")
                continue
            code = exc.code if isinstance(exc, PlaitError) else "internal"
            message = exc.detail if isinstance(exc, PlaitError) else f"{type(exc).__name__}: {exc}"
            self.report.errors.append(
                {"run_id": claim.run_id, "code": f"PLAIT-{code}", "message": message}
            )
            count = self._failures.get(claim.run_id, (0, 0.0))[0] + 1
            delay = retry_delay_s(code, count)
            self._failures[claim.run_id] = (count, time.monotonic() + delay)
            self._log(f"run {claim.run_id}: PLAIT-{code} {message}")

    def _renew(self) -> None:
        """Extend every in-flight lease (a long tool call keeps its run while we live)."""
        now = self.runtime.clock()
        for future, claim in list(self._in_flight.items()):
            if future.done():
                continue
            try:
                self.store.renew_lease(claim.run_id, claim.token, now, self.ttl_ms)
            except PlaitError as exc:
                if exc.code != "E021":  # storage trouble: the drive's own writes decide
                    self._log(f"run {claim.run_id}: cannot renew its lease: {exc}")
                    continue
                if future.done() or (claim.run_id, claim.token) in self._lost:
                    continue
                self._lost.add((claim.run_id, claim.token))
                self._log(f"run {claim.run_id}: {exc} (its next write will fail)")

    # --- one drive, in a pool thread ---

    def _drive(self, claim: _Claim) -> tuple[str, int]:
        resumed = False
        try:
            manifests, journal = self.store.claimed_run(claim.run_id)
            manifest = dict(manifests[-1])
            resumed = True  # from here on resume releases the lease, whatever happens
            runtime = self._runtime_for(manifest)
            resume = runtime.resume(
                claim.run_id, token=claim.token, manifest=manifest, journal=journal, top_level=True
            )
            result = self._loops.run(resume)
            return result.status, result.redelivered
        finally:
            if not resumed:
                self.runtime.host.release_lease(claim.run_id, claim.token)
            self._drive_ended(claim.run_id)

    def _runtime_for(self, manifest: dict[str, Any]) -> Runtime:
        """The runtime a run is driven with: the worker's, or one committing with FULL sync
        for a run whose file asks for ``durability: strict`` when the worker's SQLite store
        does not (the file's setting is the run's, as ``plait run`` and a server's start
        honour it; PostgreSQL always commits synchronously)."""
        store = self.store
        wants_strict = manifest["workflow"].get("durability") == "strict"
        if not wants_strict or not isinstance(store, SqliteStore) or store.durability == "strict":
            return self.runtime
        with self._lock:
            if self._strict is None:
                rt = self.runtime
                strict = Runtime(
                    store=SqliteStore(store.path, "strict"),
                    clock=rt.clock,
                    principal=rt.principal,
                    observer=rt.observer,
                    model=rt.model,
                    telemetry=rt.telemetry,
                )
                strict.host.definitions = rt.host.definitions  # one cache of loaded files
                self._strict = strict
            return self._strict

    # --- notifications ---

    def _listener(self) -> Listener | None:
        try:
            listener = self.store.listen()  # None: no notifications on this back end
        except PlaitError as exc:
            self._log(f"not listening for notifications ({exc}); polling")
            return None
        return listener

    def _listen(self, listener: Listener | None) -> None:
        """Wake the claiming loop on every notification; reconnect when the connection is lost."""
        retry_s = 0.0
        while not self._closing.is_set():
            if listener is None:  # lost: open a new one at once, then every second or so
                if self._closing.wait(retry_s):
                    return
                retry_s = min(self.poll_s, _RELISTEN_S)
                try:
                    listener = self.store.listen()
                except PlaitError:
                    continue  # still away (the claiming loop says so): quietly, next time
                if listener is None:
                    return  # the back end has no notifications (never after a first one)
                self._log("listening for notifications again")
                with self._lock:
                    self._listening = listener
                self._wakeup.set()  # what was notified while nobody listened: claim now
            try:
                if listener.wait(_LISTEN_SLICE_S):
                    self._wakeup.set()
            except PlaitError as exc:
                self._log(f"notifications lost ({exc}); polling every {self.poll_s:g} s")
                with contextlib.suppress(Exception):
                    listener.close()
                listener = None
                retry_s = 0.0
                with self._lock:
                    self._listening = None


def collect_garbage(runtime: Runtime, older_than_ms: int) -> dict[str, Any]:
    """Delete finished runs not updated for ``older_than_ms`` (``plait gc``).

    Runs that are queued, running or parked, budget-exhausted runs whose budget was
    raised and not yet fed to a drive (their wake time, which ``raise_budget`` records on
    the raised run, children included), runs that hold a live lease, and trees in which
    any run is one of those are never touched. A deleted run
    takes its journal, manifests and lease along. Content-addressed payload nodes stay:
    nodes are shared between runs (a value stored once is referenced by every run that
    holds it) and every live store remembers which nodes exist so it never writes one
    twice, so deleting a node that looks unreferenced could race a commit that is about
    to reference it. Large values therefore outlive their runs until a sweep that stops
    the workers (a later command); small values live inline in journal rows and go.
    """
    store = runtime.store
    if not isinstance(store, WorkStore):  # a Runtime(store=...) of the caller's own
        raise PlaitError("E020", f"the store {store!r} cannot collect garbage")
    now = runtime.clock()
    deleted = store.gc(now - older_than_ms, now)
    return {"deleted": len(deleted), "runs": deleted}
