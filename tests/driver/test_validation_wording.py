"""Argument and response validation words a problem the same in the run and in verify.

A run validates against the schema as the file (or pydantic) ordered its keywords and
arguments as the model ordered their keys; verify against the pinned manifest and the
journal, both in canonical (sorted) key order. jsonschema reports errors in the order it
walks keywords and shows values as Python reprs, so the message the model reads (and the
transcript verify compares) must not depend on either order.
"""

from __future__ import annotations

from plait.core.canonical import dumps, loads
from plait.driver.environment import _compiled, env_from_manifest

SCHEMA = {
    "type": "object",
    "required": ["a"],
    "additionalProperties": False,
    "properties": {"a": {"type": "integer"}, "opts": {"type": "array"}},
}


def validate_args(schema: dict, name: str, arguments: dict) -> str | None:
    node = {"id": "t", "kind": "tool", "retries": 0, "executor": {"name": "t", "spec": {}}}
    env = env_from_manifest({"nodes": [node], "edges": []}, {"t": schema})
    return env.validate_args(name, arguments)


def test_several_problems_at_one_place_are_worded_the_same_in_any_keyword_order():
    as_written = validate_args(SCHEMA, "t", {"zz": 1, "b": 2})
    as_pinned = validate_args(loads(dumps(SCHEMA)), "t", {"b": 2, "zz": 1})
    assert as_written == as_pinned
    assert as_written is not None and "Additional properties" in as_written


def test_a_value_shown_in_the_message_is_shown_in_canonical_key_order():
    problem = validate_args(SCHEMA, "t", {"a": 1, "opts": {"z": 1, "b": 2}})
    assert problem == "opts: {'b': 2, 'z': 1} is not of type 'array'"


def test_a_schema_is_compiled_once_whatever_its_key_order_and_words_problems_alike():
    """Every run of a workflow offers the same tools: their schemas are compiled once per
    process, keyed by canonical text, and a validator read again words its problems as a
    fresh one would; another schema gets its own."""
    schema = {"type": "object", "required": ["once"], "properties": {"once": {"type": "string"}}}
    before = _compiled.cache_info()
    first = validate_args(schema, "t", {"once": 3})
    reordered = dict(reversed(list(schema.items())))
    assert validate_args(reordered, "t", {"once": 3}) == first == "once: 3 is not of type 'string'"
    after = _compiled.cache_info()
    assert after.misses == before.misses + 1 and after.hits >= before.hits + 1
    other = {**schema, "required": []}
    assert validate_args(other, "t", {}) is None
    assert _compiled.cache_info().misses == after.misses + 1
