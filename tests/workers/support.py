"""Helpers for the worker tests (``from workers.support import ...``): the CLI as a
subprocess, enqueuing, counting executions.

PostgreSQL comes from tests/conftest.py (``postgres_url``: a fresh schema per test;
skipped when no server answers, a failure under PLAIT_REQUIRE_POSTGRES=1).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from plait import Runtime, load_workflow

FLOW_DIR = Path(__file__).parent / "flow"
FLOW = FLOW_DIR / "workflow.yaml"
ASK_FLOW = FLOW_DIR / "ask.yaml"
TIMER_FLOW = FLOW_DIR / "timer.yaml"
SPENT_FLOW = FLOW_DIR / "spent.yaml"  # ends budget_exhausted after one superstep
SPENDS_FLOW = FLOW_DIR / "spends.yaml"  # runs spent.yaml as a child run
PLAIT = str(Path(sys.executable).parent / "plait")
T0 = 1_800_000_000_000  # a fixed clock reading (ms) for PLAIT_NOW_MS


def plait(
    *args: str, env: dict[str, str] | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PLAIT, *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=timeout,
    )


def spawn_worker(
    db: str, log: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.Popen[str]:
    """``plait worker --db DB --json ARGS`` in the background, stderr into ``log``."""
    with open(log, "w") as err:
        return subprocess.Popen(
            [PLAIT, "worker", "--db", db, "--json", *args],
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            env={**os.environ, **(env or {})},
        )


def wait_for(condition: Callable[[], bool], what: str, timeout: float = 120) -> None:
    """Synchronization on an observable fact (a file, a row), never a fixed sleep."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def started(log: Path) -> bool:
    return log.exists() and "worker pid" in log.read_text()


def summary(proc: subprocess.Popen[str], timeout: float = 300) -> dict[str, Any]:
    out, _ = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, out
    return json.loads(out)


def executions(count_file: Path) -> Counter[str]:
    """How many times each effect ran, by idempotency key."""
    lines = count_file.read_text().splitlines() if count_file.exists() else []
    return Counter(line.split()[3] for line in lines)


def enqueue(
    db: str, flow: Path, inputs: dict[str, dict[str, Any]], clock: int | None = None
) -> None:
    """Queue one run per (run id, input) as ``plait run --detach`` does, in this process."""
    wf = load_workflow(flow)
    kwargs: dict[str, Any] = {"principal": "tester"}
    if clock is not None:
        kwargs["clock"] = lambda: clock
    with Runtime(db, **kwargs) as rt:

        async def all_of_them() -> None:
            for run_id, value in inputs.items():
                await rt.enqueue(wf, value, run_id=run_id)

        asyncio.run(all_of_them())
