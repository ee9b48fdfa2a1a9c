"""Tools of the contract scenarios (run in-process by CliRunner, or in a `plait` subprocess)."""

from __future__ import annotations


def start() -> dict:
    return {"started": True}


def finish() -> dict:
    return {"finished": True}


def take_yes() -> dict:
    return {"branch": "approved"}


def take_no() -> dict:
    return {"branch": "denied"}


def count(i: int = 0) -> dict:
    return {"i": i + 1}


def boom() -> dict:
    raise ValueError("kaboom")


def one() -> dict:
    return {"x": 1}


def chatty() -> dict:
    print("a tool talking on stdout")
    return {"chatty": True}


def lookup(q: str) -> dict:
    """Look something up."""
    return {"found": q}
