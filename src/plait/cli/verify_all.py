"""``plait verify --all`` on every core: the store's runs split among ``plait verify``
processes (issue #22, target 3).

Replaying a run is pure CPU in one Python thread, so one process verifies on one core.
When the store takes longer than a second to verify, the runs left are dealt out to
``plait verify RUN... --json`` child processes, one per core, and their reports are put
back in the store's order: the same JSON, the same exit code, the runs spread over the
machine. Each child is the ordinary verb (no other protocol between processes);
the store URL reaches it through ``PLAIT_DB``, never on a command line others can read.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from plait.core.errors import PlaitError
from plait.driver.verify_cores import cores

HEAD_START_S = 1.0
"""Seconds of verifying in this process before the rest goes to children: a store that
verifies faster than that (most) never pays for starting another Python."""
CHILD = "import sys; from plait.cli import main; sys.argv[0] = 'plait'; main()"


def verify_all(
    db: str,
    run_ids: Sequence[str],
    workflow: str | None,
    here: Callable[[str], dict[str, Any]],
    advance: Callable[[int], None] = lambda done: None,
    *,
    processes: int | None = None,
    head_start_s: float = HEAD_START_S,
) -> list[dict[str, Any]]:
    """Every run's report, in ``run_ids`` order. Runs are verified here (``here``) for
    ``head_start_s`` seconds; what is left then, if at least one run per core, is dealt
    out to ``processes`` (every core) ``plait verify`` children."""
    processes = processes or cores()
    began = time.monotonic()
    found: list[dict[str, Any]] = []
    for index, run_id in enumerate(run_ids):
        left = len(run_ids) - index
        if processes > 1 and left >= processes and time.monotonic() - began >= head_start_s:
            rest = verify_in_processes(db, run_ids[index:], workflow, processes, here, advance)
            return found + rest
        found.append(here(run_id))
        advance(1)
    return found


def verify_in_processes(
    db: str,
    run_ids: Sequence[str],
    workflow: str | None,
    processes: int,
    here: Callable[[str], dict[str, Any]],
    advance: Callable[[int], None] = lambda done: None,
) -> list[dict[str, Any]]:
    """Each run's verify report, in ``run_ids`` order, from ``processes`` ``plait verify``
    children at a time; ``advance(n)`` is told each time n more runs are done. A batch
    whose child printed no report (it was killed, or ran out of memory) is verified in
    this process afterwards, by ``here``: nothing is lost, it only takes longer."""
    count = min(len(run_ids), processes)
    batches = [list(run_ids[i::count]) for i in range(count)]
    env = {**os.environ, "PLAIT_DB": db}

    def verify_batch(batch: list[str]) -> list[dict[str, Any]] | None:
        # Each child has a core of its own: it verifies its runs in one process.
        argv = [sys.executable, "-c", CHILD, "verify", *batch, "--workers", "1", "--json"]
        if workflow is not None:
            argv += ["--workflow", workflow]
        done = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
        reports = _reports(done.stdout, batch)
        if reports is not None:
            advance(len(batch))
        return reports

    by_id: dict[str, dict[str, Any]] = {}
    with ThreadPoolExecutor(max_workers=processes) as pool:
        for batch, reports in zip(batches, pool.map(verify_batch, batches), strict=True):
            if reports is None:
                reports = [here(run_id) for run_id in batch]
                advance(len(batch))
            by_id.update((r["run_id"], r) for r in reports)
    return [by_id[run_id] for run_id in run_ids]


def _reports(printed: str, batch: list[str]) -> list[dict[str, Any]] | None:
    """The reports a child printed (None when it printed none); its error (``{"error":
    ...}``, a run gone since it was listed) raised here as it was."""
    try:
        answer = json.loads(printed)
    except ValueError:
        return None
    if "error" in answer:
        error = answer["error"]
        raise PlaitError(str(error["code"]).removeprefix("PLAIT-"), str(error["message"]))
    runs: list[dict[str, Any]] = answer["runs"] if len(batch) > 1 else [answer]
    return runs
