"""Tools of the checkpoint-limit scenario: one result is large, the others are not."""

from __future__ import annotations


def small() -> dict:
    return {"small": 1}


def big(size: int = 8000) -> dict:
    return {"blob": "x" * size}


def end() -> dict:
    return {"end": True}
