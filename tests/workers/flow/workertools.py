"""Tools that record every execution (node, attempt, idempotency key) in a side file.

One ``os.write`` of one short line per execution on an ``O_APPEND`` file: lines written
by concurrent workers never interleave. ``WORKERTOOLS_BLOCK=<node>`` makes that node
write ``<count_file>.blocked`` and wait until ``<count_file>.release`` exists (forever if
it never does: the test kills the process).
"""

import os
import time
from pathlib import Path

from plait import current_call


def _count(count_file: str) -> None:
    call = current_call()
    line = f"{call.run_id} {call.node} {call.attempt} {call.idempotency_key}\n"
    fd = os.open(count_file, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)
    if os.environ.get("WORKERTOOLS_BLOCK") == call.node:
        Path(count_file + ".blocked").write_text(str(os.getpid()))
        while not Path(count_file + ".release").exists():
            time.sleep(0.02)


def first(count_file: str, n: int) -> dict:
    _count(count_file)
    return {"a": n + 1}


def second(count_file: str, a: int) -> dict:
    _count(count_file)
    return {"b": a * 2}


def third(count_file: str, b: int) -> dict:
    _count(count_file)
    return {"done": True, "c": b + 1}
