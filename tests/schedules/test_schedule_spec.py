"""Slots and the catch-up rule, as pure functions of a spec, a cursor and a time."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from plait import PlaitError
from plait.workflow.schedule_spec import (
    grace_ms,
    latest_slot,
    make_spec,
    next_slot,
    plan_firing,
    slot_run_id,
)

PARIS = ZoneInfo("Europe/Paris")


def ms(*args: int, tz: ZoneInfo = PARIS) -> int:
    return int(datetime(*args, tzinfo=tz).timestamp() * 1000)  # type: ignore[misc]


def test_cron_slots_follow_the_time_zone_across_a_daylight_saving_change() -> None:
    spec = make_spec("s", "/w", cron="0 9 * * *", timezone="Europe/Paris")
    before = ms(2026, 3, 28, 12)
    assert next_slot(spec, before) == ms(2026, 3, 29, 9)  # the first day of summer time
    assert next_slot(spec, ms(2026, 3, 29, 9)) - ms(2026, 3, 29, 9) == 24 * 3_600_000
    assert latest_slot(spec, ms(2026, 3, 29, 9)) == ms(2026, 3, 29, 9)
    assert latest_slot(spec, ms(2026, 3, 29, 8, 59)) == ms(2026, 3, 28, 9)


def test_every_slots_are_multiples_of_the_interval_so_every_process_agrees() -> None:
    spec = make_spec("s", "/w", every="15m")
    assert next_slot(spec, 1_000) == 900_000
    assert next_slot(spec, 900_000) == 1_800_000
    assert latest_slot(spec, 1_799_999) == 900_000
    assert grace_ms(spec, 900_000) == 60_000  # a minute at most
    assert grace_ms(make_spec("s", "/w", every="1s"), 1000) == 1000  # else its period


def test_nothing_is_due_before_the_cursor() -> None:
    spec = make_spec("s", "/w", every="1s")
    firing = plan_firing(spec, 5000, 4999)
    assert (firing.fire, firing.skipped, firing.next_ms) == ((), 0, 5000)


@pytest.mark.parametrize(
    ("catch_up", "overlap", "fire", "skipped"),
    [
        ("none", "allow", (9000,), 4),
        ("one", "allow", (8000, 9000), 3),
        ("one", "skip", (9000,), 4),  # the on-time run stands for the missed ones
    ],
)
def test_the_latest_slot_is_on_time_and_the_older_ones_missed(
    catch_up: str, overlap: str, fire: tuple[int, ...], skipped: int
) -> None:
    spec = make_spec("s", "/w", every="1s", catch_up=catch_up, overlap=overlap)
    firing = plan_firing(spec, 5000, 9400)  # slots 5..9 due, 9 found 400 ms late
    assert (firing.fire, firing.skipped, firing.next_ms) == (fire, skipped, 10_000)


@pytest.mark.parametrize(("catch_up", "fire"), [("none", ()), ("one", (9000,))])
def test_a_latest_slot_past_its_grace_is_missed_too(catch_up: str, fire: tuple[int, ...]) -> None:
    spec = make_spec("s", "/w", every="1s", catch_up=catch_up)
    firing = plan_firing(spec, 9000, 9999)
    assert firing.fire == (9000,)  # 999 ms late: on time
    late = plan_firing(make_spec("s", "/w", every="10m", catch_up=catch_up), 600_000, 661_000)
    assert late.fire == tuple(600_000 for _ in fire)  # 61 s late: past the minute
    assert late.next_ms == 1_200_000


def test_a_slots_run_id_names_the_schedule_and_the_slot_in_utc() -> None:
    assert slot_run_id("nightly", ms(2026, 12, 4, 3, tz=ZoneInfo("UTC"))) == (
        "nightly@2026-12-04T03:00:00Z"
    )
    assert slot_run_id("fast", 1_500) == "fast@1970-01-01T00:00:01.500Z"


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"cron": "0 25 * * *"}, "cron '0 25 * * *': not a valid cron expression"),
        ({"every": "-1m"}, "every '-1m': must be a positive duration"),
        ({"every": "400d"}, "every '400d': at most 366d"),
        ({"every": "1m", "timezone": "UTC+2"}, "timezone 'UTC+2': unknown time zone"),
    ],
)
def test_bad_specs_are_e019_naming_the_field(given: dict[str, str], message: str) -> None:
    with pytest.raises(PlaitError) as refused:
        make_spec("s", "/w", **given)
    assert refused.value.code == "E019"
    assert refused.value.detail.startswith(message)
