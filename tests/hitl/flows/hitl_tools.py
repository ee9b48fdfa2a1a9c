"""Tools of the human-in-the-loop test workflows (run inside the `plait` subprocess)."""

from __future__ import annotations

from plait import current_call


def start() -> dict:
    return {"started": True}


def take_yes() -> dict:
    return {"branch": "approved"}


def take_no() -> dict:
    return {"branch": "denied"}


def finish() -> dict:
    return {"finished": True}


def count(i: int = 0) -> dict:
    return {"i": i + 1}


def big() -> dict:
    return {"blob": "x" * 5000}


def lookup(q: str) -> dict:
    """Look something up."""
    return {"found": q}


def pay(amount: int) -> dict:
    """Pay an amount."""
    return {"paid": amount}


def counted(count_file: str) -> dict:
    """Record this execution (node and idempotency key) in a side file."""
    call = current_call()
    with open(count_file, "a") as f:
        f.write(f"{call.node} {call.idempotency_key}\n")
    return {"counted": True}
