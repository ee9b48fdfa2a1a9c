"""What every part of the driver works with: one store, one clock, one principal.

A ``Host`` is built once per ``Runtime`` and handed to the modules that start, drive,
fork and answer runs, so none of them reaches back into the facade. It owns the book of
leases this process could not give up (``release_lease``).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from plait.core.errors import PlaitError

if TYPE_CHECKING:
    from opentelemetry.trace import TracerProvider

    from plait.driver.clock import Clock
    from plait.driver.deltas import DeltaObserver
    from plait.driver.wave import Observer
    from plait.models.base import Model
    from plait.store.base import Store
    from plait.workflow.run_definition import Definitions


@dataclass(eq=False)
class Host:
    """A runtime's settings and store; ``model`` is a model object to call instead of the
    workflow's spec (the Agent's hooked model); ``deltas`` is told streamed turns' pieces."""

    store: Store
    clock: Clock
    principal: str
    max_checkpoint_bytes: int
    observer: Observer | None = None
    model: Model | None = None
    telemetry: bool | TracerProvider | None = None
    deltas: DeltaObserver | None = None
    _definitions: Definitions | None = None
    _unreleased: dict[str, int] = field(default_factory=dict)  # run id -> a lease token
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def definitions(self) -> Definitions:
        """Where definitions the driver was not handed come from (pinned, child,
        catalogue); made on first use, so a process that only reads runs (``plait runs``)
        never imports the workflow loader."""
        if self._definitions is None:
            from plait.workflow.run_definition import Definitions

            self._definitions = Definitions()
        return self._definitions

    @definitions.setter
    def definitions(self, definitions: Definitions) -> None:
        self._definitions = definitions

    def exists(self, run_id: str) -> bool:
        try:
            self.store.get_run(run_id)
        except PlaitError as exc:
            if exc.code == "E017":
                return False
            raise
        return True

    def manifest(self, run_id: str) -> dict[str, Any]:
        """The manifest the run lives on now: pinned at its start, or by its last
        migration (a manifest supersession)."""
        return dict(self.store.manifests(run_id)[-1])

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
            with self._lock:
                self._unreleased[run_id] = max(token, self._unreleased.get(run_id, token))
            return
        with self._lock:
            if self._unreleased.get(run_id, token) <= token:
                self._unreleased.pop(run_id, None)

    def retry_releases(self) -> int:
        """Give up the leases ``release_lease`` could not; how many are still held."""
        with self._lock:
            pending = sorted(self._unreleased.items())
        for run_id, token in pending:
            self.release_lease(run_id, token)
            with self._lock:
                if self._unreleased.get(run_id) == token:
                    break  # the store is still away: later
        with self._lock:
            return len(self._unreleased)

    def release_unreleased(self, run_id: str) -> None:
        """Give up a lease on ``run_id`` that an earlier drive of ours could not."""
        with self._lock:
            token = self._unreleased.get(run_id)
        if token is not None:
            self.release_lease(run_id, token)
