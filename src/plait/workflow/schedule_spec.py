"""What a schedule is, how it is checked, and which of its slots are due (docs/operating.md).

A schedule starts runs of one workflow file at *slots*: the times its ``cron`` expression
(in its ``timezone``) or its ``every`` interval (multiples of the interval since the Unix
epoch, so every process agrees on them) name. The same checks serve ``plait schedule
add`` and a file's ``schedules:`` list, each problem naming its field (PLAIT-E019).

Which slots a worker fires is ``plan_firing``'s rule, the one place catch-up lives:
a slot is *on time* while it is less than ``grace_ms`` old (its period, capped at one
minute), and only the latest due slot can be; the others are *missed* (the store was
unreachable, or no worker ran). ``catch_up: one`` fires the most recent missed slot,
``none`` fires none of them; an on-time slot always fires. With ``overlap: skip`` a
missed slot is caught up only when no slot is on time (the two runs would overlap).

This module reads no clock and touches no store: times come in as arguments.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterBadCronError, croniter

from plait.core.errors import PlaitError

OVERLAP = ("skip", "allow")
CATCH_UP = ("none", "one")
MAX_GRACE_MS = 60_000
"""A slot found later than this (or than its period, when shorter) is missed."""
MAX_EVERY_MS = 366 * 86_400_000
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
_UNITS_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000}
_DURATION = re.compile(r"^\s*(-?\d+)\s*(ms|s|m|h|d|w)\s*$")
FILE_KEYS = ("name", "cron", "every", "input", "timezone", "overlap", "catch_up")
"""The keys of one entry of a workflow file's ``schedules:`` list."""


@dataclass(frozen=True)
class ScheduleSpec:
    """One schedule: which file, when (``cron`` xor ``every_ms``), with what input, and
    its policies. ``origin`` is ``cli`` (``schedule add``) or ``file`` (``schedule sync``)."""

    name: str
    workflow: str
    cron: str | None = None
    every_ms: int | None = None
    input: Any = None
    timezone: str = "UTC"
    overlap: str = "skip"
    catch_up: str = "one"
    origin: str = "cli"

    def to_json(self) -> dict[str, Any]:
        timing: dict[str, Any] = (
            {"cron": self.cron} if self.cron is not None else {"every_ms": self.every_ms}
        )
        return {
            "name": self.name,
            "workflow": self.workflow,
            **timing,
            "input": self.input,
            "timezone": self.timezone,
            "overlap": self.overlap,
            "catch_up": self.catch_up,
            "origin": self.origin,
        }

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> ScheduleSpec:
        return ScheduleSpec(
            name=data["name"],
            workflow=data["workflow"],
            cron=data.get("cron"),
            every_ms=data.get("every_ms"),
            input=data.get("input"),
            timezone=data.get("timezone", "UTC"),
            overlap=data.get("overlap", "skip"),
            catch_up=data.get("catch_up", "one"),
            origin=data.get("origin", "cli"),
        )

    def timing(self) -> tuple[str | None, int | None, str]:
        """What decides the slots (a change of it moves the next slot)."""
        return (self.cron, self.every_ms, self.timezone)


# --- checking -----------------------------------------------------------------------


def duration_ms(text: Any, field: str) -> int:
    """``every``: ``90s``, ``15m``, ``1h``, ``500ms`` -> milliseconds; PLAIT-E019 naming
    ``field`` for anything else, a zero or negative duration, or more than a year."""
    match = _DURATION.match(text) if isinstance(text, str) else None
    if match is None:
        raise PlaitError(
            "E019",
            f"{field} {text!r}: expected a number and a unit (ms, s, m, h, d, w), like 30s or 1h",
        )
    ms = int(match.group(1)) * _UNITS_MS[match.group(2)]
    if ms <= 0:
        raise PlaitError("E019", f"{field} {text!r}: must be a positive duration")
    if ms > MAX_EVERY_MS:
        raise PlaitError("E019", f"{field} {text!r}: at most 366d")
    return ms


def check_cron(expr: Any, field: str = "cron") -> str:
    """A cron expression croniter accepts (5 fields, or 6 with seconds); PLAIT-E019."""
    if not isinstance(expr, str) or not expr.strip():
        raise PlaitError("E019", f"{field} {expr!r}: expected a cron expression like '0 9 * * 1-5'")
    try:
        croniter(expr, datetime(2000, 1, 1, tzinfo=UTC)).get_next(float)
    except (CroniterBadCronError, ValueError, KeyError) as exc:
        raise PlaitError("E019", f"{field} {expr!r}: not a valid cron expression ({exc})") from None
    return expr


def check_timezone(name: Any, field: str = "timezone") -> str:
    """An IANA time zone name (``Europe/Paris``, ``UTC``); PLAIT-E019."""
    if not isinstance(name, str) or not name.strip():
        raise PlaitError("E019", f"{field} {name!r}: expected a time zone like 'Europe/Paris'")
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise PlaitError("E019", f"{field} {name!r}: unknown time zone") from None
    return name


def check_name(name: Any, field: str = "name") -> str:
    if not isinstance(name, str) or not NAME.match(name):
        raise PlaitError(
            "E019",
            f"{field} {name!r}: a schedule name is 1-128 letters, digits, '_', '-' or '.',"
            " starting with a letter or digit",
        )
    return name


def _one_of(value: Any, choices: tuple[str, ...], field: str) -> str:
    if value not in choices:
        wanted = " or ".join(f"'{c}'" for c in choices)
        raise PlaitError("E019", f"{field} {value!r}: expected {wanted}")
    return str(value)


def make_spec(
    name: Any,
    workflow: str,
    *,
    cron: Any = None,
    every: Any = None,
    input: Any = None,
    timezone: Any = None,
    overlap: Any = None,
    catch_up: Any = None,
    origin: str = "cli",
    label: Callable[[str], str] = str,
) -> ScheduleSpec:
    """A checked spec; the first problem is PLAIT-E019 naming its field as ``label``
    spells it (``--catch-up`` on the command line, ``schedules[0]: cron`` in a file)."""
    check_name(name, label("name"))
    if (cron is None) == (every is None):
        raise PlaitError(
            "E019", f"schedule '{name}': give exactly one of {label('cron')} or {label('every')}"
        )
    return ScheduleSpec(
        name=name,
        workflow=workflow,
        cron=None if cron is None else check_cron(cron, label("cron")),
        every_ms=None if every is None else duration_ms(every, label("every")),
        input=input,
        timezone=check_timezone("UTC" if timezone is None else timezone, label("timezone")),
        overlap=_one_of("skip" if overlap is None else overlap, OVERLAP, label("overlap")),
        catch_up=_one_of("one" if catch_up is None else catch_up, CATCH_UP, label("catch_up")),
        origin=origin,
    )


def option_label(field: str) -> str:
    """A field as ``plait schedule add`` spells it: ``NAME``, ``--catch-up``."""
    return "NAME" if field == "name" else "--" + field.replace("_", "-")


def file_schedule_problems(entries: Any) -> list[tuple[tuple[Any, ...], str]]:
    """Problems of a file's ``schedules:`` list: (place under ``schedules``, message)."""
    if not isinstance(entries, list | tuple):
        return [((), f"schedules must be a list, got {type(entries).__name__}")]
    problems: list[tuple[tuple[Any, ...], str]] = []
    seen: set[str] = set()
    for i, entry in enumerate(entries):
        if not isinstance(entry, Mapping):
            problems.append(((i,), f"schedules[{i}]: must be a mapping"))
            continue
        unknown = [key for key in entry if key not in FILE_KEYS]
        for key in unknown:
            problems.append(((i, key), f"schedules[{i}]: unknown key '{key}'"))
        try:
            file_spec(entry, "", i)
        except PlaitError as exc:
            field = next((k for k in FILE_KEYS if f": {k} " in exc.detail), None)
            problems.append(((i,) if field is None else (i, field), exc.detail))
        name = entry.get("name")
        if isinstance(name, str):
            if name in seen:
                problems.append(((i, "name"), f"schedules[{i}]: name '{name}' is used twice"))
            seen.add(name)
    return problems


def file_spec(entry: Mapping[str, Any], workflow: str, index: int) -> ScheduleSpec:
    """One entry of a file's ``schedules:`` list as a checked spec."""
    return make_spec(
        entry.get("name"),
        workflow,
        cron=entry.get("cron"),
        every=entry.get("every"),
        input=entry.get("input"),
        timezone=entry.get("timezone"),
        overlap=entry.get("overlap"),
        catch_up=entry.get("catch_up"),
        origin="file",
        label=lambda field: f"schedules[{index}]: {field}",
    )


# --- slots ----------------------------------------------------------------------------


def _cron_at(spec: ScheduleSpec, ms: int) -> croniter:
    start = datetime.fromtimestamp(ms / 1000, ZoneInfo(spec.timezone))
    return croniter(spec.cron or "", start)


def next_slot(spec: ScheduleSpec, after_ms: int) -> int:
    """The first slot strictly after ``after_ms``."""
    if spec.every_ms is not None:
        return (after_ms // spec.every_ms + 1) * spec.every_ms
    slot = round(_cron_at(spec, after_ms).get_next(float) * 1000)
    while slot <= after_ms:  # croniter works in whole seconds
        slot = round(_cron_at(spec, slot).get_next(float) * 1000)
    return slot


def latest_slot(spec: ScheduleSpec, at_ms: int) -> int:
    """The last slot at or before ``at_ms``."""
    if spec.every_ms is not None:
        return at_ms // spec.every_ms * spec.every_ms
    slot = round(_cron_at(spec, at_ms + 1000).get_prev(float) * 1000)
    while slot > at_ms:
        slot = round(_cron_at(spec, slot).get_prev(float) * 1000)
    return slot


def grace_ms(spec: ScheduleSpec, slot_ms: int) -> int:
    """How late a slot may be found and still be on time: its period, at most a minute."""
    return min(next_slot(spec, slot_ms) - slot_ms, MAX_GRACE_MS)


@dataclass(frozen=True)
class Firing:
    """What one look at a schedule decides: the slots to start runs for (oldest first),
    how many due slots it passes over, and the schedule's next slot afterwards."""

    fire: tuple[int, ...]
    skipped: int
    next_ms: int


def plan_firing(spec: ScheduleSpec, cursor_ms: int, now_ms: int) -> Firing:
    """The slots from ``cursor_ms`` (the schedule's next slot) up to ``now_ms``, decided
    by the catch-up rule in the module docstring."""
    if cursor_ms > now_ms:
        return Firing((), 0, cursor_ms)
    latest = latest_slot(spec, now_ms)
    after = next_slot(spec, latest)
    if latest < cursor_ms:  # the cursor is not a slot of the current timing (edited)
        return Firing((), 0, after)
    fire: list[int] = []
    on_time = now_ms - latest < grace_ms(spec, latest)
    last_missed = latest if not on_time else latest_slot(spec, latest - 1)
    # With overlap: skip, an on-time run makes a catch-up run pointless: the two would
    # overlap, and the on-time one is the newer.
    catching_up = spec.catch_up == "one" and not (on_time and spec.overlap == "skip")
    if last_missed >= cursor_ms and catching_up:
        fire.append(last_missed)
    if on_time:
        fire.append(latest)
    due = _count_due(spec, cursor_ms, latest)
    return Firing(tuple(fire), due - len(fire), after)


def _count_due(spec: ScheduleSpec, cursor_ms: int, latest_ms: int) -> int:
    """Slots in [cursor, latest] (exact for ``every``; counted up to 1000 for cron)."""
    if spec.every_ms is not None:
        first = -(-cursor_ms // spec.every_ms) * spec.every_ms
        return 0 if first > latest_ms else (latest_ms - first) // spec.every_ms + 1
    count, slot = 0, latest_ms
    while slot >= cursor_ms and count < 1000:
        count += 1
        slot = latest_slot(spec, slot - 1)
    return count


def slot_run_id(name: str, slot_ms: int) -> str:
    """The run id of a slot's run: the schedule's name and the slot in UTC (readable, and
    the same in every worker)."""
    moment = datetime.fromtimestamp(slot_ms / 1000, UTC)
    text = moment.strftime("%Y-%m-%dT%H:%M:%S")
    if slot_ms % 1000:
        text += f".{slot_ms % 1000:03d}"
    return f"{name}@{text}Z"
