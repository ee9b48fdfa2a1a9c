"""``RunView``: one run read back, each part of it read once, for every reader.

``plait show``, ``trace``, ``asks``, the governance explanation, the agent's
``AgentRunState`` and the HTTP API's reads all answer from a view: the run's row, its
manifest, its journal and its latest checkpoint are each read at most once per view,
and checkpoints are parsed only through ``driver.checkpoints``. A view never writes.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cached_property
from typing import Any

from plait.core.state import SchedulerState, Spent
from plait.driver.answers import pending_asks
from plait.driver.checkpoints import Checkpoint, read_checkpoint
from plait.driver.run_result import RunResult
from plait.store.base import Store
from plait.store.records import CheckpointMeta, Journal, RunInfo
from plait.workflow.plan_hash import plan_hash


class RunView:
    """A read-only view of ``run_id`` on ``store``; ``now_ms`` hides asks that expired."""

    def __init__(self, store: Store, run_id: str, *, now_ms: int | None = None) -> None:
        self.store = store
        self.run_id = run_id
        self.now_ms = now_ms
        self._checkpoints: dict[int, Checkpoint] = {}

    @cached_property
    def info(self) -> RunInfo:
        """The run's row (PLAIT-E017 for an unknown run)."""
        return self.store.get_run(self.run_id)

    @cached_property
    def manifest(self) -> dict[str, Any]:
        """What the run lives on now: pinned at start, or by its last migration."""
        return dict(self.manifests[-1])

    @cached_property
    def manifests(self) -> list[dict[str, Any]]:
        """Its original manifest, then one per migration, in order."""
        return [dict(m) for m in self.store.manifests(self.run_id)]

    @cached_property
    def journal(self) -> Journal:
        return self.store.load_journal(self.run_id)

    @cached_property
    def latest(self) -> CheckpointMeta | None:
        """The latest checkpoint's place in the journal; None before the first."""
        if "journal" in self.__dict__:
            checkpoints = self.journal.checkpoints
            return checkpoints[-1] if checkpoints else None
        return self.store.latest_checkpoint(self.run_id)

    @cached_property
    def state(self) -> SchedulerState | None:
        """The scheduler state at the latest checkpoint; None before the first."""
        meta = self.latest
        return None if meta is None else self.checkpoint(meta.seq).scheduler

    def checkpoint(self, seq: int) -> Checkpoint:
        """The checkpoint at journal ``seq``, parsed once per view."""
        if seq not in self._checkpoints:
            self._checkpoints[seq] = read_checkpoint(self.store, self.run_id, seq)
        return self._checkpoints[seq]

    @property
    def plan_hash(self) -> str:
        """The plan the run is pinned to, by meaning."""
        return plan_hash(self.manifest["workflow"])

    @property
    def nodes(self) -> list[dict[str, Any]]:
        """The pinned definition's nodes, in plan order."""
        return list(self.manifest["workflow"]["nodes"])

    # --- what the verbs answer ---------------------------------------------------------

    def show(self) -> RunResult:
        """The run as of its latest checkpoint (a queued run shows its input context);
        with the clock, asks that expired are no longer listed (see ``pending_asks``)."""
        info = self.info
        state = self.state
        if state is None:
            value = self.manifest.get("input")
            context = (
                value if isinstance(value, dict) else ({} if value is None else {"input": value})
            )
            # Nothing spent yet: every figure of ``spent`` is there, at zero (CONTRACT.md).
            spent = {**Spent().to_json(), "elapsed_ms": 0}
            queued = RunResult(self.run_id, info.status, None, context, spent, [])
            return queued.on_version(self.manifest)
        # Its own asks and its child runs', each naming its run, as ``run`` and ``asks`` list them.
        result = RunResult.of(state, self.asks())
        result.on_version(self.manifest)
        if result.status == "running" and info.status != "running":
            result.status = info.status  # e.g. interrupted: the row knows better than the state
        elif result.status == "parked" and info.status == "running":
            # Driven on since it parked (an answer came), not checkpointed again yet, or the
            # driver died on the way: the row knows it left the park.
            result.status = "running"
        return result

    def asks(self, *, children: bool = True) -> list[dict[str, Any]]:
        """The asks the run waits on, as announced: its own and (``children``) those of
        the child runs it waits on (§3.9)."""
        self.info  # noqa: B018 - PLAIT-E017 for an unknown run
        if self.state is None:
            return []
        return pending_asks(
            self.store, self.run_id, self.state, children=children, now_ms=self.now_ms
        )

    def trace(self) -> list[dict[str, Any]]:
        """Every effect in dispatch order, with governance's refusals (``inspect_run``)."""
        from plait.driver.inspect_run import trace

        return trace(self)

    def explain(self) -> dict[str, Any]:
        """Where each governed node in flight stands (``inspect_run.explain``)."""
        from plait.driver.inspect_run import explain

        return explain(self)


def parked_asks(
    store: Store, parked: Iterable[RunInfo], *, now_ms: int | None = None
) -> list[dict[str, Any]]:
    """The pending asks of the ``parked`` runs (``store.list_runs("parked")``); a parked
    child is listed as itself."""
    found: list[dict[str, Any]] = []
    for info in parked:
        found.extend(RunView(store, info.run_id, now_ms=now_ms).asks(children=False))
    return found
