"""Tools of the retry-policy scenarios: each counts its calls in a file of the test's folder,
so a tool can fail the first few times it is called and then succeed."""

from __future__ import annotations

import json
import threading
from pathlib import Path

_counting = threading.Lock()
"""Send tasks run at once in the driver's thread pool: one count at a time, none lost."""


class ServiceDown(Exception):
    """A transient failure: worth another attempt."""


class BadRequest(Exception):
    """A failure no attempt will cure (named in non_retryable)."""


def _tick(name: str) -> int:
    path = Path("calls.json")
    with _counting:
        counts = json.loads(path.read_text()) if path.exists() else {}
        counts[name] = counts.get(name, 0) + 1
        path.write_text(json.dumps(counts))
    return int(counts[name])


def start() -> dict:
    return {"started": True}


def flaky(fail_times: int = 2) -> dict:
    """Fails (ServiceDown) its first ``fail_times`` calls, then answers."""
    n = _tick("flaky")
    if n <= fail_times:
        raise ServiceDown(f"call {n}: service unavailable")
    return {"flaky_ok": n}


def refuses() -> dict:
    _tick("refuses")
    raise BadRequest("the request is malformed")


def spawn() -> dict:
    return {"$send": [{"node": "task", "input": {"i": i}} for i in range(3)]}


def task(i: int) -> dict:
    """Task 1 fails its first two calls."""
    n = _tick(f"task{i}")
    if i == 1 and n <= 2:
        raise ServiceDown(f"task {i} call {n}")
    return {"results": [i]}


def lookup(q: str) -> dict:
    """Look something up (fails its first two calls)."""
    n = _tick("lookup")
    if n <= 2:
        raise ServiceDown(f"lookup call {n}")
    return {"answer": f"{q}!"}
