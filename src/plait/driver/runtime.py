"""``plait.Runtime``: durable runs on a store — start, resume, cancel, fork.

A run's manifest pins its definition at start (plan, executors, tools, budgets,
engine epoch). Resume, verify and fork rebuild the run's environment from that
manifest, so a changed workflow file can never silently change a run.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from plait.core.canonical import CanonicalJSONError, dumpb, loads, require_json
from plait.core.env import Budgets, StepEnv
from plait.core.errors import PlaitError
from plait.core.events import (
    BudgetRaised,
    CancelSeen,
    ClockReading,
    Event,
    InputReceived,
    ResponseSettled,
    Start,
)
from plait.core.fork import fork_state
from plait.core.keys import JournalKey, child_run_id
from plait.core.outcomes import Completed, EffectOutcome, Failed
from plait.core.state import SchedulerState
from plait.driver.answers import Answer, owner_of, pending_asks, respond, respond_all
from plait.driver.clock import Clock, clock_from_env
from plait.driver.crash import CrashPoint
from plait.driver.dispatcher import ChildRunner, Dispatcher, dispatcher_for
from plait.driver.durable import (
    DEFAULT_MAX_CHECKPOINT_BYTES,
    MAX_CHECKPOINT_ENV,
    DurableJournal,
    checkpoint_too_large,
)
from plait.driver.env_numbers import whole_number
from plait.driver.environment import env_from_manifest, make_env, tool_schemas
from plait.driver.feeds import FEED
from plait.driver.inprocess import new_run_id
from plait.driver.inspect_run import show, trace
from plait.driver.owner import owner_alive, this_process
from plait.driver.run_ids import check_principal, check_run_id
from plait.driver.settle import settlements
from plait.driver.telemetry import run_trace
from plait.driver.verify import VerifyReport, verify_run
from plait.driver.wave import Observer, RunResult, contract_outcome, drive
from plait.store import open_store
from plait.store.base import Store
from plait.store.records import CheckpointWrite, Journal, RecordWrite, RunInfo, StatusWrite
from plait.tools.mcp import fetch_catalogue, with_catalogue

if TYPE_CHECKING:
    from opentelemetry.trace import TracerProvider

    from plait.models.base import Model
    from plait.workflow import Workflow

ENGINE_EPOCH = 1
DEFAULT_DB = "sqlite:///.plait/plait.db"
DEFAULT_LEASE_TTL_MS = 30_000


def default_db() -> str:
    return os.environ.get("PLAIT_DB") or DEFAULT_DB


def default_principal() -> str:
    import getpass

    return os.environ.get("PLAIT_PRINCIPAL") or getpass.getuser()


def _lease_ttl() -> int:
    return whole_number("PLAIT_LEASE_TTL_MS", 1) or DEFAULT_LEASE_TTL_MS


def _max_checkpoint_bytes() -> int:
    return whole_number(MAX_CHECKPOINT_ENV, 1) or DEFAULT_MAX_CHECKPOINT_BYTES


def pinned_workflow(manifest: dict[str, Any], workflow: Workflow | None = None) -> Workflow:
    """The run's definition: the given one or its source file, checked against the pin."""
    from plait.workflow import load_workflow

    if workflow is None:
        source = manifest.get("source")
        if not source:
            raise PlaitError(
                "E010",
                f"run '{manifest['run_id']}' was started from Python; pass its workflow"
                " (workflow=...) to resume or fork it",
            )
        # The model pinned at start wins (a run started with --model resumes with it).
        pinned_model = (manifest["workflow"].get("llm") or {}).get("model")
        workflow = load_workflow(Path(source), pinned_model)
    # What the run's MCP servers offered was pinned at start; the servers are not asked again.
    workflow = with_catalogue(workflow, manifest.get("mcp_catalogue"))
    if workflow.to_manifest() != manifest["workflow"]:
        raise PlaitError(
            "E010",
            f"run '{manifest['run_id']}': the workflow no longer matches the one pinned at start"
            " (fork the run with --workflow to move it onto a new definition)",
        )
    return workflow


def check_model(workflow: Workflow, model: Model | None = None, *, driven: bool = True) -> None:
    """Refuse, before a run is written, a model that cannot run (E006) — including an
    unpriced model under a usd ceiling (§7: its cost could not be reserved) and, when this
    process is to drive the run (``driven``), a provider whose API key is not set here (a
    queued run is driven by a worker, whose environment is the one that counts)."""
    if not any(node.kind == "abstract" for node in workflow.nodes):
        return
    from plait.models.base import check_credentials, model_from_spec
    from plait.models.prices import price_of

    llm = dict(workflow.llm or {})
    spec = str(llm.get("model"))
    if model is None:
        model_from_spec(spec, base_dir=workflow.base_dir, settings=llm)
        if driven:
            check_credentials(spec)
    if (
        workflow.to_budgets().max_usd_micros is not None
        and price_of(spec, llm.get("prices")) is None
    ):
        raise PlaitError(
            "E006",
            f"model '{spec}' has no price, so it cannot run under a usd budget:"
            " add it to llm.prices (USD per million tokens)",
        )


CEILINGS = ("max_supersteps", "max_tokens", "max_usd_micros", "max_wall_ms", "max_storage_bytes")
"""Ceilings a run keeps, in its units: counts, micro-dollars, milliseconds, bytes."""


def check_ceilings(raised: Any, what: str) -> None:
    """PLAIT-E019 unless ``raised`` maps known ceilings to whole numbers >= 0: a key the run
    does not know (a workflow file's ``max_usd``, the CLI's ``tokens``) would be journaled
    and change nothing."""
    if not isinstance(raised, dict) or not raised:
        raise PlaitError("E019", f"{what}: expected a non-empty dict of ceilings")
    for key, value in raised.items():
        if key not in CEILINGS:
            raise PlaitError(
                "E019",
                f"{what}: unknown ceiling {key!r}; expected one of {', '.join(CEILINGS)}"
                " (usd in micro-dollars, wall time in ms)",
            )
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise PlaitError("E019", f"{what}: {key} must be a whole number >= 0, got {value!r}")


def check_input(value: Any, what: str = "run input") -> None:
    """What a person hands a run (its input, a steering message) must be JSON plait can
    store; PLAIT-E019 names what is wrong and where."""
    try:
        require_json(value, "input" if what == "run input" else "message")
    except CanonicalJSONError as exc:
        raise PlaitError("E019", f"{what} is not JSON plait can store: {exc}") from None


class Runtime:
    """Drives runs durably on one store (SQLite by default).

    ``telemetry``: OpenTelemetry spans of every drive (``plait.driver.telemetry``) — on
    by default when ``opentelemetry`` is installed unless ``PLAIT_OTEL=0``; False turns
    them off, a ``TracerProvider`` receives them instead of the global provider.
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
    ) -> None:
        self.principal = check_principal(principal or default_principal())
        self.db = db or default_db()
        # The environment's numbers first: a malformed one is refused before any IO.
        self.max_checkpoint_bytes = _max_checkpoint_bytes()
        """Canonical bytes one checkpoint may hold: a drive refuses a larger one (PLAIT-E015)."""
        self.clock = clock or clock_from_env()
        durability = durability or os.environ.get("PLAIT_DURABILITY") or "normal"
        self.store = store if store is not None else open_store(self.db, durability=durability)
        self.observer = observer
        self.model = model
        """A model object to call instead of the workflow's spec (the Agent's hooked model)."""
        self.telemetry = telemetry
        self._unreleased: dict[str, int] = {}  # run id -> a lease token not yet given up
        self._unreleased_lock = threading.Lock()

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> Runtime:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- driving --------------------------------------------------------------

    async def start(
        self,
        workflow: Workflow,
        input: Any = None,
        *,
        run_id: str | None = None,
        parent: str | None = None,
    ) -> RunResult:
        """Start a new run and drive it until it finishes or parks."""
        run_id, workflow, now, manifest = await self._create(
            workflow, input, run_id, parent, "running"
        )
        return await self._drive(run_id, workflow, [ClockReading(now), Start(input)], manifest)

    async def enqueue(
        self, workflow: Workflow, input: Any = None, *, run_id: str | None = None
    ) -> RunResult:
        """Create a ``queued`` run for a worker to drive (``plait run --detach``); drive nothing.

        The run gets its manifest as ``start`` writes it; a worker claims it and drives it
        from ``Start(input)``, as ``resume`` does a run without a checkpoint.
        """
        run_id, _, _, _ = await self._create(workflow, input, run_id, None, "queued")
        notify = getattr(self.store, "notify_runnable", None)
        if notify is not None:
            notify(run_id)
        return show(self.store, run_id)

    async def _create(
        self,
        workflow: Workflow,
        input: Any,
        run_id: str | None,
        parent: str | None,
        status: str,
    ) -> tuple[str, Workflow, int, dict[str, Any]]:
        """Validate, pin and write a new run with ``status``.

        Returns (run id, pinned workflow, now, manifest).
        """
        if parent is None:
            check_run_id(run_id)  # a child's id is PARENT~…, made here
            check_input(input)
        workflow.plan()  # validate before anything is written
        check_model(workflow, self.model, driven=status == "running")
        catalogue = await fetch_catalogue(workflow)  # what its MCP servers offer, pinned (§4)
        workflow = with_catalogue(workflow, catalogue)
        run_id = run_id or new_run_id()
        now = self.clock()
        manifest = {
            "engine_epoch": ENGINE_EPOCH,
            "run_id": run_id,
            "workflow": workflow.to_manifest(),
            "source": str(workflow.source.resolve()) if workflow.source else None,
            "input": input,
            "principal": self.principal,
        }
        if catalogue:
            manifest["mcp_catalogue"] = catalogue
        manifest["tool_schemas"] = tool_schemas(workflow)  # verify needs no tool module
        info = RunInfo(run_id, workflow.name, status, self.principal, parent, now, now)
        self.store.create_run(info, manifest)
        return run_id, workflow, now, manifest

    async def resume(
        self,
        run_id: str,
        *,
        workflow: Workflow | None = None,
        token: int | None = None,
        manifest: dict[str, Any] | None = None,
    ) -> RunResult:
        """Continue a run from its last checkpoint; a finished run reports its outcome again.

        ``token``: a lease this process already holds on the run (a worker's claim); the
        drive writes under it instead of acquiring one. It is released at the end whether
        or not a drive happened (a finished run, an error before driving).
        ``manifest``: the run's manifest, when the caller has read it already (a worker
        does, to find the run's file): it is not read again.
        """
        driving = False
        try:
            if manifest is None:
                manifest = self._manifest(run_id)
            workflow = pinned_workflow(manifest, workflow)
            # One read of the journal: its last checkpoint, what was journaled but not fed,
            # and (under a lease already held) what the drive starts from.
            journal = self.store.load_journal(run_id)
            meta = journal.checkpoints[-1] if journal.checkpoints else None
            now = self.clock()
            existing = journal if token is not None else None
            state: SchedulerState | None = None
            if meta is None:  # never checkpointed: start again, with all that was journaled
                events: list[Event] = [
                    ClockReading(now),
                    Start(manifest["input"]),
                    *self._unfed_events(journal, restart=True),
                ]
            else:
                state = self._state_at(run_id, meta.seq)
                events = [ClockReading(now), *self._unfed_events(journal)]
                if state.is_terminal() and not any(isinstance(e, BudgetRaised) for e in events):
                    if state.failed is not None:  # a crash may have come before (§3.5)
                        await self._cancel_children(run_id)
                    if token is not None:
                        self._give_status_back(run_id, state, token)
                    return RunResult.of(state)
            check_model(workflow, self.model)  # a worker's too: refused, it fails nothing
            driving = True
            return await self._drive(
                run_id,
                workflow,
                events,
                manifest,
                resume_from=None if meta is None else meta.seq,
                state=state,
                token=token,
                existing=existing,
            )
        finally:
            if token is not None and not driving:
                self.release_lease(run_id, token)

    def _give_status_back(self, run_id: str, state: SchedulerState, token: int) -> None:
        """A claim marks the run running; when there is nothing to drive (a finished run
        woken by a cancel or a message, a budget-exhausted one with nothing raised) it gets
        back the status its state holds, with its last update as it was (gc's age)."""
        info = self.store.get_run(run_id)
        if info.status == "running":
            result = RunResult.of(state)
            self.store.commit(
                run_id, token, [StatusWrite(result.status, result.outcome, info.updated_ms)]
            )

    async def _drive(
        self,
        run_id: str,
        workflow: Workflow,
        events: list[Event],
        manifest: dict[str, Any],
        *,
        resume_from: int | bool | None = False,
        state: SchedulerState | None = None,
        token: int | None = None,
        existing: Journal | None = None,
    ) -> RunResult:
        """Drive under a lease. ``resume_from``: False for a new run, else the checkpoint
        seq the state was restored from (None: no checkpoint, the run restarts).
        ``token``: a lease already held (a worker's claim), else one is acquired here;
        either is released at the end. ``existing``: the run's journal, read under that
        held lease (else it is read here, once the lease is taken)."""
        claimed = token is not None  # a worker's claim marked a queued or parked run running
        held = token
        tools: Dispatcher | None = None
        trace = run_trace(self.telemetry, run_id, workflow.name, resumed=resume_from is not False)
        try:
            _check_epoch(run_id, manifest)
            if resume_from is not False:
                _check_model(run_id, manifest, self.model)
            ttl = _lease_ttl()
            now = self.clock()
            if held is None:
                self._release_unreleased(run_id)  # a drive of ours that ended with the store away
                held = self.store.acquire_lease(run_id, this_process(), now, ttl, owner_alive)
                if resume_from is not False:
                    self._set_wake(run_id, None, replace=True)  # this drive settles what is due
            if resume_from is not False and existing is None:
                existing = self.store.load_journal(run_id)  # read under the lease
            env = make_env(workflow, _budgets_of(manifest, existing))
            if state is None:
                state = SchedulerState.new(run_id, env.plan)
            elif state.run_id != run_id:
                raise PlaitError(
                    "E010", f"checkpoint belongs to run '{state.run_id}', not '{run_id}'"
                )
            if (
                resume_from is not False
                and (not claimed or state.is_terminal())
                and self.store.get_run(run_id).status != "running"
            ):
                # queued, parked or budget-exhausted until now: a worker that dies while
                # driving it leaves a running run with a lapsing lease, which another worker
                # takes over.
                self.store.commit(run_id, held, [StatusWrite("running", None, now)])
            journal = DurableJournal(
                self.store,
                run_id,
                held,
                now,
                existing=existing,
                on_dangling=workflow.on_dangling,
                crash=CrashPoint.from_env(),
                resume_from=resume_from,
                lease_ttl_ms=ttl,
                max_checkpoint_bytes=self.max_checkpoint_bytes,
            )
            llm_keys = self._forked_llm_keys(manifest)
            llm_keys += [i.key for i in existing.intents if i.key.kind == "llm"] if existing else []
            children = self._child_runner(run_id, workflow)
            tools = dispatcher_for(workflow, llm_keys, children, self.model)
            execute = trace.driving(state, tools, journal.redelivered)
            results = dict(existing.results) if existing else {}
            settled_children = await self._settle_children(state, env, children, journal, now)
            events = [*events, *settled_children, *settlements(state, results, journal, now)]
            poll = self._poller(run_id, existing)
            while True:
                result = await drive(
                    env,
                    state,
                    events,
                    journal,
                    execute,
                    self.clock,
                    self.observer,
                    poll,
                    trace.watch,
                )
                if result.status != "parked":
                    break
                now = self.clock()
                due = settlements(state, results, journal, now)
                if not due:
                    break  # waiting for a human, or for a timer that is not due yet
                events = [ClockReading(now), *due]
            if result.status == "parked":
                result.asks = self.asks(run_id)  # its own and its children's (§3.9)
            journal.status(state)
            journal.commit()
            if result.status == "failed":
                await self._cancel_children(run_id)
            if result.status == "parked":  # when a worker should drive it on (§8 timers)
                self._set_wake(run_id, self._wake_time(state))
            trace.end(result)
        except BaseException as exc:
            trace.end(None, exc)
            raise
        finally:
            try:
                if tools is not None:
                    await tools.aclose()  # stops the drive's MCP servers
            finally:
                if held is not None:
                    self.release_lease(run_id, held)
        result.redelivered = len(journal.redelivered)
        return result

    # --- leases this process could not give up ------------------------------------

    def release_lease(self, run_id: str, token: int) -> None:
        """Give up a lease this process holds on ``run_id``.

        When the store cannot be reached (PLAIT-E020, the server went away) the lease is
        remembered instead of failing: the next drive of that run from this runtime, or
        ``retry_releases``, gives it up once the store is back, and until then it lapses
        after its TTL like the lease of a process that died.
        """
        try:
            self.store.release_lease(run_id, token)
        except PlaitError as exc:
            if exc.code != "E020":
                raise
            with self._unreleased_lock:
                self._unreleased[run_id] = max(token, self._unreleased.get(run_id, token))
            return
        with self._unreleased_lock:
            if self._unreleased.get(run_id, token) <= token:
                self._unreleased.pop(run_id, None)

    def retry_releases(self) -> int:
        """Give up the leases ``release_lease`` could not; how many are still held."""
        with self._unreleased_lock:
            pending = sorted(self._unreleased.items())
        for run_id, token in pending:
            self.release_lease(run_id, token)
            with self._unreleased_lock:
                if self._unreleased.get(run_id) == token:
                    break  # the store is still away: later
        with self._unreleased_lock:
            return len(self._unreleased)

    def _release_unreleased(self, run_id: str) -> None:
        with self._unreleased_lock:
            token = self._unreleased.get(run_id)
        if token is not None:
            self.release_lease(run_id, token)

    # --- wake times: when a worker should drive a parked run on (§11) ------------------

    def _set_wake(self, run_id: str, wake_ms: int | None, *, replace: bool = False) -> None:
        """Record the run's wake time on stores that keep one (the earlier one wins)."""
        set_wake = getattr(self.store, "set_wake", None)
        if set_wake is not None and (replace or wake_ms is not None):
            set_wake(run_id, wake_ms, replace=replace)

    def _wake_time(self, state: SchedulerState) -> int | None:
        """The earliest of a parked run's timers, ask expiries and children's wake times."""
        wake_of = getattr(self.store, "wake_of", None)
        times: list[int] = []
        for entry in state.pending_asks.values():
            if entry.wake_ms is not None:
                times.append(int(entry.wake_ms))
            if entry.expires_at is not None:
                times.append((int(entry.expires_at) + 1) * 1000)  # expired: now//1000 > it
            if entry.child is not None and wake_of is not None:
                key = entry.key
                child = wake_of(child_run_id(state.run_id, key))
                if child is not None:
                    times.append(int(child))
        return min(times, default=None)

    def _wake_root(self, run_id: str) -> None:
        """Something was journaled for ``run_id``: its top-level run is due now."""
        root = self.store.get_run(run_id)
        while root.parent_run_id is not None:
            root = self.store.get_run(root.parent_run_id)
        self._set_wake(root.run_id, self.clock())

    # --- commands from outside the driver -----------------------------------------

    def cancel(self, run_id: str, reason: str = "", by: str | None = None) -> None:
        """Journal a cancel for the run and its descendants; each next drive feeds it."""
        self.store.get_run(run_id)
        body = {"by": by or self.principal, "reason": reason}
        for target in [run_id, *self._descendants(run_id)]:
            self.store.commit(target, None, [RecordWrite("cancel", body)])
        self._wake_root(run_id)

    def _poller(self, run_id: str, existing: Journal | None) -> Callable[[], list[Event]]:
        """Between waves: cancels and steering messages journaled since the drive began."""
        items = existing.items() if existing else []
        seen = {"after": max((item.seq for item in items), default=0)}

        def poll() -> list[Event]:
            found = self.store.records_after(run_id, seen["after"], ("cancel", "inbox"))
            events: list[Event] = []
            for record in found:
                seen["after"] = record.seq
                if record.kind == "cancel":
                    events.append(CancelSeen(record.body["by"], record.body["reason"]))
                else:
                    events.append(InputReceived(record.body["message"]))
            return events

        return poll

    def _forked_llm_keys(self, manifest: dict[str, Any]) -> list[JournalKey]:
        """The LLM effects a fork's history holds before its fork point, oldest first: the
        base run's up to the checkpoint forked from (and its own base's). A scripted
        model's n-th response goes on from there, as the run's own turns would."""
        fork_of = manifest.get("fork_of")
        if not isinstance(fork_of, dict) or fork_of.get("seq") is None:
            return []
        base = str(fork_of["run_id"])
        if not self._exists(base):
            return []  # collected since (plait gc): the fork's own turns are all it has
        inherited = self._forked_llm_keys(self._manifest(base))
        journal = self.store.load_journal(base)
        seq = int(fork_of["seq"])
        return inherited + [i.key for i in journal.intents if i.key.kind == "llm" and i.seq < seq]

    # --- subgraphs (§3.9) ---------------------------------------------------------

    def _descendants(self, run_id: str) -> list[str]:
        prefix = run_id + "~"
        return sorted(i.run_id for i in self.store.list_runs() if i.run_id.startswith(prefix))

    def _child_runner(self, run_id: str, workflow: Workflow) -> ChildRunner:
        """Runs the child workflows of ``run_id``, the run being driven. A child's id is
        derived from that run's id, not from the key's: a fork inherits the keys of the
        children its base waited on, and gets children of its own (§5.6: the base run is
        never touched)."""

        async def run_child(key: JournalKey, path: str, value: Any) -> EffectOutcome | None:
            from plait.workflow import load_workflow

            child_id = child_run_id(run_id, key)
            if self._exists(child_id):
                result = await self.resume(child_id)
            else:
                if value is None:  # settling a child never started (the parent died first)
                    value = self._intent_input(key)  # or a fork's, from its base's journal
                child = load_workflow(workflow.base_dir / path)
                result = await self.start(child, value, run_id=child_id, parent=run_id)
            if result.status == "completed":
                return Completed(result.context)
            if result.status in ("parked", "running"):
                return None  # the parent parks on it
            # The child's outcome as `plait show` words it (a cancel's detail names by and reason).
            fields = contract_outcome(result.outcome) or {}
            told = ", ".join(
                f"{k}={v}" for k, v in fields.items() if k not in ("kind", "by", "reason")
            )
            return Failed("ExecutorError", f"child run '{child_id}' ended {result.status}: {told}")

        return run_child

    async def _cancel_children(self, run_id: str) -> None:
        """A run that failed abandoned the child runs it waited on (§3.5 fail-fast): cancel
        each one still parked, with its descendants, and drive it to its end, so that
        nobody is asked to answer for a failed run and its tree can be collected."""
        parked = self.store.list_runs("parked")
        for child in sorted(r.run_id for r in parked if r.parent_run_id == run_id):
            body = {"by": self.principal, "reason": f"parent run '{run_id}' failed"}
            for target in [child, *self._descendants(child)]:
                self.store.commit(target, None, [RecordWrite("cancel", body)])
            await self.resume(child)

    def _intent_input(self, key: JournalKey) -> Any:
        """The input journaled with the intent of ``key`` (the child's input, §3.9)."""
        for intent in self.store.load_journal(key.run_id).intents:
            if intent.key == key:
                return intent.input
        raise PlaitError("E010", f"run '{key.run_id}' has no intent for node '{key.node}'")

    def _exists(self, run_id: str) -> bool:
        try:
            self.store.get_run(run_id)
        except PlaitError as exc:
            if exc.code == "E017":
                return False
            raise
        return True

    async def _settle_children(
        self,
        state: SchedulerState,
        env: StepEnv,
        children: ChildRunner,
        journal: DurableJournal,
        now: int,
    ) -> list[Event]:
        """Resume the children a parked parent waits on; settle those that finished."""
        events: list[Event] = []
        if state.is_terminal():
            return events
        for entry_id, entry in sorted(state.pending_asks.items()):
            if entry.child is None:
                continue
            key = entry.key
            path = env.executors[entry.node].name
            outcome = await children(key, path, None)
            if outcome is not None:
                journal.result(key, outcome, now)
                events.append(ResponseSettled(entry_id, outcome))
        return events

    def raise_budget(self, run_id: str, raised: dict[str, Any]) -> None:
        """Journal a manifest supersession with raised ceilings (fed as BudgetRaised on resume).

        ``raised`` holds ceilings in the units a run keeps (``check_ceilings``).
        """
        check_ceilings(raised, "raise_budget")
        info = self.store.get_run(run_id)
        self.store.commit(run_id, None, [RecordWrite("budget_raise", raised)])
        if info.parent_run_id is not None:
            # A child's own wake time keeps its tree from gc until a drive of the child
            # feeds the raise: the root's does not keep a finished root that is not
            # budget-exhausted, and a budget-exhausted child's parent has failed (its
            # node did), so only `resume CHILD` goes on with it.
            self._set_wake(run_id, self.clock())
        self._wake_root(run_id)  # a worker drives the tree on

    async def fork(
        self,
        run_id: str,
        *,
        at: int | None = None,
        workflow: Workflow | None = None,
        budgets: dict[str, Any] | None = None,
        new_run_id: str | None = None,
    ) -> RunResult:
        """A new run from any checkpoint of ``run_id`` (superstep ``at``, else the latest),
        ``budgets`` raising ceilings in the units a run keeps (``check_ceilings``)."""
        if budgets:
            check_ceilings(budgets, "fork budgets")
        manifest = self._manifest(run_id)
        base_workflow = workflow or pinned_workflow(manifest)
        base_workflow.plan()
        check_model(base_workflow, self.model)
        catalogue = manifest.get("mcp_catalogue")
        if workflow is not None:  # a new definition pins what its MCP servers offer now
            catalogue = await fetch_catalogue(workflow)
            base_workflow = with_catalogue(workflow, catalogue)
        journal = self.store.load_journal(run_id)
        metas = [m for m in journal.checkpoints if at is None or m.superstep == at]
        if not metas and not journal.checkpoints and at in (None, 0):
            # Nothing closed yet (say an effect of superstep 1 was left dangling): as a
            # resume would (§5.4), the fork starts again from the run's input.
            return await self._fork_from_input(
                run_id, manifest, base_workflow, catalogue, budgets, new_run_id
            )
        if not metas:
            raise PlaitError("E017", f"run '{run_id}' has no checkpoint at superstep {at}")
        meta = metas[0] if at is not None else metas[-1]
        seed = loads(self.store.read_checkpoint(run_id, meta.seq))
        fork_id = new_run_id or new_run_id_for_fork(run_id)
        state = fork_state(SchedulerState.from_json(seed["scheduler"]), fork_id)
        if workflow is not None:
            plan = workflow.plan()
            if len(plan.nodes) != len(state.node_state) or len(plan.edges) != len(state.edge_fired):
                raise PlaitError(
                    "E010",
                    f"cannot fork '{run_id}' onto workflow '{workflow.name}': it has a different"
                    " number of nodes or edges than the checkpoint",
                )
        data = dumpb({"scheduler": state.to_json(), "decisions": seed["decisions"]})
        if len(data) > self.max_checkpoint_bytes:  # its own first checkpoint: refused, as a wave's
            raise checkpoint_too_large(
                fork_id,
                meta.superstep,
                len(data),
                self.max_checkpoint_bytes,
                "the fork would start from it, so no fork was made",
            )
        now = self.clock()
        fork_of = {"run_id": run_id, "seq": meta.seq, "superstep": meta.superstep}
        fork_manifest = _fork_manifest(
            manifest, fork_id, base_workflow, catalogue, budgets, fork_of
        )
        info = RunInfo(fork_id, base_workflow.name, "running", self.principal, None, now, now)
        self.store.create_run(info, fork_manifest)
        self.store.commit(
            fork_id,
            None,
            [
                CheckpointWrite(meta.superstep, data),
                RecordWrite("fork", {"from_run": run_id, "from_seq": meta.seq}),
                StatusWrite("running", None, now),
            ],
        )
        seed_meta = self.store.latest_checkpoint(fork_id)
        assert seed_meta is not None
        return await self._drive(
            fork_id,
            base_workflow,
            [ClockReading(now)],
            fork_manifest,
            resume_from=seed_meta.seq,
            state=state,
        )

    async def _fork_from_input(
        self,
        run_id: str,
        manifest: dict[str, Any],
        workflow: Workflow,
        catalogue: Any,
        budgets: dict[str, Any] | None,
        new_run_id: str | None,
    ) -> RunResult:
        """A fork of a run that has no checkpoint: a new run from the same input."""
        fork_id = new_run_id or new_run_id_for_fork(run_id)
        now = self.clock()
        fork_of = {"run_id": run_id, "seq": None, "superstep": 0}
        fork_manifest = _fork_manifest(manifest, fork_id, workflow, catalogue, budgets, fork_of)
        info = RunInfo(fork_id, workflow.name, "running", self.principal, None, now, now)
        self.store.create_run(info, fork_manifest)
        self.store.commit(
            fork_id, None, [RecordWrite("fork", {"from_run": run_id, "from_seq": None})]
        )
        events: list[Event] = [ClockReading(now), Start(manifest.get("input"))]
        return await self._drive(fork_id, workflow, events, fork_manifest)

    # --- reading ------------------------------------------------------------------

    def verify(self, run_id: str, *, workflow: Workflow | None = None) -> VerifyReport:
        """Re-drive ``run_id`` from its journal and compare every checkpoint (no effects)."""
        manifest = self._manifest(run_id)
        _check_epoch(run_id, manifest)  # another engine generation's journal replays differently
        # Verify starts from the ceilings pinned at start; raises apply where they were fed.
        budgets = _budgets_of(manifest, None)
        if workflow is None and "tool_schemas" in manifest:
            # Everything verify needs is pinned: no workflow file, tool module or model.
            env = env_from_manifest(manifest["workflow"], manifest["tool_schemas"], budgets)
            return verify_run(self.store, run_id, env)
        if workflow is None and manifest.get("source") is None:
            raise PlaitError("E010", f"run '{run_id}' was started from Python; pass its workflow")
        workflow = pinned_workflow(manifest, workflow)
        return verify_run(self.store, run_id, make_env(workflow, budgets))

    def show(self, run_id: str) -> RunResult:
        return show(self.store, run_id, now_ms=self.clock())

    def trace(self, run_id: str) -> list[dict[str, Any]]:
        return trace(self.store, run_id)

    def _manifest(self, run_id: str) -> dict[str, Any]:
        manifests = self.store.manifests(run_id)
        return dict(manifests[0])

    def _state_at(self, run_id: str, seq: int) -> SchedulerState:
        try:
            checkpoint = loads(self.store.read_checkpoint(run_id, seq))
            return SchedulerState.from_json(checkpoint["scheduler"])
        except PlaitError:
            raise
        except Exception as exc:
            raise PlaitError(
                "E010", f"checkpoint {seq} of run '{run_id}' is unreadable: {exc}"
            ) from exc

    def _unfed_events(self, journal: Journal, *, restart: bool = False) -> list[Event]:
        """Cancels, steering messages and budget raises journaled but not yet fed to the core.

        Counted, not dated: a cancel journaled while another process drove the run is
        still unfed when that drive's later feeds were written. ``restart``: the run
        starts again from its input (no checkpoint), so everything journaled is unfed.
        """
        fed = {"cancel": 0, "input": 0, "budget_raised": 0}
        for record in [] if restart else journal.records:
            if record.kind == FEED:
                for item in record.body["events"]:
                    for name in fed:
                        if name in item:
                            fed[name] += 1
        kinds = {"cancel": "cancel", "inbox": "input", "budget_raise": "budget_raised"}
        seen = {"cancel": 0, "input": 0, "budget_raised": 0}
        events: list[Event] = []
        for record in journal.records:
            if record.kind not in kinds:
                continue
            name = kinds[record.kind]
            seen[name] += 1
            if seen[name] <= fed[name]:
                continue
            if name == "cancel":
                events.append(CancelSeen(record.body["by"], record.body["reason"]))
            elif name == "input":
                events.append(InputReceived(record.body["message"]))
            else:
                events.append(BudgetRaised(record.body))
        return events

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
        # A child's ask is answerable through its parent's run id (§3.9). An answered ask
        # still has its owner: answering it again is "already answered" (PLAIT-E011).
        owner = owner_of(self.store, run_id, ask_id) or run_id
        accepted = respond(
            self.store,
            owner,
            ask_id,
            by=by or self.principal,
            now_ms=self.clock(),
            result=result,
            deny=deny,
            approve=approve,
            reason=reason,
        )
        self._wake_root(owner)
        return accepted

    def respond_all(
        self, run_id: str, answers: Sequence[Answer], *, by: str | None = None
    ) -> list[dict[str, Any]]:
        """Answer several pending asks of ``run_id`` itself in one commit, or none of them.

        Each answer is checked as ``respond`` checks one; if any is refused, nothing is
        journaled (not even the refusal) and its error is raised.
        """
        accepted = respond_all(
            self.store, run_id, answers, by=by or self.principal, now_ms=self.clock()
        )
        self._wake_root(run_id)
        return accepted

    def asks(self, run_id: str | None = None) -> list[dict[str, Any]]:
        """What waits for a human: pending asks of one run (and its children), or of all."""
        if run_id is not None:
            self.store.get_run(run_id)
            return pending_asks(self.store, run_id, now_ms=self.clock())
        found: list[dict[str, Any]] = []
        now = self.clock()
        for info in self.store.list_runs("parked"):  # a parked child is listed as itself
            found.extend(pending_asks(self.store, info.run_id, children=False, now_ms=now))
        return found

    def send(self, run_id: str, message: Any) -> None:
        """Journal a steering message; the next superstep moves it into context["$inbox"]."""
        check_input(message, "message")
        self.store.get_run(run_id)
        self.store.commit(run_id, None, [RecordWrite("inbox", {"message": message})])
        self._wake_root(run_id)  # a parked run takes it when a worker drives it on

    # --- sync wrappers --------------------------------------------------------------

    def run_sync(self, workflow: Workflow, input: Any = None, **kwargs: Any) -> RunResult:
        return asyncio.run(self.start(workflow, input, **kwargs))

    def resume_sync(self, run_id: str, **kwargs: Any) -> RunResult:
        return asyncio.run(self.resume(run_id, **kwargs))

    def fork_sync(self, run_id: str, **kwargs: Any) -> RunResult:
        return asyncio.run(self.fork(run_id, **kwargs))


def _fork_manifest(
    manifest: dict[str, Any],
    fork_id: str,
    workflow: Workflow,
    catalogue: Any,
    budgets: dict[str, Any] | None,
    fork_of: dict[str, Any],
) -> dict[str, Any]:
    """The base run's manifest as the fork pins it: its id, definition, MCP catalogue,
    raised ceilings and where it came from."""
    pinned = {
        **manifest,
        "run_id": fork_id,
        "workflow": workflow.to_manifest(),
        "source": str(workflow.source.resolve()) if workflow.source else None,
        "fork_of": fork_of,
    }
    pinned.pop("mcp_catalogue", None)
    if catalogue:
        pinned["mcp_catalogue"] = catalogue
    if budgets:
        pinned["budgets_override"] = budgets
    return pinned


def _check_model(run_id: str, manifest: dict[str, Any], model: Model | None) -> None:
    """PLAIT-E025 when a run is driven on with a model other than the one it pinned (a
    ``Runtime(model=...)`` resuming it): its turns so far were that model's."""
    pinned = (manifest["workflow"].get("llm") or {}).get("model")
    given = getattr(model, "spec", None)
    if pinned is not None and given is not None and given != pinned:
        raise PlaitError(
            "E025",
            f"run '{run_id}' pinned model '{pinned}' at start; this runtime was given"
            f" '{given}' (resume it with the model it started with, or fork it)",
        )


def _check_epoch(run_id: str, manifest: dict[str, Any]) -> None:
    """PLAIT-E026 unless this plait replays the engine epoch the run was written by."""
    if manifest.get("engine_epoch") != ENGINE_EPOCH:
        raise PlaitError(
            "E026",
            f"run '{run_id}' was written by engine epoch {manifest.get('engine_epoch')};"
            f" this plait replays epoch {ENGINE_EPOCH}",
        )


def _budgets_of(manifest: dict[str, Any], journal: Journal | None) -> Budgets:
    """A run's ceilings: pinned at start, plus every raise ``journal`` holds (if given)."""
    budgets = dict(manifest["workflow"].get("budgets") or {})
    budgets.update(manifest.get("budgets_override") or {})
    if journal is not None:
        for record in journal.records:
            if record.kind == "budget_raise":
                budgets.update(record.body)
    return Budgets.from_json(budgets)


def new_run_id_for_fork(run_id: str) -> str:
    return f"{run_id.split('~')[0]}-fork-{new_run_id()[4:12]}"
