"""The read side's fast paths (issue #22, verify): the same values and errors, less work."""

from __future__ import annotations

import json

import pytest

from plait.core import canonical
from plait.core.canonical import CanonicalJSONError, loads
from plait.core.outcomes import NO_USAGE, Usage, outcome_from_json

REFUSED = [
    ('{"a":1}x', "Extra data"),
    ("", "Expecting value"),
    ("[1,", "Expecting value"),
    ("NaN", "NaN is not valid JSON"),
    ("1e999", "out of range"),
    ("\ufeff1", "byte order mark"),
    ("1" * 5000, "digits"),
    ("[" * 100_000, "nested too deeply"),
]


def test_loads_scans_writer_text_without_decode(monkeypatch: pytest.MonkeyPatch) -> None:
    """Text with nothing around its value (every journal row) is scanned, not decoded;
    any other text reads, or is refused, through ``decode`` as before."""
    decoded: list[str] = []
    decode = canonical._decoder.decode

    def counting(text: str) -> object:
        decoded.append(text)
        return decode(text)

    monkeypatch.setattr(canonical._decoder, "decode", counting)
    text = '{"Completed":{"result":{"i":1},"usage":{"input_tokens":0}}}'
    assert loads(text) == json.loads(text)
    assert loads("[1,2.5,null]") == [1, 2.5, None]
    assert decoded == []
    for spaced, value in [(' {"a":1}', {"a": 1}), ('{"a":1}\n', {"a": 1}), (" 7 ", 7)]:
        assert loads(spaced) == value
    assert decoded == [' {"a":1}', '{"a":1}\n', " 7 "]
    assert loads('{"a":1,"a":2}') == {"a": 2}  # the last wins, as json reads it
    for bad, message in REFUSED:
        with pytest.raises(CanonicalJSONError, match=message):
            loads(bad)


def test_zero_usage_reads_as_the_shared_value() -> None:
    """A tool's journaled usage (all zeros) is NO_USAGE itself, not a decoded copy."""
    zero = {"input_tokens": 0, "output_tokens": 0, "usd_micros": 0}
    assert Usage.from_json(zero) is NO_USAGE
    outcome = outcome_from_json({"Completed": {"result": {"i": 1}, "usage": zero}})
    assert outcome.usage is NO_USAGE
    assert Usage.from_json({"input_tokens": 3, "output_tokens": 0, "usd_micros": 0}) == Usage(3)
