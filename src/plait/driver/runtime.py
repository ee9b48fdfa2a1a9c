"""``plait.Runtime``: durable runs on a store — start, resume, cancel, fork, answer.

A facade: each verb is one call into the module that does that job (``starting``,
``resuming``, ``driving``, ``forking``, ``children``, ``steering``, ``run_view``), all
sharing one ``Host`` (store, clock, principal); a ``Workflow`` becomes a
``RunDefinition`` here, and nothing below sees one.

Each verb imports its module when first called: ``plait runs`` opens a Runtime to read
the store and never imports the driver, the executors or the workflow loader.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from plait.driver.clock import Clock, clock_from_env
from plait.driver.defaults import default_db, default_principal, max_checkpoint_bytes
from plait.driver.host import Host
from plait.driver.run_ids import check_principal
from plait.store import open_store

if TYPE_CHECKING:
    from opentelemetry.trace import TracerProvider

    from plait.driver.answers import Answer
    from plait.driver.deltas import DeltaObserver
    from plait.driver.run_view import RunView
    from plait.driver.verify import VerifyReport
    from plait.driver.wave import Observer, RunResult
    from plait.models.base import Model
    from plait.store.base import Store
    from plait.store.records import Journal
    from plait.workflow import Workflow
    from plait.workflow.run_definition import RunDefinition


def _of_host(name: str) -> Any:
    """An attribute of the runtime that is its host's ``name``."""
    return property(
        lambda runtime: getattr(runtime.host, name),
        lambda runtime, value: setattr(runtime.host, name, value),
    )


class Runtime:
    """Drives runs durably on one store (SQLite by default).

    ``model``: a model object to call instead of the workflow's spec (the Agent's hooked
    model). ``telemetry``: OpenTelemetry spans of every drive (``plait.driver.telemetry``)
    — on by default when ``opentelemetry`` is installed unless ``PLAIT_OTEL=0``; False
    turns them off, a ``TracerProvider`` receives them instead of the global provider.
    ``deltas``: streams every model turn and tells it each piece (``plait.driver.deltas``).
    """

    def __init__(
        self,
        db: str | None = None,
        *,
        store: Store | None = None,
        clock: Clock | None = None,
        principal: str | None = None,
        durability: str | None = None,
        observer: Observer | None = None,
        model: Model | None = None,
        telemetry: bool | TracerProvider | None = None,
        deltas: DeltaObserver | None = None,
    ) -> None:
        principal = check_principal(principal or default_principal())
        self.db = db or default_db()
        # The environment's numbers first: a malformed one is refused before any IO.
        limit = max_checkpoint_bytes()
        clock = clock or clock_from_env()
        durability = durability or os.environ.get("PLAIT_DURABILITY") or "normal"
        store = store if store is not None else open_store(self.db, durability=durability)
        self.host = Host(store, clock, principal, limit, observer, model, telemetry)
        self.host.deltas = deltas

    # What the runtime works with: its Host's.
    store: Store = _of_host("store")
    clock: Clock = _of_host("clock")
    principal: str = _of_host("principal")
    observer: Observer | None = _of_host("observer")
    model: Model | None = _of_host("model")
    telemetry: bool | TracerProvider | None = _of_host("telemetry")
    deltas: DeltaObserver | None = _of_host("deltas")
    max_checkpoint_bytes: int = _of_host("max_checkpoint_bytes")
    """Canonical bytes one checkpoint may hold: a drive refuses a larger one (E015)."""

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> Runtime:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- driving ------------------------------------------------------------------

    async def start(
        self,
        workflow: Workflow,
        input: Any = None,
        *,
        run_id: str | None = None,
        parent: str | None = None,
        conversation: str | None = None,
        message_history: Sequence[Mapping[str, Any]] | None = None,
    ) -> RunResult:
        """Start a new run and drive it until it finishes or parks.

        ``conversation``: the run is that conversation's next turn and goes on from its
        last completed run's transcript; ``message_history``: goes on from these
        transcript entries instead (``driver/conversations.py``).
        """
        from plait.driver.conversations import with_history
        from plait.driver.starting import check_new_run
        from plait.workflow.run_definition import definition_of

        if parent is None:
            check_new_run(run_id, input)  # a child's id is PARENT~…, made by its parent
        definition = definition_of(workflow)
        input = with_history(
            self.store,
            definition.pinned,
            input,
            conversation=conversation,
            message_history=message_history,
        )
        return await self.start_definition(
            definition, input, run_id=run_id, parent=parent, conversation=conversation
        )

    async def start_definition(
        self,
        definition: RunDefinition,
        input: Any,
        *,
        run_id: str | None,
        parent: str | None,
        conversation: str | None = None,
    ) -> RunResult:
        """``start`` for a definition already built (a subgraph's child run)."""
        from plait.core.events import ClockReading, Event, Start
        from plait.driver.driving import Drive, NewRun, drive_run
        from plait.driver.starting import create_run

        made = await create_run(
            self.host, definition, input, run_id, parent, "running", conversation=conversation
        )
        events: list[Event] = [ClockReading(made.now_ms), Start(input)]
        drive = Drive(
            made.run_id,
            made.definition,
            events,
            made.manifest,
            NewRun(),
            token=made.token,
            mcp=made.mcp,
        )
        return await drive_run(self.host, self, drive)

    async def enqueue(
        self,
        workflow: Workflow,
        input: Any = None,
        *,
        run_id: str | None = None,
        conversation: str | None = None,
    ) -> RunResult:
        """Create a ``queued`` run for a worker to drive (``plait run --detach``); drive
        nothing. A worker claims it and drives it from ``Start(input)``, as ``resume``
        does a run without a checkpoint. ``conversation`` as for ``start``."""
        from plait.driver.conversations import with_history
        from plait.driver.run_view import RunView
        from plait.driver.starting import check_new_run, create_run
        from plait.workflow.run_definition import definition_of

        check_new_run(run_id, input)
        definition = definition_of(workflow)
        input = with_history(
            self.store, definition.pinned, input, conversation=conversation, message_history=None
        )
        made = await create_run(
            self.host, definition, input, run_id, None, "queued", conversation=conversation
        )
        self.store.notify_runnable(made.run_id)
        return RunView(self.store, made.run_id).show()

    async def resume(
        self,
        run_id: str,
        *,
        workflow: Workflow | None = None,
        token: int | None = None,
        manifest: dict[str, Any] | None = None,
        journal: Journal | None = None,
        top_level: bool = False,
    ) -> RunResult:
        """Continue a run from its last checkpoint; a finished run reports its outcome again.

        ``token``: a lease this process already holds on the run (a worker's claim); the
        drive writes under it instead of acquiring one. It is released at the end whether
        or not a drive happened (a finished run, an error before driving).
        ``manifest``: the run's manifest, when the caller has read it already (a worker
        does): it is not read again; nor is ``journal``, the run's journal, read under
        ``token`` (a worker reads both at once). A child run resumed on its own wakes its
        root, whose next drive (a worker's, the server's) settles what the child did.
        ``top_level``: the caller knows the run has no parent (a worker's claim: workers
        claim only top-level runs), so its row is not read again to find out.
        """
        from plait.driver.wake import wake_root

        result = await self._resume(run_id, workflow, token, manifest, journal)
        if not top_level and self.store.get_run(run_id).parent_run_id is not None:
            # A child driven on its own (`plait resume CHILD` after answering its ask):
            # its parent waits on it, so its root is due now and a driver settles it.
            wake_root(self.store, run_id, self.clock())
        return result

    async def resume_nested(self, run_id: str, workflow: Workflow | None = None) -> RunResult:
        """``resume`` of a child run from within its parent's drive, which settles it."""
        return await self._resume(run_id, workflow, None, None)

    async def _resume(
        self,
        run_id: str,
        workflow: Workflow | None,
        token: int | None,
        manifest: dict[str, Any] | None,
        journal: Journal | None = None,
    ) -> RunResult:
        from plait.driver.resuming import resume_run

        def pin(pinned: dict[str, Any]) -> RunDefinition:
            return self.host.definitions.pinned(pinned, workflow)  # E010 if it changed

        return await resume_run(self.host, self, run_id, pin, manifest, token, journal)

    async def fork(
        self,
        run_id: str,
        *,
        at: int | None = None,
        workflow: Workflow | None = None,
        budgets: dict[str, Any] | None = None,
        new_run_id: str | None = None,
        edits: dict[str, Any] | None = None,
        by: str | None = None,
    ) -> RunResult:
        """A new run from any checkpoint of ``run_id`` (superstep ``at``, else the latest),
        ``budgets`` raising ceilings in the units a run keeps (``check_ceilings``), made by
        ``by`` (else this runtime's principal), ``edits`` replacing context keys whole."""
        from plait.driver.forking import fork_run
        from plait.workflow.run_definition import definition_of

        onto = None if workflow is None else (lambda: definition_of(workflow))
        given: dict[str, Any] = {"budgets": budgets, "fork_id": new_run_id, "edits": edits}
        return await fork_run(self.host, self, run_id, at=at, onto=onto, by=by, **given)

    async def migrate(
        self,
        run_id: str,
        workflow: Workflow,
        *,
        mapping: dict[str, str] | None = None,
        restart_at_entry: bool = False,
        by: str | None = None,
    ) -> dict[str, Any]:
        """Move a parked or finished (not completed) run onto ``workflow`` (``migrating``);
        ``mapping`` renames nodes (old id -> new id). Drives nothing."""
        from plait.driver.migrating import migrate_run
        from plait.workflow.run_definition import definition_of

        definition, principal = definition_of(workflow), by or self.principal
        return await migrate_run(
            self.host,
            run_id,
            definition,
            mapping or {},
            restart_at_entry=restart_at_entry,
            by=principal,
        )

    def diff(self, old: Workflow | str, new: Workflow | str) -> dict[str, Any]:
        """Two plans compared by meaning: workflows, or run ids for the version each lives on."""
        from plait.workflow.plan_diff import diff_plans

        pinned = self.host.manifest
        return diff_plans(
            *(pinned(w)["workflow"] if isinstance(w, str) else w.to_manifest() for w in (old, new))
        )

    # --- reading ------------------------------------------------------------------

    def verify(
        self, run_id: str, *, workflow: Workflow | None = None, workers: int | None = None
    ) -> VerifyReport:
        """Re-drive ``run_id`` from its journal and compare every checkpoint (no effects).
        ``workers``: processes a long run's replay may be split over (None: every core;
        1: this process alone); the report is the same either way."""
        from plait.driver.verify import verify_pinned
        from plait.driver.verify_cores import cores

        return verify_pinned(self.host, run_id, workflow, cores() if workers is None else workers)

    def view(self, run_id: str) -> RunView:
        """The run read back: its standing, effects, asks and flows (one read each)."""
        from plait.driver.run_view import RunView

        return RunView(self.store, run_id, now_ms=self.clock())

    def show(self, run_id: str) -> RunResult:
        return self.view(run_id).show()

    def trace(self, run_id: str) -> list[dict[str, Any]]:
        return self.view(run_id).trace()

    def asks(self, run_id: str | None = None) -> list[dict[str, Any]]:
        """What waits for a human: pending asks of one run (and its children), or of all."""
        if run_id is not None:
            return self.view(run_id).asks()
        now_ms = self.clock()
        parked = self.store.list_runs("parked")
        if not parked:  # no checkpoint to read: its reader (the core's state) is not imported
            return []
        from plait.driver.run_view import parked_asks

        return parked_asks(self.store, parked, now_ms=now_ms)

    # --- answers and steering -------------------------------------------------------

    def respond(
        self,
        run_id: str,
        ask_id: str,
        result: Any = None,
        *,
        deny: str | None = None,
        approve: bool | None = None,
        reason: str | None = None,
        by: str | None = None,
    ) -> dict[str, Any]:
        """Answer a pending ask (journaled only; ``resume`` drives the run on)."""
        from plait.driver import steering

        given = {"result": result, "deny": deny, "approve": approve, "reason": reason}
        return steering.answer(self.host, run_id, ask_id, by or self.principal, **given)

    def respond_all(
        self, run_id: str, answers: Sequence[Answer], *, by: str | None = None
    ) -> list[dict[str, Any]]:
        """Answer several pending asks of ``run_id`` itself in one commit, or none of them:
        if any is refused, nothing is journaled (not even the refusal) and its error is
        raised."""
        from plait.driver import steering

        return steering.answer_all(self.host, run_id, answers, by or self.principal)

    def send(self, run_id: str, message: Any) -> None:
        """Journal a steering message; the next superstep moves it into context["$inbox"]."""
        from plait.driver import steering

        steering.send(self.host, run_id, message)

    def cancel(self, run_id: str, reason: str = "", by: str | None = None) -> None:
        """Journal a cancel for the run and its descendants; each next drive feeds it."""
        from plait.driver import steering

        steering.cancel(self.host, run_id, reason, by or self.principal)

    def raise_budget(self, run_id: str, raised: dict[str, Any]) -> None:
        """Journal raised ceilings (in the units a run keeps) and this runtime's principal
        as who raised them; fed as BudgetRaised."""
        from plait.driver import steering

        steering.raise_budget(self.host, run_id, raised, self.principal)

    def run_sync(self, workflow: Workflow, input: Any = None, **kwargs: Any) -> RunResult:
        from plait.driver.blocking import run_blocking

        return run_blocking(self.start(workflow, input, **kwargs))

    def resume_sync(self, run_id: str, **kwargs: Any) -> RunResult:
        from plait.driver.blocking import run_blocking

        return run_blocking(self.resume(run_id, **kwargs))

    def fork_sync(self, run_id: str, **kwargs: Any) -> RunResult:
        from plait.driver.blocking import run_blocking

        return run_blocking(self.fork(run_id, **kwargs))
