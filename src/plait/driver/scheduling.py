"""Schedules: the verbs (add, list, pause, resume, delete, sync) and the firing workers do.

The verbs answer the JSON objects ``plait schedule ... --json`` prints and the HTTP API
returns (docs/cli.md "plait schedule"). ``fire_due`` is what every ``Worker`` does before
it claims: for each schedule whose next slot has come, ``schedule_spec.plan_firing``
decides which slots start runs, and each run is written with its slot row in one
transaction (``ScheduleStore.fire_slot``), so however many workers look at once a slot
starts one run. A run is created ``queued`` with the slot as its start time and
``"schedule": {"name", "slot_ms"}`` in its manifest; the claim that follows drives it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

from plait.core.errors import PlaitError
from plait.driver.admission import check_input
from plait.driver.runtime import Runtime
from plait.driver.starting import create_run
from plait.store.base import ScheduleStore
from plait.store.records import FIRED, OVERLAPPED, TAKEN, RunInfo, ScheduleRow
from plait.workflow import load_workflow
from plait.workflow.run_definition import definition_of
from plait.workflow.schedule_spec import (
    ScheduleSpec,
    check_name,
    file_spec,
    next_slot,
    plan_firing,
    slot_run_id,
)


def schedules_of(rt: Runtime) -> ScheduleStore:
    """The runtime's store as a schedule store (PLAIT-E020 for a caller's own store)."""
    store = rt.store
    if not isinstance(store, ScheduleStore):
        raise PlaitError("E020", f"the store {store!r} cannot keep schedules")
    return store


def schedule_object(row: ScheduleRow) -> dict[str, Any]:
    """One schedule as ``schedule list --json`` shows it."""
    return {
        **row.spec,
        "paused": row.paused,
        "next_ms": row.next_ms,
        "last_slot_ms": row.last_slot_ms,
        "last_run_id": row.last_run_id,
        "last_error": row.last_error,
        "created_ms": row.created_ms,
        "updated_ms": row.updated_ms,
    }


def checked_workflow(path: str) -> str:
    """The workflow file's absolute path once it loads (its load errors otherwise)."""
    load_workflow(path)
    return str(Path(path).resolve())


# --- verbs ---------------------------------------------------------------------------


def add_schedule(rt: Runtime, spec: ScheduleSpec) -> dict[str, Any]:
    """``plait schedule add``: ``{"name", "accepted": true, "next_ms"}``; PLAIT-E016 when
    the name is taken."""
    check_input(spec.input)
    now = rt.clock()
    row = ScheduleRow(spec.name, spec.to_json(), False, next_slot(spec, now), now, now)
    schedules_of(rt).put_schedule(row)
    return {"name": spec.name, "accepted": True, "next_ms": row.next_ms}


def list_schedules(rt: Runtime) -> dict[str, Any]:
    """``plait schedule list``: ``{"schedules": [...]}`` by name."""
    return {"schedules": [schedule_object(row) for row in schedules_of(rt).list_schedules()]}


def pause_schedule(rt: Runtime, name: str) -> dict[str, Any]:
    """``plait schedule pause``: no slot fires until it is resumed."""
    schedules_of(rt).pause_schedule(check_name(name), True, None, rt.clock())
    return {"name": name, "accepted": True, "paused": True}


def resume_schedule(rt: Runtime, name: str) -> dict[str, Any]:
    """``plait schedule resume``: from the next slot after now (slots that passed while it
    was paused are not caught up: pausing said not to run them)."""
    store = schedules_of(rt)
    row = store.get_schedule(check_name(name))
    now = rt.clock()
    next_ms = next_slot(ScheduleSpec.from_json(row.spec), now)
    store.pause_schedule(name, False, next_ms, now)
    return {"name": name, "accepted": True, "paused": False, "next_ms": next_ms}


def delete_schedule(rt: Runtime, name: str) -> dict[str, Any]:
    """``plait schedule delete``: the schedule and its slot records go; its runs stay."""
    schedules_of(rt).delete_schedule(check_name(name))
    return {"name": name, "accepted": True, "deleted": True}


def sync_schedules(rt: Runtime, path: str) -> dict[str, Any]:
    """``plait schedule sync FILE``: the store's schedules of FILE become its ``schedules:``
    list: new ones added, changed ones updated (the next slot moves only when the timing
    changed), ones no longer listed deleted. A name held by another file's schedule or by
    one added with ``schedule add`` is PLAIT-E016, with nothing written."""
    workflow = load_workflow(path)
    source = str(Path(path).resolve())
    specs = [file_spec(entry, source, i) for i, entry in enumerate(workflow.schedules)]
    store = schedules_of(rt)
    existing = {row.name: row for row in store.list_schedules()}
    for spec in specs:
        held = existing.get(spec.name)
        if held is not None and (
            held.spec.get("workflow") != source or held.spec.get("origin") != "file"
        ):
            raise PlaitError(
                "E016",
                f"schedule '{spec.name}' already exists"
                f" (for {held.spec.get('workflow')}, origin {held.spec.get('origin')})",
            )
        check_input(spec.input)
    now = rt.clock()
    report: dict[str, list[str]] = {"added": [], "updated": [], "unchanged": [], "removed": []}
    for spec in specs:
        held = existing.get(spec.name)
        if held is not None and held.spec == spec.to_json():
            report["unchanged"].append(spec.name)
            continue
        old = None if held is None else ScheduleSpec.from_json(held.spec)
        keep = held is not None and old is not None and old.timing() == spec.timing()
        next_ms = held.next_ms if keep and held is not None else next_slot(spec, now)
        row = ScheduleRow(spec.name, spec.to_json(), False, next_ms, now, now)
        added = store.put_schedule(row, replace=True)
        report["added" if added else "updated"].append(spec.name)
    listed = {spec.name for spec in specs}
    for name, row in sorted(existing.items()):
        ours = row.spec.get("workflow") == source and row.spec.get("origin") == "file"
        if ours and name not in listed:
            store.delete_schedule(name)
            report["removed"].append(name)
    return {"workflow": source, "accepted": True, **report}


# --- firing (workers) ------------------------------------------------------------------


def fire_due(rt: Runtime, log: Callable[[str], None] = lambda line: None) -> int | None:
    """Start the runs of every due slot; the earliest next slot afterwards (None: no
    schedule), so a worker can wake for it. A slot whose run cannot be made (its file is
    gone or invalid, its run id taken) is passed over with its error kept on the
    schedule (``last_error``); a storage error (PLAIT-E020) is raised."""
    store = schedules_of(rt)
    now = rt.clock()
    rows, upcoming = store.due_schedules(now)
    for row in rows:
        spec = ScheduleSpec.from_json(row.spec)
        firing = plan_firing(spec, row.next_ms, now)
        if firing.skipped:
            log(f"schedule {spec.name}: {firing.skipped} missed slot(s) not run (catch-up)")
        cursor = row.next_ms
        if not firing.fire:
            store.advance_schedule(spec.name, cursor, firing.next_ms, None, now)
        for i, slot in enumerate(firing.fire):
            after = firing.fire[i + 1] if i + 1 < len(firing.fire) else firing.next_ms
            try:
                outcome = asyncio.run(_start_slot(rt, store, spec, slot, after, now))
            except PlaitError as exc:
                if exc.code == "E020":
                    raise
                error = f"slot {slot_run_id(spec.name, slot)}: PLAIT-{exc.code} {exc.detail}"
                log(f"schedule {spec.name}: {error}")
                if not store.advance_schedule(spec.name, cursor, after, error, now):
                    break
                cursor = after
                continue
            if outcome == TAKEN:
                break  # another worker moved this schedule on
            if outcome == OVERLAPPED:
                log(f"schedule {spec.name}: slot {slot} skipped, its last run is not finished")
            cursor = after
        upcoming = firing.next_ms if upcoming is None else min(upcoming, firing.next_ms)
    return upcoming


async def _start_slot(
    rt: Runtime, store: ScheduleStore, spec: ScheduleSpec, slot: int, after: int, now: int
) -> str:
    """Write the slot's run (queued), its slot row and the schedule's next slot at once."""
    try:
        workflow = rt.host.definitions.load_file(Path(spec.workflow))
    except OSError as exc:
        raise PlaitError("E004", f"workflow file '{spec.workflow}' cannot be read: {exc}") from exc
    outcome: list[str] = []

    def write(info: RunInfo, manifest: dict[str, Any]) -> None:
        skip = spec.overlap == "skip"
        outcome.append(
            store.fire_slot(
                spec.name, slot, after, overlap_skip=skip, info=info, manifest=manifest, now_ms=now
            )
        )

    run_id = slot_run_id(spec.name, slot)
    made = {"schedule": {"name": spec.name, "slot_ms": slot}}
    await create_run(
        rt.host, definition_of(workflow), spec.input, run_id, None, "queued",
        write=write, now=slot, extra=made,
    )  # fmt: skip
    if outcome[0] == FIRED:
        rt.store.notify_runnable(run_id)
    return outcome[0]
