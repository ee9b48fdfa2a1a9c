"""Fork (§5.6): a new run from any checkpoint of another, which is never touched.

The fork's first checkpoint is the base's state under the fork's id, moved on by the
core's fork transition (a finished run continues, edited context keys are replaced); its
manifest pins the base's definition or a new one, with raised ceilings and where it came
from. Its ``fork`` record says from where, who forked and what they edited, so ``verify``
can rebuild the seed from the base's checkpoint (``seed_checkpoint``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from plait.core.errors import PlaitError
from plait.core.events import ClockReading, Event, Start
from plait.core.fork import checked_edits, fork_state
from plait.core.state import SchedulerState
from plait.driver.admission import check_ceilings, check_model
from plait.driver.checkpoints import Checkpoint, encode_checkpoint, read_checkpoint
from plait.driver.children import Runs
from plait.driver.driving import Drive, FromCheckpoint, NewRun, drive_run
from plait.driver.durable import checkpoint_too_large
from plait.driver.host import Host
from plait.driver.inprocess import new_run_id
from plait.driver.migrating import MIGRATE, manifest_at
from plait.driver.run_ids import check_principal
from plait.driver.wave import RunResult
from plait.store.records import CheckpointWrite, RecordWrite, RunInfo, StatusWrite

if TYPE_CHECKING:
    from plait.workflow.run_definition import RunDefinition


async def fork_run(
    host: Host,
    runs: Runs,
    run_id: str,
    *,
    at: int | None,
    onto: Callable[[], RunDefinition] | None,
    budgets: dict[str, Any] | None,
    fork_id: str | None,
    edits: dict[str, Any] | None = None,
    by: str | None = None,
) -> RunResult:
    """Fork ``run_id`` at superstep ``at`` (else its latest checkpoint) onto the
    definition ``onto`` builds (else the base's own pinned one), as principal ``by`` (else
    the host's), with ``edits`` replacing context keys; see ``Runtime.fork``."""
    if budgets:
        check_ceilings(budgets, "fork budgets")
    by = check_principal(by) if by is not None else host.principal
    edits = checked_edits(edits) if edits else None  # E019 before anything is read
    manifest = host.manifest(run_id)
    new = onto() if onto is not None else None
    definition = new or host.definitions.pinned(manifest)
    check_model(definition, host.model)
    catalogue = manifest.get("mcp_catalogue")
    if new is not None:  # a new definition pins what its MCP servers offer now
        definition, catalogue = await host.definitions.with_catalogue(new)
    journal = host.store.load_journal(run_id)
    metas = [m for m in journal.checkpoints if at is None or m.superstep == at]
    if not metas and not journal.checkpoints and at in (None, 0):
        # Nothing closed yet (say an effect of superstep 1 was left dangling): as a
        # resume would (§5.4), the fork starts again from the run's input.
        if edits:  # there is no context to edit yet, and the input is the base's
            raise PlaitError(
                "E019", f"run '{run_id}' has no checkpoint whose context a fork could edit"
            )
        return await _fork_from_input(
            host, runs, run_id, manifest, definition, catalogue, budgets, fork_id, by
        )
    if not metas:
        raise PlaitError("E017", f"run '{run_id}' has no checkpoint at superstep {at}")
    meta = metas[0] if at is not None else metas[-1]
    if any(r.kind == MIGRATE for r in journal.records):  # the version of that checkpoint
        manifest = manifest_at(host.store.manifests(run_id), journal.records, meta.seq)
        if new is None:
            definition, catalogue = host.definitions.pinned(manifest), manifest.get("mcp_catalogue")
    fork_id = fork_id or new_run_id_for_fork(run_id)
    state, data = seed_checkpoint(read_checkpoint(host.store, run_id, meta.seq), fork_id, edits)
    if new is not None and new.plan_counts != (len(state.node_state), len(state.edge_fired)):
        raise PlaitError(
            "E010",
            f"cannot fork '{run_id}' onto workflow '{new.name}': it has a different"
            " number of nodes or edges than the checkpoint",
        )
    if len(data) > host.max_checkpoint_bytes:  # its own first checkpoint: refused, as a wave's
        raise checkpoint_too_large(
            fork_id,
            meta.superstep,
            len(data),
            host.max_checkpoint_bytes,
            "the fork would start from it, so no fork was made",
        )
    now = host.clock()
    fork_of = {"run_id": run_id, "seq": meta.seq, "superstep": meta.superstep}
    fork_manifest = _fork_manifest(manifest, fork_id, definition, catalogue, budgets, fork_of)
    if edits is not None:  # who edited a run's state may not approve its requests (§8)
        fork_manifest["editors"] = sorted({*manifest.get("editors", ()), by})
    info = RunInfo(fork_id, definition.name, "running", by, None, now, now)
    host.store.create_run(info, fork_manifest)
    record = {"from_run": run_id, "from_seq": meta.seq, "by": by}
    host.store.commit(
        fork_id,
        None,
        [
            CheckpointWrite(meta.superstep, data),
            RecordWrite("fork", record if edits is None else {**record, "set": edits}),
            StatusWrite("running", None, now),
        ],
    )
    seed_meta = host.store.latest_checkpoint(fork_id)
    assert seed_meta is not None
    origin = FromCheckpoint(seed_meta.seq, state)
    drive = Drive(fork_id, definition, [ClockReading(now)], fork_manifest, origin)
    return await drive_run(host, runs, drive)


async def _fork_from_input(
    host: Host,
    runs: Runs,
    run_id: str,
    manifest: dict[str, Any],
    definition: RunDefinition,
    catalogue: Any,
    budgets: dict[str, Any] | None,
    fork_id: str | None,
    by: str,
) -> RunResult:
    """A fork of a run that has no checkpoint: a new run from the same input."""
    fork_id = fork_id or new_run_id_for_fork(run_id)
    now = host.clock()
    fork_of = {"run_id": run_id, "seq": None, "superstep": 0}
    fork_manifest = _fork_manifest(manifest, fork_id, definition, catalogue, budgets, fork_of)
    info = RunInfo(fork_id, definition.name, "running", by, None, now, now)
    host.store.create_run(info, fork_manifest)
    record = {"from_run": run_id, "from_seq": None, "by": by}
    host.store.commit(fork_id, None, [RecordWrite("fork", record)])
    events: list[Event] = [ClockReading(now), Start(manifest.get("input"))]
    return await drive_run(host, runs, Drive(fork_id, definition, events, fork_manifest, NewRun()))


def seed_checkpoint(
    base: Checkpoint, fork_id: str, edits: dict[str, Any] | None
) -> tuple[SchedulerState, bytes]:
    """The seed of fork ``fork_id`` from the base's checkpoint ``base``: its state and
    the bytes of its first checkpoint (the base's decision record, unchanged). ``fork``
    writes these bytes; ``verify`` rebuilds them from the journaled ``fork`` record."""
    state = fork_state(base.scheduler, fork_id, edits)
    return state, encode_checkpoint(state, base.decisions)


def _fork_manifest(
    manifest: dict[str, Any],
    fork_id: str,
    definition: RunDefinition,
    catalogue: Any,
    budgets: dict[str, Any] | None,
    fork_of: dict[str, Any],
) -> dict[str, Any]:
    """The base run's manifest as the fork pins it: its id, definition, MCP catalogue,
    raised ceilings and where it came from."""
    pinned = {
        **manifest,
        "run_id": fork_id,
        "workflow": definition.pinned,
        "source": definition.source,
        "fork_of": fork_of,
    }
    pinned.pop("mcp_catalogue", None)
    pinned.pop("migrated_from", None)  # the base's history, not the fork's
    pinned.pop("schedule", None)  # a fork is made by a person, not by the base's schedule
    if catalogue:
        pinned["mcp_catalogue"] = catalogue
    if budgets:
        pinned["budgets_override"] = budgets
    return pinned


def new_run_id_for_fork(run_id: str) -> str:
    return f"{run_id.split('~')[0]}-fork-{new_run_id()[4:12]}"
