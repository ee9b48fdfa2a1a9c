"""``FLOW_SCHEMA``: the JSON Schema (draft 2020-12) of a flow document.

For editors and other tools; plait itself reads documents with ``document.py``, whose
messages are friendlier. The two accept the same shapes (a test holds them together).
"""

from __future__ import annotations

from typing import Any, Final

__all__ = ["FLOW_SCHEMA"]

_NAME: Final = {"type": "string", "minLength": 1, "pattern": r"\S"}
_NAMES: Final = {"type": "array", "items": {"$ref": "#/$defs/name"}}
_GUARD: Final = {"$ref": "#/$defs/guard"}


def _one(key: str, value: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {key: value},
        "required": [key],
        "additionalProperties": False,
    }


def _with(key: str, value: dict[str, Any], partner: str) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {key: value, partner: _GUARD},
        "required": [key, partner],
        "additionalProperties": False,
    }


FLOW_SCHEMA: Final[dict[str, Any]] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": "https://plait.dev/schemas/flow.json",
    "title": "plait governance flow",
    "type": "object",
    "required": ["steps"],
    "additionalProperties": False,
    "properties": {
        "mode": {"enum": ["enforce", "observe"], "default": "enforce"},
        "steps": {"type": "array", "items": {"$ref": "#/$defs/step"}},
        "constraints": {"type": "array", "items": {"$ref": "#/$defs/constraint"}},
        "commit": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"tool": {"$ref": "#/$defs/name"}, "until": _GUARD},
                "required": ["tool", "until"],
                "additionalProperties": False,
            },
        },
        "confirm_tools": _NAMES,
        "ambient": _NAMES,
    },
    "$defs": {
        "name": _NAME,
        "step": {
            "type": "object",
            "required": ["id"],
            "additionalProperties": False,
            "properties": {
                "id": {"$ref": "#/$defs/name"},
                "after": {
                    "type": "array",
                    "items": {
                        "oneOf": [
                            {"$ref": "#/$defs/name"},
                            {
                                "type": "object",
                                "properties": {"step": {"$ref": "#/$defs/name"}, "when": _GUARD},
                                "required": ["step"],
                                "additionalProperties": False,
                            },
                        ]
                    },
                },
                "join": {"enum": ["all", "any"], "default": "all"},
                "gate": _GUARD,
                "done": _GUARD,
                "allow": _NAMES,
                "deny": _NAMES,
                "posture": {"type": "string"},
                "terminal": {"type": "boolean", "default": False},
            },
        },
        "constraint": {
            "oneOf": [
                _one("once", {"$ref": "#/$defs/name"}),
                _with("never", {"$ref": "#/$defs/name"}, "until"),
                _one("before", {**_NAMES, "minItems": 2, "maxItems": 2}),
                _one("require", _NAMES),
                _with("reset", _NAMES, "when"),
            ]
        },
        "guard": {
            "oneOf": [
                {"const": "always"},
                _one("is_true", {"$ref": "#/$defs/name"}),
                _one("is_set", {"$ref": "#/$defs/name"}),
                _one(
                    "eq",
                    {
                        "type": "array",
                        "prefixItems": [{"$ref": "#/$defs/name"}, {}],
                        "minItems": 2,
                        "maxItems": 2,
                    },
                ),
                _one("captured", {**_NAMES, "minItems": 1}),
                _one("called_ok", {"$ref": "#/$defs/name"}),
                _one("done", {"$ref": "#/$defs/name"}),
                _one("all", {"type": "array", "items": _GUARD}),
                _one("any", {"type": "array", "items": _GUARD}),
                _one("not", _GUARD),
            ]
        },
    },
}
