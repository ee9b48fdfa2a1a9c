"""Tools that record every execution in the side file ``$CRASHMATRIX_COUNT``.

One line per execution: ``<idempotency key> <what ran>``. The test maps each key to the
effect that owns it through the run's journal, so a line says exactly which effect ran.
With ``CRASHMATRIX_BLOCK=<node>`` the tool of that node, once every key listed in
``CRASHMATRIX_BLOCK_AFTER`` (tool names, comma-separated) has been recorded, writes
``<count file>.blocked`` and blocks until the process is killed (a real kill -9 mid-wave).
"""

import os
import time
from pathlib import Path

from plait import current_call


def count(what: str) -> None:
    call = current_call()
    assert call is not None
    path = os.environ["CRASHMATRIX_COUNT"]
    with open(path, "a") as f:
        f.write(f"{call.idempotency_key} {what}\n")
    if os.environ.get("CRASHMATRIX_BLOCK") == call.node:
        others = {w for w in os.environ.get("CRASHMATRIX_BLOCK_AFTER", "").split(",") if w}
        while not others <= _recorded(path):  # the rest of the wave has run
            time.sleep(0.01)
        Path(path + ".blocked").write_text(call.node)
        while True:  # wait to be killed
            time.sleep(0.05)


def _recorded(path: str) -> set[str]:
    return {line.split()[1] for line in Path(path).read_text().splitlines()}


def mark() -> dict:
    """A step of a chain: records itself under its node's id."""
    call = current_call()
    assert call is not None
    count(call.node)
    return {call.node: "done"}


def record(tag: str) -> dict:
    count(tag)
    return {"recorded": tag}


def lookup(account: str) -> dict:
    count("lookup")
    return {"account": account}


def refund(amount: int) -> dict:
    count("refund")
    return {"refunded": amount}


def invoice(n: int) -> dict:
    raise AssertionError("a deferred tool is never called: its result is the answer")
