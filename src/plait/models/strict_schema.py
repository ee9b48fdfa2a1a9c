"""Tool input schemas as OpenAI's strict mode accepts them (``strict: true`` tools).

Strict function calling takes a subset of JSON Schema: every object says
``additionalProperties: false`` and lists EVERY property as required, and ``$ref`` has
no sibling keys. ``strict_schema`` rewrites a tool's schema the way the SDK's own
``openai.pydantic_function_tool`` does (so a pydantic model's schema comes out equal to
the SDK's), and makes an optional property that has no default and does not already
admit ``null`` nullable, so the model can still leave it out by sending ``null``.
``without_added_nulls`` drops exactly those ``null``s from the call's arguments, so
the loop validates and the tool receives what a non-strict call would have sent.

The rewritten schema is only sent; the pinned schema (what arguments are checked
against, §6.3) is the tool's own.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from plait.models.base import ModelRequest, ModelResponse

NULL = {"type": "null"}


def strict_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``schema`` that OpenAI's strict mode accepts."""
    root = copy.deepcopy(dict(schema))
    return _strict(root, root)


def _strict(node: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    for key in ("$defs", "definitions"):
        defs = node.get(key)
        if isinstance(defs, dict):
            for name, sub in defs.items():
                if isinstance(sub, dict):
                    defs[name] = _strict(sub, root)
    if node.get("type") == "object" and "additionalProperties" not in node:
        node["additionalProperties"] = False
    properties = node.get("properties")
    if isinstance(properties, dict):
        optional = [k for k in properties if k not in (node.get("required") or ())]
        node["required"] = list(properties)
        node["properties"] = {
            k: _strict(_nullable(v, root) if k in optional else v, root)
            for k, v in properties.items()
        }
    items = node.get("items")
    if isinstance(items, dict):
        node["items"] = _strict(items, root)
    any_of = node.get("anyOf")
    if isinstance(any_of, list):
        node["anyOf"] = [_strict(v, root) if isinstance(v, dict) else v for v in any_of]
    all_of = node.get("allOf")
    if isinstance(all_of, list):
        if len(all_of) == 1 and isinstance(all_of[0], dict):
            node.update(_strict(all_of[0], root))
            node.pop("allOf")
        else:
            node["allOf"] = [_strict(v, root) if isinstance(v, dict) else v for v in all_of]
    if "default" in node and node["default"] is None:
        node.pop("default")  # still nullable; a default of null says nothing more
    ref = node.get("$ref")
    if isinstance(ref, str) and len(node) > 1:  # strict mode refuses $ref with siblings
        resolved = _resolve(root, ref)
        node.update({**resolved, **node})
        node.pop("$ref")
        return _strict(node, root)
    return node


def _nullable(prop: Any, root: dict[str, Any]) -> Any:
    """An optional property as strict mode can express it: nullable unless it has a
    default (the model then sends a value) or already admits ``null``."""
    return {"anyOf": [prop, dict(NULL)]} if _made_nullable(prop, root) else prop


def _made_nullable(prop: Any, root: dict[str, Any]) -> bool:
    return isinstance(prop, Mapping) and "default" not in prop and not _admits_null(prop, root)


def _admits_null(prop: Mapping[str, Any], root: dict[str, Any]) -> bool:
    kind = prop.get("type")
    if kind == "null" or (isinstance(kind, list) and "null" in kind):
        return True
    variants = prop.get("anyOf") or prop.get("oneOf") or ()
    if any(isinstance(v, Mapping) and _admits_null(v, root) for v in variants):
        return True
    ref = prop.get("$ref")
    return isinstance(ref, str) and _admits_null(_resolve(root, ref), root)


def _resolve(root: dict[str, Any], ref: str) -> dict[str, Any]:
    if not ref.startswith("#/"):
        raise ValueError(f"unexpected $ref {ref!r}: only local references (#/...) are resolved")
    found: Any = root
    for key in ref[2:].split("/"):
        found = found[key]
    if not isinstance(found, dict):
        raise ValueError(f"$ref {ref!r} does not name a schema object")
    return found


def without_added_nulls(arguments: Any, schema: Mapping[str, Any]) -> Any:
    """``arguments`` without the ``null``s that stand for an optional property left out
    (those ``strict_schema`` made nullable), at any depth of nested objects."""
    root = dict(schema)
    return _drop(arguments, root, root)


def _drop(value: Any, node: Mapping[str, Any], root: dict[str, Any]) -> Any:
    ref = node.get("$ref")
    if isinstance(ref, str):
        node = {**_resolve(root, ref), **{k: v for k, v in node.items() if k != "$ref"}}
    if isinstance(value, list) and isinstance(node.get("items"), Mapping):
        return [_drop(v, node["items"], root) for v in value]
    properties = node.get("properties")
    if not isinstance(value, dict) or not isinstance(properties, Mapping):
        return value
    required = node.get("required") or ()
    kept = {}
    for key, item in value.items():
        prop = properties.get(key)
        if not isinstance(prop, Mapping):
            kept[key] = item
        elif item is None and key not in required and _made_nullable(prop, root):
            continue  # strict mode's way of leaving it out
        else:
            kept[key] = _drop(item, prop, root)
    return kept


def strict_answer(response: ModelResponse, request: ModelRequest) -> ModelResponse:
    """The answer with the ``null``s a strict tool's call sent for left-out optional
    properties dropped (``without_added_nulls``); other answers as they came."""
    strict = {t.name: t.input_schema for t in request.tools if t.strict}
    if not strict or not any(c["name"] in strict for c in response.tool_calls):
        return response
    calls = tuple(
        {**c, "arguments": without_added_nulls(c["arguments"], strict[c["name"]])}
        if c["name"] in strict
        else c
        for c in response.tool_calls
    )
    return replace(response, tool_calls=calls)
