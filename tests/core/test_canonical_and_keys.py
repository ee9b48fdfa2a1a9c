"""Canonical JSON (§3.1) and journal-key identities (§3.4)."""

from __future__ import annotations

import hashlib
import math

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from plait.core.canonical import CanonicalJSONError, dumps, loads, strict_equal
from plait.core.keys import JournalKey, call_id, child_run_id, idempotency_key

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: st.lists(children) | st.dictionaries(st.text(), children),
    max_leaves=30,
)


@given(json_values)
def test_canonical_json_round_trips_byte_identically(value):
    text = dumps(value)
    assert dumps(loads(text)) == text
    assert strict_equal(loads(text), value) or value != value


def test_keys_are_sorted_and_separators_compact_and_unicode_kept():
    assert dumps({"b": 1, "a": [1.0, "é"]}) == '{"a":[1.0,"é"],"b":1}'


def test_ints_and_floats_stay_distinct():
    assert dumps(1) != dumps(1.0)
    assert type(loads("1")) is int and type(loads("1.0")) is float
    assert not strict_equal(1, 1.0)
    assert not strict_equal(True, 1)
    assert not strict_equal("1", 1)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, {"x": [math.nan]}])
def test_nan_and_infinity_are_refused_when_writing(bad):
    with pytest.raises(CanonicalJSONError):
        dumps(bad)


def test_circular_and_too_deeply_nested_values_are_refused_when_writing():
    circular: list[object] = []
    circular.append(circular)
    deep: list[object] = []
    for _ in range(100_000):
        deep = [deep]
    for bad in (circular, deep, {"x": object()}):
        with pytest.raises(CanonicalJSONError):
            dumps(bad)


@pytest.mark.parametrize("text", ["NaN", "[Infinity]", '{"a": -Infinity}'])
def test_nan_and_infinity_are_refused_when_reading(text):
    with pytest.raises(CanonicalJSONError):
        loads(text)


BASE = JournalKey("run", "", "node", 1, 0, "tool")
VARIANTS = [
    BASE._replace(run_id="run2"),
    BASE._replace(task_path="/000000"),
    BASE._replace(node="node2"),
    BASE._replace(attempt=2),
    BASE._replace(effect_seq=1),
    BASE._replace(kind="llm"),
    BASE._replace(kind="decide"),
]


def test_call_id_changes_with_every_key_field():
    ids = {call_id(k) for k in [BASE, *VARIANTS]}
    assert len(ids) == len(VARIANTS) + 1


def test_call_id_separators_are_unambiguous():
    a = JournalKey("a", "b/c", "n", 1, 0, "tool")
    b = JournalKey("a/b", "c", "n", 1, 0, "tool")
    c = JournalKey("ab", "", "n", 1, 0, "tool")
    d = JournalKey("a", "b", "n", 1, 0, "tool")
    assert len({call_id(k) for k in (a, b, c, d)}) == 4
    # A field holding the separator (or the escape byte) cannot end early.
    e = JournalKey("a\x1f", "b", "n", 1, 0, "tool")
    f = JournalKey("a", "\x1fb", "n", 1, 0, "tool")
    g = JournalKey("a\x1e", "\x1fb", "n", 1, 0, "tool")
    h = JournalKey("a\x1e\x1f", "b", "n", 1, 0, "tool")
    assert len({call_id(k) for k in (e, f, g, h)}) == 4
    # Fixed-width integers: attempt 1 / seq 10 never meets attempt 11 / seq 0.
    assert call_id(BASE._replace(attempt=1, effect_seq=10)) != call_id(
        BASE._replace(attempt=11, effect_seq=0)
    )


@given(
    st.tuples(
        st.text(), st.text(), st.text(), st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1)
    ),
    st.tuples(
        st.text(), st.text(), st.text(), st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1)
    ),
)
@example(("a\x1f", "b", "n", 0, 0), ("a", "\x1fb", "n", 0, 0))
def test_distinct_keys_have_distinct_call_ids(a, b):
    ka, kb = JournalKey(*a, "tool"), JournalKey(*b, "tool")
    assert (call_id(ka) == call_id(kb)) == (ka == kb)


def test_idempotency_key_depends_on_key_and_canonical_input():
    k1 = idempotency_key(BASE, {"a": 1, "b": 2})
    assert k1 == idempotency_key(BASE, {"b": 2, "a": 1})
    assert k1 != idempotency_key(BASE, {"a": 1, "b": 2.0})
    assert k1 != idempotency_key(BASE._replace(attempt=2), {"a": 1, "b": 2})


def test_keys_order_field_by_field_with_kinds_in_declared_order():
    keys = [BASE._replace(kind="decide"), BASE._replace(kind="llm"), BASE]
    assert [k.kind for k in sorted(keys, key=JournalKey.sort_key)] == ["tool", "llm", "decide"]


def test_child_run_id_uses_sixteen_hex_of_the_call_id():
    child = child_run_id("parent", BASE)
    assert child == "parent~" + call_id(BASE)[:16]


def test_key_round_trips_through_json():
    assert JournalKey.from_json(BASE.to_json()) == BASE


def test_call_ids_of_plain_keys_are_what_they_always_were():
    # Escaping touches only fields holding \x1e or \x1f: journaled ids stay valid.
    key = JournalKey("run-1", "", "fetch", 1, 0, "tool")
    expected = hashlib.sha256(
        b"plait:call:v1\x1frun-1\x1f\x1ffetch\x1f\x00\x00\x00\x01\x1f\x00\x00\x00\x00\x1ftool"
    ).hexdigest()
    assert call_id(key) == expected
