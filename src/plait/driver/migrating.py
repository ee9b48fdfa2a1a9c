"""``plait migrate``: move a run that is not being driven onto a new version of its plan.

The migration is checked whole before anything is written (every reason it cannot be
done is listed, PLAIT-E030); then one commit, under the run's lease, journals it: a
``migrate`` record (who, when, from and to ``plan_hash``, the mapping), the new manifest
as a supersession (the run resumes on it from now on), and the migrated state as a
checkpoint, which verify re-derives with the same core transition (``core.migrate``).
Nothing is driven: a parked run stays parked on the new version; a finished run is
queued for the next ``resume`` or worker.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import jsonschema

from plait.core.errors import PlaitError, Problem
from plait.core.migrate import REFUSED, empty_record, migrate_state, migration_problems
from plait.core.outcomes import Completed, outcome_from_json
from plait.core.state import SchedulerState
from plait.driver.answers import output_schema
from plait.driver.checkpoints import encode_checkpoint, read_state
from plait.driver.crash import CrashPoint
from plait.driver.defaults import check_epoch, lease_ttl
from plait.driver.durable import checkpoint_too_large
from plait.driver.host import Host
from plait.driver.owner import owner_alive, this_process
from plait.store.records import (
    CheckpointWrite,
    ManifestWrite,
    Record,
    RecordWrite,
    StatusWrite,
    Write,
)
from plait.workflow import manifest_plan
from plait.workflow.plan_hash import plan_hash

if TYPE_CHECKING:
    from plait.workflow.run_definition import RunDefinition

MIGRATE = "migrate"
"""The journal record of a migration."""

MIGRATABLE = ("parked", "failed", "stalled", "budget_exhausted", "canceled")


async def migrate_run(
    host: Host,
    run_id: str,
    onto: RunDefinition,
    mapping: Mapping[str, str],
    *,
    restart_at_entry: bool,
    by: str,
) -> dict[str, Any]:
    """Move ``run_id`` onto ``onto`` (see ``Runtime.migrate``); ``{"run_id", "accepted",
    "from", "to"}``. PLAIT-E030 lists every reason it cannot be done, with nothing written."""
    info = host.store.get_run(run_id)  # E017
    if info.parent_run_id is not None:
        raise PlaitError(
            REFUSED,
            f"run '{run_id}' is a child run of '{info.parent_run_id}': it lives on its"
            " parent's version; migrate the parent",
        )
    if info.status not in MIGRATABLE:
        hint = "fork it onto the new version instead" if info.status == "completed" else ""
        raise PlaitError(
            REFUSED,
            f"run '{run_id}' is {info.status}: only {', '.join(MIGRATABLE)} runs can be"
            f" migrated{f'; {hint}' if hint else ''}",
        )
    manifests = host.store.manifests(run_id)
    manifest = dict(manifests[-1])
    check_epoch(run_id, manifest)
    definition, catalogue = await host.definitions.with_catalogue(onto)
    journal = host.store.load_journal(run_id)
    if not journal.checkpoints:
        raise PlaitError(REFUSED, f"run '{run_id}' has no checkpoint yet to migrate")
    meta = journal.checkpoints[-1]
    state = read_state(host.store, run_id, meta.seq)
    old_plan, new_plan = manifest_plan(manifest["workflow"]), manifest_plan(definition.pinned)
    problems = migration_problems(
        state, old_plan, new_plan, mapping, restart_at_entry=restart_at_entry
    )
    if not restart_at_entry:
        problems += _answers_refused(state, journal.results, definition.pinned)
    if problems:
        raise PlaitError.from_problems([_worded(p, run_id, definition.name) for p in problems])
    moved = migrate_state(state, old_plan, new_plan, mapping, restart_at_entry=restart_at_entry)
    data = encode_checkpoint(moved, empty_record(moved).to_json())
    if len(data) > host.max_checkpoint_bytes:
        raise checkpoint_too_large(
            run_id, moved.superstep, len(data), host.max_checkpoint_bytes, "nothing migrated"
        )
    now = host.clock()
    before, after = plan_hash(manifest["workflow"]), plan_hash(definition.pinned)
    body = {
        "by": by,
        "at_ms": now,
        "from": before,
        "to": after,
        "map": dict(sorted(mapping.items())),
        "restart_at_entry": restart_at_entry,
        "manifest": len(manifests),
        "from_seq": meta.seq,
    }
    status = "parked" if moved.is_parked() else "queued"
    writes: list[Write] = [
        RecordWrite(MIGRATE, body),
        ManifestWrite(_migrated_manifest(manifest, definition, catalogue, before)),
        CheckpointWrite(moved.superstep, data),
        StatusWrite(status, None, now),
    ]
    # Checked and built without a lease, so a refusal touches nothing; written under one,
    # after making sure nobody drove the run on meanwhile.
    token = host.store.acquire_lease(run_id, this_process(), now, lease_ttl(), owner_alive)
    crash = CrashPoint.from_env()
    try:
        latest = host.store.latest_checkpoint(run_id)
        if (
            latest is None
            or latest.seq != meta.seq
            or len(host.store.manifests(run_id)) != len(manifests)
        ):
            raise PlaitError(
                "E021", f"run '{run_id}' moved on while it was being migrated; migrate it again"
            )
        if crash is not None:
            crash.passed("migrate")  # a test kills the process here: nothing is written
        host.store.commit(run_id, token, writes)
        if crash is not None:
            crash.passed("migrate")  # ... or here: all of it is, the lease still held
    finally:
        host.release_lease(run_id, token)
    if status == "queued":
        host.store.notify_runnable(run_id)
    return {"run_id": run_id, "accepted": True, "from": before, "to": after}


def _migrated_manifest(
    manifest: dict[str, Any],
    definition: RunDefinition,
    catalogue: dict[str, Any],
    before: str,
) -> dict[str, Any]:
    """The run's manifest on the new version: its definition, tool schemas and sources,
    MCP catalogue; the input, principal, epoch and raised ceilings stay."""
    moved = {
        **manifest,
        "workflow": definition.pinned,
        "source": definition.source,
        "tool_schemas": definition.tool_schemas,
        "migrated_from": [*manifest.get("migrated_from", []), before],
    }
    for optional in ("mcp_catalogue", "tool_sources"):
        moved.pop(optional, None)
    if catalogue:
        moved["mcp_catalogue"] = catalogue
    sources = definition.tool_sources()
    if sources:
        moved["tool_sources"] = sources
    return moved


def _answers_refused(
    state: SchedulerState, results: Mapping[Any, Any], pinned: dict[str, Any]
) -> list[Problem]:
    """Asks answered but not yet fed whose answer the new version's schema refuses."""
    problems: list[Problem] = []
    for ask_id in sorted(state.pending_asks):
        entry = state.pending_asks[ask_id]
        record = results.get(entry.key)
        if entry.ask is None or record is None:
            continue
        outcome = outcome_from_json(record.outcome)
        schema = output_schema({"workflow": pinned}, entry.ask)
        if schema is None or not isinstance(outcome, Completed):
            continue
        errors = sorted(
            jsonschema.Draft202012Validator(schema).iter_errors(outcome.result), key=str
        )
        if errors:
            node = str(entry.ask["node"])
            problems.append(
                Problem(
                    REFUSED,
                    f"ask '{ask_id}' of node '{node}' was answered, and the new version's"
                    f" schema no longer accepts that answer: {errors[0].message}",
                    node=node,
                )
            )
    return problems


def _worded(problem: Problem, run_id: str, name: str) -> Problem:
    """A reason named by the run and the version it was to move onto."""
    return Problem(
        problem.code,
        f"cannot migrate run '{run_id}' onto '{name}': {problem.message}",
        node=problem.node,
    )


def manifest_at(manifests: Sequence[Any], records: Sequence[Record], seq: int) -> dict[str, Any]:
    """The manifest a run lived on at journal ``seq``: that of the last migration journaled
    before it, else its original."""
    index = 0
    for record in records:
        if record.kind == MIGRATE and record.seq < seq:
            index = int(record.body["manifest"])
    return dict(manifests[index])


def migration_of(body: dict[str, Any]) -> tuple[dict[str, str], bool, int]:
    """A journaled migration's mapping, restart flag and manifest index (for verify)."""
    return dict(body["map"]), bool(body["restart_at_entry"]), int(body["manifest"])


__all__ = ["MIGRATE", "manifest_at", "migrate_run", "migration_of"]
