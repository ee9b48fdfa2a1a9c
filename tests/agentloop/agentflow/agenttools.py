"""A tool that records every execution (effect and idempotency key) in a side file.

``AGENT_COUNT_FILE`` names the file: one line per execution,
``<node> <effect_seq> <idempotency key> <tag>``. With ``AGENT_BLOCK_AT=<tag>`` the call
with that tag, once every tag in ``AGENT_BLOCK_AFTER`` (comma-separated) has been
recorded, writes ``<count file>.blocked`` and blocks until the process is killed.
"""

import os
import time
from pathlib import Path

from plait import current_call


def _recorded(count_file: str) -> set[str]:
    path = Path(count_file)
    lines = path.read_text().splitlines() if path.exists() else []
    return {line.split()[3] for line in lines}


def record(tag: str) -> dict:
    call = current_call()
    count_file = os.environ["AGENT_COUNT_FILE"]
    with open(count_file, "a") as f:
        f.write(f"{call.node} {call.effect_seq} {call.idempotency_key} {tag}\n")
    if os.environ.get("AGENT_BLOCK_AT") == tag:
        others = {t for t in os.environ.get("AGENT_BLOCK_AFTER", "").split(",") if t}
        while not others <= _recorded(count_file):  # the rest of the round has run
            time.sleep(0.01)
        Path(count_file + ".blocked").write_text(tag)
        while True:  # wait to be killed
            time.sleep(0.05)
    return {"recorded": tag}
