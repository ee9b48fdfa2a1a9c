"""A run's plan by meaning: what pins it, and its ``plan_hash``.

A run pins its definition at start (``Workflow.to_manifest``). Only what changes how a
run goes counts: nodes, edges and their conditions, reducers, tools with their bindings
and schemas, asks, budgets, governance flows, model settings. What a file says for people
— its ``description``, comments, formatting, key order, YAML or JSON — never changes a
run's plan: the manifest is built from the parsed definition, in canonical JSON, and the
description is left out here. So a cosmetic edit to the file of a parked run lets it
resume, and ``plan_hash`` names a plan by meaning (``plait check``, ``plait show``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from plait.core.canonical import value_digest

COSMETIC = ("description",)
"""Keys of a pinned definition that are for people only."""


def semantic_plan(pinned: Mapping[str, Any]) -> dict[str, Any]:
    """The pinned definition (``Workflow.to_manifest()`` shape) without its cosmetic keys."""
    return {key: value for key, value in pinned.items() if key not in COSMETIC}


def plan_hash(pinned: Mapping[str, Any]) -> str:
    """``sha256:<hex>`` of the canonical JSON of the plan's meaning."""
    return "sha256:" + value_digest(semantic_plan(pinned))


def same_plan(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Whether two pinned definitions mean the same plan."""
    return semantic_plan(a) == semantic_plan(b)
