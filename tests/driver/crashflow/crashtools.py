"""Tools that record every execution (node and idempotency key) in a side file."""

import os
import time
from pathlib import Path

from plait import current_call


def _count(count_file: str) -> None:
    call = current_call()
    with open(count_file, "a") as f:
        f.write(f"{call.node} {call.attempt} {call.idempotency_key}\n")


def prep(count_file: str) -> dict:
    _count(count_file)
    if current_call().attempt == 1:
        raise RuntimeError("first attempt always fails")
    return {"i": 0, "log": "prepared"}


def work(count_file: str, i: int) -> dict:
    _count(count_file)
    block = os.environ.get("CRASHFLOW_BLOCK_AT")
    if block is not None and i == int(block):
        Path(count_file + ".blocked").write_text("blocked")
        while True:  # wait to be killed
            time.sleep(0.05)
    return {"i": i + 1, "log": f"work {i}"}


def finish(count_file: str, i: int) -> dict:
    _count(count_file)
    return {"done": True, "log": f"finished at {i}"}
