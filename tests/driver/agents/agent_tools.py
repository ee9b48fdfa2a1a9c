"""Tools of the several-agents flows; each call counts itself by idempotency key."""

from __future__ import annotations

import os

from plait import current_call


def _count() -> None:
    path = os.environ.get("AGENTS_COUNT")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(current_call().idempotency_key + "\n")


def lookup(q: str) -> dict:
    """Look something up."""
    _count()
    return {"found": q}


def plan() -> dict:
    _count()
    return {"$send": [{"node": "writer", "input": {"topic": t}} for t in ("tides", "moons")]}


def collect(writer: list) -> dict:
    _count()
    return {"pieces": len(writer)}


def spread() -> dict:
    _count()
    return {"$send": [{"node": "sub", "input": {"topic": t}} for t in ("tides", "moons")]}


def look(topic: str) -> dict:
    _count()
    return {"writer": f"a note on {topic}"}
