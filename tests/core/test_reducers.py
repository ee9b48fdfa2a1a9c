"""Context reducers (docs/architecture.md §3.7): semantics, type errors, batching invariance."""

from __future__ import annotations

import copy
from fractions import Fraction
from functools import reduce
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from plait.core.canonical import strict_equal
from plait.core.reducers import (
    MISSING,
    REDUCERS,
    ReducerError,
    make_reducer,
    reduce_value,
)


def fold(reducer: str, old: Any, values: list[Any], key: str = "k") -> Any:
    """Apply writes one by one, as the runtime does."""
    return reduce(lambda acc, value: reduce_value(reducer, key, acc, value), values, old)


def batch_then_apply(reducer: str, old: Any, values: list[Any]) -> Any:
    """Pre-reduce the batch from MISSING, then apply the result once."""
    return reduce_value(reducer, "k", old, fold(reducer, MISSING, values))


# --- semantics ------------------------------------------------------------------------------


def test_the_reducer_names_are_fixed() -> None:
    assert REDUCERS == ("lww", "append", "extend", "sum", "max", "min", "merge")


def test_lww_replaces_the_old_value() -> None:
    assert reduce_value("lww", "k", 1, "x") == "x"
    assert reduce_value("lww", "k", MISSING, None) is None
    assert reduce_value("lww", "k", [1], [2]) == [2]


def test_append_adds_a_non_list_value_as_one_element() -> None:
    assert reduce_value("append", "k", MISSING, 1) == [1]
    assert reduce_value("append", "k", [1], {"a": 1}) == [1, {"a": 1}]
    assert reduce_value("append", "k", [1], None) == [1, None]


def test_append_concatenates_a_list_value() -> None:
    assert reduce_value("append", "k", [1], [2, 3]) == [1, 2, 3]
    assert reduce_value("append", "k", MISSING, []) == []
    assert reduce_value("append", "k", [1], [[2]]) == [1, [2]]


def test_extend_concatenates_lists() -> None:
    assert reduce_value("extend", "k", MISSING, [1]) == [1]
    assert reduce_value("extend", "k", [1], [2, [3]]) == [1, 2, [3]]


def test_sum_keeps_ints_int_and_mixing_with_a_float_gives_a_float() -> None:
    assert strict_equal(reduce_value("sum", "k", 1, 2), 3)
    assert strict_equal(reduce_value("sum", "k", 1, 2.0), 3.0)
    assert strict_equal(reduce_value("sum", "k", 1.5, 2), 3.5)
    assert strict_equal(reduce_value("sum", "k", MISSING, 7), 7)
    assert strict_equal(reduce_value("sum", "k", MISSING, 7.0), 7.0)


def test_max_and_min_pick_by_value_and_keep_the_existing_value_on_a_tie() -> None:
    assert reduce_value("max", "k", 1, 2) == 2
    assert reduce_value("max", "k", MISSING, -5) == -5
    assert strict_equal(reduce_value("max", "k", 1, 1.0), 1)
    assert strict_equal(reduce_value("max", "k", 1, 1.5), 1.5)
    assert reduce_value("min", "k", 1, 2) == 1
    assert strict_equal(reduce_value("min", "k", 2.0, 2), 2.0)
    assert strict_equal(reduce_value("min", "k", MISSING, 0.5), 0.5)


def test_merge_is_a_shallow_object_merge_where_new_keys_win() -> None:
    old = {"a": 1, "b": {"x": 1}}
    assert reduce_value("merge", "k", old, {"b": {"y": 2}, "c": 3}) == {
        "a": 1,
        "b": {"y": 2},
        "c": 3,
    }
    assert reduce_value("merge", "k", MISSING, {"a": 1}) == {"a": 1}


# --- type errors ----------------------------------------------------------------------------


def test_a_type_error_names_the_reducer_the_key_and_the_problem() -> None:
    with pytest.raises(ReducerError) as err:
        reduce_value("sum", "total", 1, "2")
    assert str(err.value) == "reducer 'sum' on key 'total': expected a number, got string"
    assert (err.value.reducer, err.value.key) == ("sum", "total")
    assert isinstance(err.value, ValueError)


@pytest.mark.parametrize(
    ("reducer", "old", "new", "fragment"),
    [
        ("sum", 1, True, "expected a number, got boolean"),
        ("sum", True, 1, "existing value to be a number, got boolean"),
        ("sum", MISSING, None, "got null"),
        ("sum", MISSING, float("nan"), "finite"),
        ("sum", 1, float("inf"), "finite"),
        ("sum", 1e308, 1e308, "overflows"),
        ("max", MISSING, "3", "got string"),
        ("max", [1], 3, "got list"),
        ("min", 1, False, "got boolean"),
        ("min", {}, 1, "got object"),
        ("extend", MISSING, 1, "expected a list, got integer"),
        ("extend", MISSING, {"a": 1}, "expected a list, got object"),
        ("extend", "abc", [1], "existing value must be a list, got string"),
        ("append", 1.5, [1], "existing value must be a list, got float"),
        ("merge", MISSING, [1], "expected an object, got list"),
        ("merge", [1], {"a": 1}, "existing value must be an object, got list"),
    ],
)
def test_values_of_the_wrong_type_are_refused(
    reducer: str, old: Any, new: Any, fragment: str
) -> None:
    with pytest.raises(ReducerError) as err:
        reduce_value(reducer, "key", old, new)
    assert f"reducer '{reducer}' on key 'key'" in str(err.value)
    assert fragment in str(err.value)


def test_an_unknown_reducer_name_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="unknown reducer 'concat'"):
        reduce_value("concat", "k", MISSING, 1)


# --- make_reducer ---------------------------------------------------------------------------


def test_make_reducer_uses_the_declared_reducer_per_key_and_lww_otherwise() -> None:
    table = {"log": "append", "total": "sum"}
    reducer = make_reducer(table)
    table["total"] = "lww"  # the table is copied: later edits do not leak in
    assert reducer("log", ["a"], "b") == ["a", "b"]
    assert reducer("total", 1, 2) == 3
    assert reducer("other", 1, 2) == 2
    assert reducer("other", MISSING, [1]) == [1]


def test_make_reducer_rejects_unknown_names_up_front_naming_each_key() -> None:
    with pytest.raises(ValueError) as err:
        make_reducer({"b": "concat", "a": "sum", "c": None})  # type: ignore[dict-item]
    message = str(err.value)
    assert not isinstance(err.value, ReducerError)
    assert "unknown reducer 'concat' for key 'b'" in message
    assert "unknown reducer None for key 'c'" in message
    assert message.index("'b'") < message.index("'c'")
    assert "known reducers: lww, append" in message


def test_make_reducer_type_errors_name_the_key() -> None:
    with pytest.raises(ReducerError, match="reducer 'extend' on key 'items'"):
        make_reducer({"items": "extend"})("items", [], "x")


# --- no mutation ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reducer", "old", "new"),
    [
        ("append", [1, [2]], [3, {"a": 1}]),
        ("append", [1], {"a": [1]}),
        ("extend", [1, [2]], [3, [4]]),
        ("merge", {"a": [1], "b": 2}, {"b": {"c": 3}}),
        ("lww", {"a": 1}, {"b": [2]}),
        ("sum", 1, 2),
        ("max", 1, 2.5),
    ],
)
def test_reducers_never_mutate_their_inputs(reducer: str, old: Any, new: Any) -> None:
    old_copy, new_copy = copy.deepcopy(old), copy.deepcopy(new)
    result = reduce_value(reducer, "k", old, new)
    assert old == old_copy and new == new_copy
    if reducer in ("append", "extend", "merge"):
        assert result is not old and result is not new


@pytest.mark.parametrize("reducer", ["append", "extend", "merge"])
def test_results_from_missing_do_not_alias_the_new_value(reducer: str) -> None:
    new: Any = {"a": 1} if reducer == "merge" else [1]
    result = reduce_value(reducer, "k", MISSING, new)
    result.clear()
    assert new in ({"a": 1}, [1])


# --- batching invariance --------------------------------------------------------------------

scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=3)
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=2), inner),
    max_leaves=8,
)
lists = st.lists(json_values, max_size=4)
objects = st.dictionaries(st.sampled_from("abcde"), json_values, max_size=4)
# Multiples of 1/4 well inside float precision: every partial sum is exact.
dyadic = st.integers(-(2**40), 2**40).map(lambda n: n / 4)
numbers = st.integers() | st.floats(allow_nan=False, allow_infinity=False, width=32)
batch = st.lists


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


@given(st.just(MISSING) | json_values, batch(json_values, min_size=1))
def test_lww_batch_is_the_last_value(old: Any, values: list[Any]) -> None:
    assert fold("lww", old, values) == values[-1]
    assert fold("lww", old, values) == batch_then_apply("lww", old, values)


@given(st.just(MISSING) | lists, batch(json_values, min_size=1))
def test_append_batch_is_the_concatenation_of_each_value_as_a_list(
    old: Any, values: list[Any]
) -> None:
    start = [] if old is MISSING else old
    expected = start + [item for value in values for item in _as_list(value)]
    assert fold("append", old, values) == expected
    assert batch_then_apply("append", old, values) == expected


@given(st.just(MISSING) | lists, batch(lists, min_size=1))
def test_extend_batch_is_the_concatenation_of_all_lists(old: Any, values: list[Any]) -> None:
    start = [] if old is MISSING else old
    expected = start + [item for value in values for item in value]
    assert fold("extend", old, values) == expected
    assert batch_then_apply("extend", old, values) == expected


@given(st.just(MISSING) | st.integers(), batch(st.integers(), min_size=1))
def test_sum_of_ints_is_the_exact_int_total(old: Any, values: list[int]) -> None:
    expected = sum(values) + (0 if old is MISSING else old)
    assert strict_equal(fold("sum", old, values), expected)
    assert strict_equal(batch_then_apply("sum", old, values), expected)


@given(
    st.just(MISSING) | st.integers(-(2**40), 2**40) | dyadic,
    batch(st.integers(-(2**40), 2**40) | dyadic, min_size=1),
)
def test_sum_with_a_float_is_a_float_and_batches_exactly(old: Any, values: list[Any]) -> None:
    everything = values if old is MISSING else [old, *values]
    result = fold("sum", old, values)
    assert isinstance(result, float) is any(isinstance(v, float) for v in everything)
    assert Fraction(result) == sum(Fraction(v) for v in everything)
    assert strict_equal(result, batch_then_apply("sum", old, values))


@pytest.mark.parametrize(("reducer", "pick"), [("max", max), ("min", min)])
@given(old=st.just(MISSING) | numbers, values=batch(numbers, min_size=1))
def test_max_and_min_batch_is_the_first_extreme_value(
    reducer: str, pick: Any, old: Any, values: list[Any]
) -> None:
    everything = values if old is MISSING else [old, *values]
    expected = pick(everything)  # Python's max/min return the first extreme on ties
    assert strict_equal(fold(reducer, old, values), expected)
    assert type(fold(reducer, old, values)) is type(expected)
    assert strict_equal(batch_then_apply(reducer, old, values), expected)


@given(st.just(MISSING) | objects, batch(objects, min_size=1))
def test_merge_batch_is_a_left_to_right_update(old: Any, values: list[Any]) -> None:
    expected: dict[str, Any] = {} if old is MISSING else dict(old)
    for value in values:
        expected.update(value)
    assert fold("merge", old, values) == expected
    assert batch_then_apply("merge", old, values) == expected


@given(st.sampled_from(REDUCERS), json_values, json_values)
def test_reduce_value_either_combines_or_raises_a_reducer_error(
    reducer: str, old: Any, new: Any
) -> None:
    old_copy, new_copy = copy.deepcopy(old), copy.deepcopy(new)
    try:
        reduce_value(reducer, "k", old, new)
    except ReducerError as err:
        assert f"reducer '{reducer}' on key 'k'" in str(err)
    assert strict_equal(old, old_copy) and strict_equal(new, new_copy)
