"""Python functions as tools: how a context fills their parameters (docs/architecture.md §4)."""

from __future__ import annotations

import sys
import uuid
from collections.abc import Mapping
from typing import Any

import pydantic
import pytest
from pydantic import BaseModel

from plait.core.errors import PlaitError
from plait.tools import ToolArgumentError, bind_arguments, input_schema, resolve_python

CONTEXT = {"order_id": "A1", "amount": 5, "note": "x"}


class Order(BaseModel):
    id: str


def test_context_keys_fill_the_parameters_they_name_and_others_are_ignored():
    def refund(order_id: str, amount: int) -> dict:
        return {}

    assert bind_arguments(refund, CONTEXT) == {"order_id": "A1", "amount": 5}


def test_missing_optional_parameters_keep_their_defaults():
    def refund(order_id: str, reason: str = "none") -> dict:
        return {}

    assert bind_arguments(refund, CONTEXT) == {"order_id": "A1"}


def test_a_sole_dict_parameter_receives_the_whole_context():
    def audit(payload: dict[str, Any]) -> dict:
        return {}

    assert bind_arguments(audit, CONTEXT) == {"payload": CONTEXT}


def test_a_sole_mapping_parameter_receives_the_whole_context():
    def audit(payload: Mapping[str, Any]) -> dict:
        return {}

    assert bind_arguments(audit, CONTEXT) == {"payload": CONTEXT}


def test_a_sole_parameter_named_context_receives_the_whole_context():
    def audit(context) -> dict:
        return {}

    assert bind_arguments(audit, CONTEXT) == {"context": CONTEXT}


def test_kwargs_receives_every_key():
    def log(order_id: str, **rest: Any) -> dict:
        return {}

    assert bind_arguments(log, CONTEXT) == CONTEXT


def test_a_missing_required_parameter_is_a_type_error_naming_it():
    def refund(order_id: str, customer: str) -> dict:
        return {}

    with pytest.raises(ToolArgumentError) as caught:
        bind_arguments(refund, CONTEXT)

    assert isinstance(caught.value, TypeError)
    assert str(caught.value) == (
        "refund() is missing required argument 'customer' (context keys: amount, note, order_id)"
    )


def test_values_are_validated_against_annotations():
    def refund(amount: int) -> dict:
        return {}

    with pytest.raises(ToolArgumentError, match="amount: Input should be a valid integer"):
        bind_arguments(refund, {"amount": "lots"})


class _Text(str):
    pass


@pytest.mark.parametrize(
    "context",
    [
        {"count": 3, "name": "a", "flag": True, "ratio": 0.5, "anything": {"x": [1]}, "bare": 1},
        {"count": True, "name": "a", "flag": False, "ratio": 2, "anything": None, "bare": "b"},
        {"count": 3, "name": _Text("sub"), "flag": 1, "ratio": 1.0, "anything": [], "bare": []},
        {"count": "7", "name": "a", "flag": "yes", "ratio": "1.5", "anything": 1, "bare": 2.5},
    ],
)
def test_arguments_bound_without_validation_are_those_validation_gives(context):
    """Plain values of a parameter's exact type skip pydantic (bind_arguments' fast path);
    what the tool receives is what validating them gives, value and type alike, and any
    other value is still validated (a bool for an int, an int for a float, a str subclass)."""

    def tool(count: int, name: str, flag: bool, ratio: float, anything: Any, bare) -> dict:  # type: ignore[no-untyped-def]
        return {}

    validated = pydantic.create_model(
        "tool",
        count=(int, ...),
        name=(str, ...),
        flag=(bool, ...),
        ratio=(float, ...),
        anything=(Any, ...),
        bare=(Any, ...),
    ).model_validate(context)
    bound = bind_arguments(tool, context)

    assert bound == {name: getattr(validated, name) for name in context}
    assert [type(value) for value in bound.values()] == [
        type(getattr(validated, name)) for name in context
    ]
    assert bound["anything"] is context["anything"]


def test_a_parameter_typed_as_a_model_receives_the_model():
    def ship(order: Order) -> dict:
        return {}

    assert bind_arguments(ship, {"order": {"id": "A1"}}) == {"order": Order(id="A1")}


def test_positional_only_parameters_are_refused():
    def ship(order_id, /, fast=False):  # type: ignore[no-untyped-def]
        return {}

    with pytest.raises(ToolArgumentError, match="positional-only"):
        bind_arguments(ship, CONTEXT)


def test_input_schema_comes_from_type_hints():
    def refund(order_id: str, amount: int = 0) -> dict:
        return {}

    schema = input_schema(refund)

    assert schema["required"] == ["order_id"]
    assert schema["properties"]["amount"]["type"] == "integer"


def test_input_schema_of_a_whole_context_tool_accepts_any_object():
    def audit(context: dict) -> dict:
        return {}

    assert input_schema(audit) == {"type": "object"}


def test_resolve_python_imports_relative_to_the_base_dir(tmp_path):
    name = f"plait_tools_{uuid.uuid4().hex}"
    (tmp_path / f"{name}.py").write_text("async def fetch(url: str) -> dict:\n    return {}\n")

    fn = resolve_python(f"{name}:fetch", tmp_path)

    assert fn.__name__ == "fetch"


@pytest.mark.parametrize("spec", ["no_colon", "a:b:c", "1mod:f", ":f", "mod:"])
def test_resolve_python_refuses_malformed_specs(tmp_path, spec):
    with pytest.raises(PlaitError) as caught:
        resolve_python(spec, tmp_path, tool="t")

    assert caught.value.code == "E004"
    assert str(caught.value).startswith(f"PLAIT-E004 tool 't': cannot import '{spec}': expected")


def test_each_folder_gets_its_own_module_of_a_shared_name(tmp_path):
    """Two workflows' tools.py in one process (subgraph files, plait serve, plait worker):
    each resolves in its own file; the first imported keeps the name in sys.modules."""
    name = f"plait_tools_{uuid.uuid4().hex}"  # the "tools" of this test only
    for folder, (fn, value) in {"a": ("only_in_a", 1), "b": ("only_in_b", 2)}.items():
        (tmp_path / folder).mkdir()
        (tmp_path / folder / f"{name}.py").write_text(
            f"STATE = []\ndef {fn}() -> dict:\n    STATE.append(1)\n    return {{'v': {value}}}\n"
            f"def shared() -> dict:\n    return {{'from': {folder!r}}}\n"
        )

    in_a = resolve_python(f"{name}:only_in_a", tmp_path / "a")
    in_b = resolve_python(f"{name}:only_in_b", tmp_path / "b")
    shared_a = resolve_python(f"{name}:shared", tmp_path / "a")
    shared_b = resolve_python(f"{name}:shared", tmp_path / "b")

    assert (in_a(), in_b()) == ({"v": 1}, {"v": 2})
    assert (shared_a(), shared_b()) == ({"from": "a"}, {"from": "b"})
    assert sys.modules[name].__file__ == str((tmp_path / "a" / f"{name}.py").resolve())
    assert resolve_python(f"{name}:only_in_b", tmp_path / "b") is in_b  # imported once
    with pytest.raises(PlaitError) as caught:
        resolve_python(f"{name}:only_in_b", tmp_path / "a")
    assert "has no attribute 'only_in_b'" in str(caught.value)
