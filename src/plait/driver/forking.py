"""Fork (§5.6): a new run from any checkpoint of another, which is never touched.

The fork's first checkpoint is the base's state under the fork's id, moved on by the
core's fork transition (a finished run continues); its manifest pins the base's
definition or a new one, with raised ceilings and where it came from.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from plait.core.errors import PlaitError
from plait.core.events import ClockReading, Event, Start
from plait.core.fork import fork_state
from plait.driver.admission import check_ceilings, check_model
from plait.driver.checkpoints import encode_checkpoint, read_checkpoint
from plait.driver.children import Runs
from plait.driver.driving import Drive, FromCheckpoint, NewRun, drive_run
from plait.driver.durable import checkpoint_too_large
from plait.driver.host import Host
from plait.driver.inprocess import new_run_id
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
) -> RunResult:
    """Fork ``run_id`` at superstep ``at`` (else its latest checkpoint) onto the
    definition ``onto`` builds (else the base's own pinned one); see ``Runtime.fork``."""
    if budgets:
        check_ceilings(budgets, "fork budgets")
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
        return await _fork_from_input(
            host, runs, run_id, manifest, definition, catalogue, budgets, fork_id
        )
    if not metas:
        raise PlaitError("E017", f"run '{run_id}' has no checkpoint at superstep {at}")
    meta = metas[0] if at is not None else metas[-1]
    seed = read_checkpoint(host.store, run_id, meta.seq)
    fork_id = fork_id or new_run_id_for_fork(run_id)
    state = fork_state(seed.scheduler, fork_id)
    if new is not None and new.plan_counts != (len(state.node_state), len(state.edge_fired)):
        raise PlaitError(
            "E010",
            f"cannot fork '{run_id}' onto workflow '{new.name}': it has a different"
            " number of nodes or edges than the checkpoint",
        )
    data = encode_checkpoint(state, seed.decisions)
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
    info = RunInfo(fork_id, definition.name, "running", host.principal, None, now, now)
    host.store.create_run(info, fork_manifest)
    host.store.commit(
        fork_id,
        None,
        [
            CheckpointWrite(meta.superstep, data),
            RecordWrite("fork", {"from_run": run_id, "from_seq": meta.seq}),
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
) -> RunResult:
    """A fork of a run that has no checkpoint: a new run from the same input."""
    fork_id = fork_id or new_run_id_for_fork(run_id)
    now = host.clock()
    fork_of = {"run_id": run_id, "seq": None, "superstep": 0}
    fork_manifest = _fork_manifest(manifest, fork_id, definition, catalogue, budgets, fork_of)
    info = RunInfo(fork_id, definition.name, "running", host.principal, None, now, now)
    host.store.create_run(info, fork_manifest)
    host.store.commit(fork_id, None, [RecordWrite("fork", {"from_run": run_id, "from_seq": None})])
    events: list[Event] = [ClockReading(now), Start(manifest.get("input"))]
    return await drive_run(host, runs, Drive(fork_id, definition, events, fork_manifest, NewRun()))


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
    if catalogue:
        pinned["mcp_catalogue"] = catalogue
    if budgets:
        pinned["budgets_override"] = budgets
    return pinned


def new_run_id_for_fork(run_id: str) -> str:
    return f"{run_id.split('~')[0]}-fork-{new_run_id()[4:12]}"
