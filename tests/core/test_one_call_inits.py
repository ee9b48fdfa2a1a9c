"""The commands and events a superstep builds (and ``Completed``, one per effect), and the
journal's records and writes, have hand-written ``__init__``s that fill their
``__dict__`` in one call (issue #22): they must stay the frozen dataclasses they declare."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

from plait.core.events import ClockReading, Dispatch, EffectResolved, WriteCheckpoint, WriteIntent
from plait.core.outcomes import NO_USAGE, Completed
from plait.core.step import StepOutcome
from plait.store.records import (
    CheckpointMeta,
    CheckpointWrite,
    IntentRecord,
    IntentWrite,
    Record,
    RecordWrite,
    ResultRecord,
    ResultWrite,
)

CLASSES = [ClockReading, EffectResolved, WriteIntent, Dispatch, WriteCheckpoint, Completed,
           StepOutcome]  # fmt: skip
JOURNAL = [IntentRecord, ResultRecord, CheckpointMeta, Record, IntentWrite, ResultWrite,
           CheckpointWrite, RecordWrite]  # fmt: skip


@pytest.mark.parametrize("cls", CLASSES + JOURNAL)
def test_each_hand_written_init_sets_exactly_the_declared_fields_and_stays_frozen(
    cls: type,
) -> None:
    """The same parameters, in the order and with the defaults the dataclass declares;
    every field set, nothing else; equal to itself rebuilt; assignment still raises."""
    # written in the class's own module (a generated one's code comes from "<string>")
    assert cls.__init__.__code__.co_filename == inspect.getsourcefile(cls)
    fields = dataclasses.fields(cls)
    names = [f.name for f in fields]
    params = inspect.signature(cls.__init__).parameters
    assert list(params)[1:] == names
    for f in fields:
        assert params[f.name].default == (
            inspect.Parameter.empty if f.default is dataclasses.MISSING else f.default
        ), f.name
    values = {name: index for index, name in enumerate(names)}
    made = cls(**values)
    assert vars(made) == values
    assert cls(*values.values()) == made
    assert dataclasses.replace(made) == made
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(made, names[0], -1)


def test_completed_compares_and_prints_without_its_size_and_text() -> None:
    """What ``field(compare=False, repr=False)`` declares still holds with the own __init__."""
    plain = Completed({"i": 1})
    assert plain.usage is NO_USAGE and plain.size is None and plain.text is None
    assert Completed({"i": 1}, NO_USAGE, 7, '{"i":1}') == plain
    assert repr(plain) == (
        "Completed(result={'i': 1}, usage=Usage(input_tokens=0, output_tokens=0, usd_micros=0))"
    )
