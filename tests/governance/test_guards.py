"""Guards: every atom and combinator evaluates, describes itself and reports what it reads."""

from __future__ import annotations

import pytest

from plait.governance.guards import (
    AllOf,
    Always,
    Eq,
    Guard,
    all_of,
    always,
    any_of,
    called_ok,
    captured,
    describe,
    done,
    eq,
    holds,
    is_set,
    is_trivially_false,
    is_trivially_true,
    is_true,
    keys_read,
    not_,
    steps_named,
    tools_named,
)

STATE = {"yes": True, "one": 1, "text": "yes", "nothing": None, "zero": 0.0, "obj": {"a": [1]}}


def ev(guard: Guard, state=STATE, done_steps=(), calls=None) -> bool:
    return holds(guard, state, frozenset(done_steps), calls or {})


def test_always_holds_even_on_an_empty_state():
    assert ev(always(), state={})


def test_is_true_holds_only_for_the_json_value_true():
    assert ev(is_true("yes"))
    assert not ev(is_true("text"))
    assert not ev(is_true("one"))
    assert not ev(is_true("missing"))


def test_is_set_holds_for_a_present_key_that_is_not_null():
    assert ev(is_set("text"))
    assert ev(is_set("zero"))
    assert not ev(is_set("nothing"))
    assert not ev(is_set("missing"))


def test_eq_compares_strictly_and_a_missing_key_equals_nothing():
    assert ev(eq("one", 1))
    assert not ev(eq("one", 1.0))
    assert not ev(eq("one", True))
    assert not ev(eq("yes", 1))
    assert ev(eq("obj", {"a": [1]}))
    assert ev(eq("nothing", None))
    assert not ev(eq("missing", None))


def test_eq_guards_are_compared_and_hashed_by_canonical_json():
    assert Eq("k", 1) != Eq("k", 1.0)
    assert Eq("k", {"b": 1, "a": 2}) == Eq("k", {"a": 2, "b": 1})
    assert len({Eq("k", [1]), Eq("k", [1]), Eq("k", True)}) == 2


def test_captured_needs_every_key_set():
    assert ev(captured("text", "one"))
    assert not ev(captured("text", "nothing"))
    assert not ev(captured("text", "missing"))


def test_called_ok_needs_at_least_one_success():
    assert ev(called_ok("t"), calls={"t": 1})
    assert not ev(called_ok("t"), calls={"other": 3})


def test_done_reads_the_marking():
    assert ev(done("a"), done_steps={"a"})
    assert not ev(done("b"), done_steps={"a"})


def test_all_of_holds_when_every_guard_holds_and_when_it_has_none():
    assert ev(all_of(is_true("yes"), is_set("text")))
    assert not ev(all_of(is_true("yes"), is_set("missing")))
    assert ev(all_of())


def test_any_of_holds_when_one_guard_holds_and_never_when_it_has_none():
    assert ev(any_of(is_true("text"), is_set("text")))
    assert not ev(any_of(is_true("text"), is_set("missing")))
    assert not ev(any_of())


def test_not_negates_its_guard():
    assert ev(not_(is_set("missing")))
    assert not ev(not_(always()))


@pytest.mark.parametrize(
    ("guard", "prose"),
    [
        (always(), "always"),
        (is_true("confirmed"), "`confirmed` is true"),
        (is_set("account"), "`account` is set"),
        (eq("status", "active"), '`status` is "active"'),
        (eq("limit", {"b": 1, "a": 2.5}), '`limit` is {"a":2.5,"b":1}'),
        (captured("amount"), "`amount` is set"),
        (captured("amount", "date"), "`amount` and `date` are set"),
        (captured("a", "b", "c"), "`a`, `b` and `c` are set"),
        (called_ok("lookup_account"), "`lookup_account` has succeeded at least once"),
        (done("verify"), "step `verify` is done"),
    ],
)
def test_every_atom_describes_what_it_waits_for(guard, prose):
    assert describe(guard) == prose


def test_combinators_join_their_parts_and_bracket_nested_compounds():
    assert describe(all_of(is_true("a"), done("b"))) == "`a` is true and step `b` is done"
    assert describe(any_of(is_true("a"), is_set("b"))) == "`a` is true or `b` is set"
    nested = all_of(any_of(is_true("a"), is_true("b")), is_set("c"))
    assert describe(nested) == "(`a` is true or `b` is true) and `c` is set"
    assert describe(all_of(any_of(is_true("a")))) == "`a` is true"
    assert describe(all_of()) == "always"
    assert describe(any_of()) == "never"


def test_negations_read_as_plain_prose():
    assert describe(not_(is_true("a"))) == "`a` is not true"
    assert describe(not_(is_set("a"))) == "`a` is not set"
    assert describe(not_(eq("a", 1))) == "`a` is not 1"
    assert describe(not_(called_ok("t"))) == "`t` has not succeeded yet"
    assert describe(not_(done("s"))) == "step `s` is not done"
    assert describe(not_(not_(is_true("a")))) == "`a` is true"
    assert describe(not_(always())) == "never"
    assert describe(not_(all_of(is_true("a"), is_true("b")))) == "not (`a` is true and `b` is true)"


def test_keys_read_lists_state_keys_in_order_without_tools_or_steps():
    guard = all_of(
        is_true("b"), not_(captured("a", "b")), eq("c", 1), called_ok("tool"), done("step")
    )
    assert keys_read(guard) == ["b", "a", "c"]


def test_steps_and_tools_named_come_from_done_and_called_ok_atoms():
    guard = any_of(done("s1"), not_(called_ok("t1")), all_of(done("s1"), called_ok("t2")))
    assert steps_named(guard) == ["s1"]
    assert tools_named(guard) == ["t1", "t2"]


def test_trivial_truth_is_judged_from_shape_alone():
    assert is_trivially_true(always())
    assert is_trivially_true(all_of(always(), all_of()))
    assert is_trivially_true(any_of(is_true("a"), always()))
    assert is_trivially_true(not_(any_of()))
    assert not is_trivially_true(is_true("a"))
    assert is_trivially_false(not_(always()))
    assert is_trivially_false(all_of(is_true("a"), any_of()))
    assert not is_trivially_false(is_true("a"))


def test_constructors_build_the_guard_values():
    assert always() == Always()
    assert all_of(is_true("a")) == AllOf((is_true("a"),))
