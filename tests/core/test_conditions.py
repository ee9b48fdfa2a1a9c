"""The edge condition language (docs/architecture.md §3.6): grammar, semantics, totality."""

from __future__ import annotations

import dataclasses
import functools
import json
import operator
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from plait.core.conditions import Condition, ConditionError, evaluate, parse_condition


def holds(text: str, context: Any) -> bool:
    return evaluate(parse_condition(text), context)


# --- equality -------------------------------------------------------------------------------

EQUALITY_TABLE = [
    ("1", 1, True),
    ("1", "1", False),
    ('"1"', 1, False),
    ('"1"', "1", True),
    ("1", 1.0, False),
    ("1.0", 1, False),
    ("1.0", 1.0, True),
    ("true", 1, False),
    ("1", True, False),
    ("true", True, True),
    ("false", 0, False),
    ("false", False, True),
    ("0", False, False),
    ("null", None, True),
    ("null", "", False),
    ("null", False, False),
    ('""', None, False),
    ('"é"', "é", True),
    ('"\\u00e9"', "é", True),
    ("1", [1], False),
    ("null", {}, False),
    ("-0.5e3", -500.0, True),
    ("1E2", 100.0, True),
    ("1E2", 100, False),
]


@pytest.mark.parametrize(("literal", "value", "equal"), EQUALITY_TABLE)
def test_equality_is_strict_json_equality_without_coercion(
    literal: str, value: Any, equal: bool
) -> None:
    assert holds(f"a == {literal}", {"a": value}) is equal
    assert holds(f"a != {literal}", {"a": value}) is not equal


def test_integer_and_float_literals_stay_distinct() -> None:
    assert type(parse_condition("a == 1").root.literal) is int  # type: ignore[union-attr]
    assert type(parse_condition("a == 1.0").root.literal) is float  # type: ignore[union-attr]
    assert type(parse_condition("a == -0").root.literal) is int  # type: ignore[union-attr]


def test_missing_path_equals_nothing() -> None:
    assert holds("a == null", {}) is False
    assert holds("a == 1", {}) is False
    assert holds("a != 1", {}) is True
    assert holds("a != null", {}) is True


def test_operators_inside_string_literals_survive() -> None:
    assert holds('x != "a == b"', {"x": "a == b"}) is False
    assert holds('x == "a and b or (c) !"', {"x": "a and b or (c) !"}) is True
    assert holds('x == "say \\"hi\\"\\n"', {"x": 'say "hi"\n'}) is True


# --- truthiness and exists ------------------------------------------------------------------

FALSY: list[Any] = [False, None, "", 0, 0.0, -0.0, [], {}]
TRUTHY: list[Any] = [True, 1, -1, 0.5, "0", "false", " ", [0], [None], {"a": None}]


@pytest.mark.parametrize("value", FALSY, ids=repr)
def test_falsy_values_are_false_and_their_negation_true(value: Any) -> None:
    assert holds("a", {"a": value}) is False
    assert holds("!a", {"a": value}) is True
    assert holds("not a", {"a": value}) is True


@pytest.mark.parametrize("value", TRUTHY, ids=repr)
def test_other_values_are_truthy(value: Any) -> None:
    assert holds("a", {"a": value}) is True
    assert holds("!a", {"a": value}) is False


def test_a_missing_path_is_falsy() -> None:
    assert holds("a", {}) is False
    assert holds("!a", {}) is True


def test_exists_is_true_for_a_present_null_and_false_for_a_missing_key() -> None:
    assert holds("a exists", {"a": None}) is True
    assert holds("a exists", {"a": False}) is True
    assert holds("a exists", {}) is False
    assert holds("!(a exists)", {}) is True


# --- paths ----------------------------------------------------------------------------------


def test_dotted_paths_traverse_nested_objects() -> None:
    context = {"a": {"b": {"c": 1}}, "x-y": {"1": {"_z": True}}}
    assert holds("a.b.c == 1", context)
    assert holds("a.b exists", context)
    assert holds("x-y.1._z", context)
    assert not holds("a.b.d exists", context)


@pytest.mark.parametrize(
    "context",
    [{"a": [{"b": 1}]}, {"a": "b"}, {"a": 1}, {"a": None}, {"a": True}, [], None, 5, "a"],
    ids=repr,
)
def test_a_path_through_a_non_object_is_missing(context: Any) -> None:
    assert holds("a.b exists", context) is False
    assert holds("a.0.b exists", context) is False
    assert holds("a.b != 1", context) is True


def test_keywords_other_than_and_or_not_are_ordinary_keys() -> None:
    context = {"exists": 1, "true": 2, "null": None, "a": {"and": 3}}
    assert holds("exists == 1", context)
    assert holds("exists exists", context)
    assert holds("true == 2", context)
    assert holds("null exists", context)
    assert holds("a.and == 3", context)


# --- and, or, parentheses, comparisons ------------------------------------------------------


def test_and_binds_tighter_than_or() -> None:
    assert holds("a or b and c", {"a": 1, "b": 0, "c": 0}) is True
    assert holds("a and b or c", {"a": 0, "b": 0, "c": 1}) is True
    assert holds("(a or b) and c", {"a": 1, "b": 0, "c": 0}) is False


def test_negation_applies_to_parenthesised_expressions() -> None:
    assert holds("!(a == 1)", {"a": 2}) is True
    assert holds("not (a == 1 or b)", {"a": 2, "b": 0}) is True
    assert holds("not(a and b)", {"a": 1, "b": 1}) is False
    assert holds("!(a) and !(b)", {}) is True


def test_whitespace_between_tokens_is_optional_where_unambiguous() -> None:
    assert holds('a==1 and(b!="x")or!c', {"a": 1, "b": "y"}) is True
    assert holds("\ta\n>=\r2 ", {"a": 2}) is True


ORDERING_TABLE = [
    ("a > 3", 5, True),
    ("a < 5.5", 5, True),
    ("a <= 2.0", 2, True),
    ("a >= 2", 2.0, True),
    ("a > 2", 2, False),
    ("a < -1e3", -1001, True),
    ("a > 1152921504606846976.0", 2**60 + 1, True),
    ("a > 0", True, False),
    ("a < 1", False, False),
    ("a > 0", "5", False),
    ("a < 1", None, False),
    ("a > 0", [1], False),
    ("a >= 0", {}, False),
]


@pytest.mark.parametrize(("text", "value", "expected"), ORDERING_TABLE)
def test_ordering_compares_numbers_only_and_ints_with_floats_by_value(
    text: str, value: Any, expected: bool
) -> None:
    assert holds(text, {"a": value}) is expected


def test_ordering_on_a_missing_path_is_false() -> None:
    for text in ("a < 1", "a <= 1", "a > 1", "a >= 1"):
        assert holds(text, {}) is False


def test_long_chains_do_not_recurse() -> None:
    text = " and ".join(["a"] * 2000) + " or " + " or ".join(["b"] * 2000)
    assert holds(text, {"b": 1}) is True


def test_parentheses_nest_up_to_a_limit() -> None:
    assert holds("(" * 32 + "a" + ")" * 32, {"a": 1})
    with pytest.raises(ConditionError) as err:
        parse_condition("(" * 33 + "a" + ")" * 33)
    assert err.value.position == 32


# --- the parsed value -----------------------------------------------------------------------


def test_a_condition_is_frozen_and_keeps_its_source() -> None:
    cond = parse_condition("a.b == 1 and c")
    assert cond.source == str(cond) == "a.b == 1 and c"
    assert parse_condition(cond.source) == cond
    with pytest.raises(dataclasses.FrozenInstanceError):
        cond.source = "x"  # type: ignore[misc]


# --- malformed input ------------------------------------------------------------------------

MALFORMED = [
    ("", 0),
    ("   ", 3),
    ("a == ", 5),
    ('a == {"x":1}', 5),
    ("a == [1]", 5),
    ("a == 1 extra", 7),
    ("a b == 1", 2),
    ("a..b == 1", 2),
    (".a == 1", 0),
    ("a. == 1", 2),
    ("path with spaces", 5),
    ("a === 1", 2),
    ("a = 1", 2),
    ("a =! 1", 2),
    ("!", 1),
    ("!!a", 1),
    ("not", 3),
    ("a exists now", 9),
    ("a exists exists", 9),
    ("café == 1", 3),
    ("(a == 1", 7),
    ("((a)", 4),
    ("a == 1)", 6),
    ("a)", 1),
    (")", 0),
    ("()", 1),
    ("a == 'x'", 5),
    ("a == x", 5),
    ("a == True", 5),
    ('a == "x', 7),
    ('a == "\\q"', 6),
    ('a == "\\u12"', 6),
    ('a == "\\ud800"', 5),
    ('a == "tab\there"', 9),
    ("a == 01", 5),
    ("a == 1.", 7),
    ("a == -", 6),
    ("a == 1e", 7),
    ("a == 1e400", 5),
    ("a == 1abc", 6),
    ("a == 1.2.3", 8),
    ('a < "1"', 4),
    ("a > true", 4),
    ("a >= null", 5),
    ("!a == 1", 3),
    ("not a exists", 6),
    ("a and", 5),
    ("a or or b", 5),
    ("or a", 0),
    ("and == 1", 0),
    ("a && b", 2),
    ("a == 1 == 2", 7),
]


@pytest.mark.parametrize(("text", "position"), MALFORMED)
def test_malformed_conditions_are_rejected_with_a_position(text: str, position: int) -> None:
    with pytest.raises(ConditionError) as err:
        parse_condition(text)
    assert err.value.position == position
    assert f"position {position}" in err.value.message
    assert str(err.value) == err.value.message
    assert isinstance(err.value, ValueError)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a == ", "expected a literal after '==' at position 5, found end of condition"),
        ("", "expected a path at position 0, found end of condition"),
        ("a exists now", "expected 'and', 'or' or end of condition at position 9, found 'now'"),
        ("a..b == 1", "expected a path segment after '.' at position 2, found '.'"),
        ("!", "expected a path or '(' after '!' at position 1, found end of condition"),
    ],
)
def test_error_messages_say_what_was_expected_and_what_was_found(text: str, message: str) -> None:
    with pytest.raises(ConditionError) as err:
        parse_condition(text)
    assert err.value.message == message


def test_error_messages_carry_useful_hints() -> None:
    hints = {
        "a == [1]": "object and array literals are not allowed",
        "a == x": "strings need double quotes",
        "a = 1": "did you mean '=='?",
        "(a": "unclosed '(' at position 0",
        "!a == 1": "!( ... )",
        'a < "1"': "numbers only",
    }
    for text, hint in hints.items():
        with pytest.raises(ConditionError) as err:
            parse_condition(text)
        assert hint in err.value.message, text


def test_a_non_string_condition_is_rejected() -> None:
    with pytest.raises(ConditionError):
        parse_condition(1)  # type: ignore[arg-type]


# --- properties -----------------------------------------------------------------------------

KEYS = ["a", "b", "c", "x-y", "1", "exists"]

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-3, 3)
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=4)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=3), inner, max_size=4)
    ),
    max_leaves=12,
)
contexts = st.dictionaries(st.sampled_from(KEYS), json_values, max_size=5) | json_values

_MISSING = object()
Oracle = Callable[[Any], bool]


def _lookup(context: Any, path: list[str]) -> Any:
    for segment in path:
        if not isinstance(context, dict) or segment not in context:
            return _MISSING
        context = context[segment]
    return context


def _is_number(value: Any) -> bool:
    return type(value) in (int, float)


@st.composite
def atoms(draw: st.DrawFn) -> tuple[str, Oracle]:
    """A random atom as text plus an independent oracle for its meaning."""
    path = draw(st.lists(st.sampled_from(KEYS), min_size=1, max_size=3))
    text = ".".join(path)
    kind = draw(st.sampled_from(["eq", "ne", "order", "exists", "truthy", "falsy"]))
    if kind in ("eq", "ne"):
        literal = draw(json_scalars)
        source = json.dumps(literal, ensure_ascii=draw(st.booleans()))

        def equal(ctx: Any) -> bool:
            value = _lookup(ctx, path)
            return type(value) is type(literal) and value == literal

        if kind == "eq":
            return f"{text} == {source}", equal
        return f"{text} != {source}", lambda ctx: not equal(ctx)
    if kind == "order":
        op = draw(st.sampled_from(["<", "<=", ">", ">="]))
        number = draw(st.integers() | st.floats(allow_nan=False, allow_infinity=False))
        compare: Callable[[Any, Any], bool] = {
            "<": operator.lt,
            "<=": operator.le,
            ">": operator.gt,
            ">=": operator.ge,
        }[op]

        def ordered(ctx: Any) -> bool:
            value = _lookup(ctx, path)
            return _is_number(value) and compare(value, number)

        return f"{text} {op} {json.dumps(number)}", ordered
    if kind == "exists":
        return f"{text} exists", lambda ctx: _lookup(ctx, path) is not _MISSING

    def truthy(ctx: Any) -> bool:
        value = _lookup(ctx, path)
        return value is not _MISSING and value not in (False, None, "", 0, 0.0, [], {})

    if kind == "truthy":
        return text, truthy
    return f"!{text}", lambda ctx: not truthy(ctx)


def _expressions(inner: st.SearchStrategy[tuple[str, Oracle]]) -> st.SearchStrategy[Any]:
    def group(item: tuple[str, Oracle]) -> tuple[str, Oracle]:
        return f"({item[0]})", item[1]

    def negate(item: tuple[str, Oracle]) -> tuple[str, Oracle]:
        return f"!({item[0]})", lambda ctx: not item[1](ctx)

    def chain(disjuncts: list[list[tuple[str, Oracle]]]) -> tuple[str, Oracle]:
        text = " or ".join(" and ".join(t for t, _ in conj) for conj in disjuncts)
        return text, lambda ctx: any(all(f(ctx) for _, f in conj) for conj in disjuncts)

    conj = st.lists(inner, min_size=1, max_size=3)
    return (
        inner.map(group)
        | inner.map(negate)
        | st.lists(conj, min_size=1, max_size=3).map(chain).map(group)
    )


conditions = st.recursive(atoms(), _expressions, max_leaves=8)


@settings(max_examples=300)
@given(conditions, contexts)
def test_evaluate_matches_an_independent_oracle(cond: tuple[str, Oracle], context: Any) -> None:
    text, oracle = cond
    assert evaluate(parse_condition(text), context) is oracle(context)


@settings(max_examples=300)
@given(conditions, st.lists(contexts, max_size=5))
def test_evaluate_is_total_and_parsing_is_stable(
    cond: tuple[str, Oracle], contexts_: list[Any]
) -> None:
    parsed = parse_condition(cond[0])
    assert isinstance(parsed, Condition)
    assert parse_condition(parsed.source) == parsed
    for context in contexts_:
        assert evaluate(parsed, context) in (True, False)


FRAGMENTS = ["a", "b.c", ".", " ", "==", "!=", "<", ">=", "=", "!", "(", ")", "and", "or"]
FRAGMENTS += ["not", "exists", "1", "-", "0", "e", "1.5", '"', '"x"', "\\", "true", "null", "{"]


@settings(max_examples=500)
@given(st.lists(st.sampled_from(FRAGMENTS) | st.text(max_size=2), max_size=10), contexts)
def test_any_text_either_parses_or_is_rejected_with_a_position_inside_it(
    fragments: list[str], context: Any
) -> None:
    text = "".join(fragments)
    try:
        cond = parse_condition(text)
    except ConditionError as err:
        assert 0 <= err.position <= len(text)
        assert f"position {err.position}" in err.message
    else:
        assert evaluate(cond, context) in (True, False)


# --- the evaluator made at parse time --------------------------------------------------------

ORDERINGS = [f"{key} {op} {n}" for key in ("a", "x-y") for op in ("<", "<=", ">", ">=")
             for n in ("0", "-2", "1.5", "7")]  # fmt: skip


class _Sub(dict):  # type: ignore[type-arg]
    """A dict subclass: an object for the condition language, as ``isinstance`` says."""


@settings(max_examples=400)
@given(st.sampled_from(ORDERINGS), contexts | json_values.map(lambda v: _Sub(a=v)))
def test_a_top_level_ordering_evaluates_as_the_tree_walk_does(text: str, context: Any) -> None:
    """``i < 10`` (a loop's bound) gets an evaluator of its own at parse time: it must
    answer what the tree walk answers, for every context (values of every type, booleans,
    a dict subclass, a context that is no object)."""
    from plait.core.conditions import _eval

    cond = parse_condition(text)
    assert not isinstance(cond.holds, functools.partial)  # the evaluator of its own
    assert cond.holds(context) is _eval(cond.root, context)
    assert evaluate(cond, context) is _eval(cond.root, context)


def test_the_evaluator_is_not_part_of_a_conditions_value() -> None:
    """Two parses of one text are equal and hash alike, evaluator or not."""
    first, second = parse_condition("a.b == 1 and c"), parse_condition("a.b == 1 and c")
    assert first.holds is not second.holds
    assert first == second and hash(first) == hash(second)
    assert "holds" not in repr(first)
