"""From an answer to the run's next wave with the server's driver (issue #17), p50/p99.

A run ``start -> approve (an approval ask) -> after`` is started over HTTP on a real
``plait serve --workers 1`` and waited for (``?wait=``) until it parks on its ask. The
clock starts just before ``POST /runs/{id}/asks/{ask}/approve`` is sent and stops when
the ``after`` tool, dispatched by the next wave, reads the clock (``time.monotonic``:
one clock for every process of the machine). What lies between: the HTTP request, the
answer's commit, the wake, the claim, the drive's reads (manifest, journal, checkpoint),
the settling wave's commit and the dispatch of ``after``. Runs are answered one at a
time, so this is the latency of an idle server, not under load.

Sides, each on a fresh store:

- **serve, SQLite**: the server's driver, woken by the server's own answer (SQLite has no
  notifications);
- **serve, PostgreSQL**: the same on PostgreSQL;
- **serve --workers 0 + plait worker, SQLite**: the answer is journaled by an API-only
  server and driven by a separate ``plait worker`` (``--poll-ms 1000``, the default),
  which finds it by polling: what the in-process wake saves;
- **serve --workers 0 + plait worker, PostgreSQL**: the separate worker is woken by the
  answer's notification (``LISTEN``);
- **DBOS send -> recv, PostgreSQL** (where it applies: DBOS's way for a workflow to wait
  for a human is ``DBOS.recv``): a workflow ``start`` step, then ``recv``, then an
  ``after`` step that reads the clock; the clock starts before ``DBOS.send`` from the
  same process (no HTTP request in between, unlike plait's sides). Needs ``pip install
  dbos`` (``make .venv/.bench``); reported as not measured without it.

    .venv/bin/python bench/serve_driver.py [--runs N] [--quick] [--pg URL]

``--pg URL`` names a role that may create databases (default ``$PLAIT_BENCH_PG``, else
the local server, user postgres); without a reachable server the PostgreSQL sides are
reported as not measured.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import secrets
import select
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

ADMIN_URL = os.environ.get("PLAIT_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
PLAIT = str(Path(sys.executable).parent / "plait")
TOKEN = "bench-token"
FLOW = """
name: answered
nodes:
  - {id: start, tool: start}
  - {id: approve, ask: {prompt: Go on?, approval: true}}
  - {id: after, tool: after}
edges:
  - {from: start, to: approve}
  - {from: approve, to: after}
tools:
  start: {python: "benchtools:start"}
  after: {python: "benchtools:after"}
"""
TOOLS = """
import time
from pathlib import Path


def start() -> dict:
    return {"started": True}


def after(stamp: str) -> dict:
    Path(stamp).write_text(repr(time.monotonic()))
    return {"done": True}
"""


@contextmanager
def postgres_database() -> Iterator[str]:
    import psycopg

    name = f"bench_serve_{secrets.token_hex(3)}"
    with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    parts = urlsplit(ADMIN_URL)
    try:
        yield urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, ""))
    finally:
        with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def postgres_reachable() -> bool:
    try:
        import psycopg

        psycopg.connect(ADMIN_URL, connect_timeout=3).close()
    except Exception:
        return False
    return True


@contextmanager
def process(args: list[str], folder: Path, log: Path) -> Iterator[subprocess.Popen[str]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PLAIT_")}
    with open(log, "w") as err:
        proc = subprocess.Popen(
            args,
            cwd=folder,
            env={**env, "PLAIT_PRINCIPAL": "alice"},
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
        )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=120)


def latencies(db: str, runs: int, external_worker: bool) -> list[float]:
    """Milliseconds from each approve request to the next wave's tool, one run at a time."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "answered.yaml").write_text(FLOW)
        (folder / "benchtools.py").write_text(TOOLS)
        workers = ["--workers", "0"] if external_worker else ["--workers", "1"]
        serve = [PLAIT, "serve", "--port", "0", "--json", "--db", db, "--token", TOKEN]
        with process([*serve, *workers], folder, folder / "serve.log") as server:
            assert server.stdout is not None
            ready, _, _ = select.select([server.stdout], [], [], 120)
            if not ready:
                raise RuntimeError((folder / "serve.log").read_text())
            url = json.loads(server.stdout.readline())["url"]
            worker_args = [PLAIT, "worker", "--db", db, "--concurrency", "1"]
            with (
                process(worker_args, folder, folder / "worker.log")
                if external_worker
                else nothing()
            ):
                return measure(url, folder, runs)


@contextmanager
def nothing() -> Iterator[None]:
    yield None


def measure(url: str, folder: Path, runs: int) -> list[float]:
    http = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=120)
    found: list[float] = []
    try:
        for n in range(runs + 1):  # the first is a warm-up (imports, connections)
            stamp = folder / f"stamp{n}"
            body = {"workflow": str(folder / "answered.yaml"), "run_id": f"r{n}"}
            body["input"] = {"stamp": str(stamp)}
            started = http.post("/runs", json=body, params={"wait": 120})
            if started.json()["status"] != "parked":
                started = wait_parked(http, f"r{n}")
            (ask,) = http.get(f"/runs/r{n}/asks").json()["asks"]
            sent = time.monotonic()
            answer = http.post(f"/runs/r{n}/asks/{ask['ask_id']}/approve", json={"as": "bob"})
            assert answer.status_code == 200, answer.text
            while not stamp.exists() or not stamp.read_text():
                time.sleep(0.0005)
            if n:
                found.append((float(stamp.read_text()) - sent) * 1000)
    finally:
        http.close()
    return found


def wait_parked(http: httpx.Client, run_id: str) -> Any:
    """The run once parked (an external worker drives it after the wait ran out)."""
    while True:
        got = http.get(f"/runs/{run_id}")
        if got.json()["status"] == "parked":
            return got
        time.sleep(0.005)


def dbos_child(url: str, runs: int) -> None:
    """The DBOS side, in a process of its own (DBOS is one global instance): prints the
    latencies as one JSON list."""
    from dbos import DBOS

    DBOS(config={"name": "servebench", "system_database_url": url, "log_level": "ERROR"})

    @DBOS.step()
    def start() -> int:
        return 1

    @DBOS.step()
    def after(stamp: str) -> None:
        Path(stamp).write_text(repr(time.monotonic()))

    @DBOS.workflow()
    def answered(stamp: str) -> None:
        start()
        DBOS.set_event("parked", True)
        DBOS.recv("answer", timeout_seconds=120)
        after(stamp)

    DBOS.launch()
    found: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in range(runs + 1):
            stamp = Path(tmp) / f"stamp{n}"
            handle = DBOS.start_workflow(answered, str(stamp))
            DBOS.get_event(handle.workflow_id, "parked", timeout_seconds=60)
            sent = time.monotonic()
            DBOS.send(handle.workflow_id, "go", "answer")
            while not stamp.exists() or not stamp.read_text():
                time.sleep(0.0005)
            handle.get_result()
            if n:
                found.append((float(stamp.read_text()) - sent) * 1000)
    DBOS.destroy()
    print(json.dumps(found))


def dbos_latencies(runs: int) -> list[float] | None:
    """The DBOS side on a fresh database, or None when DBOS is not installed."""
    try:
        import dbos  # noqa: F401
    except ImportError:
        return None
    with postgres_database() as url:
        child = subprocess.run(
            [sys.executable, __file__, "--dbos-child", url, "--runs", str(runs)],
            capture_output=True,
            text=True,
            timeout=1200,
        )
    if child.returncode != 0:
        raise RuntimeError(child.stderr)
    return list(json.loads(child.stdout.strip().splitlines()[-1]))


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * len(ordered)) - 1))
    return ordered[index]


def main(argv: list[str] | None = None) -> None:
    global ADMIN_URL
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--quick", action="store_true", help="20 runs a side")
    parser.add_argument("--pg", default=ADMIN_URL)
    parser.add_argument("--dbos-child", metavar="URL", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    ADMIN_URL = args.pg
    runs = 20 if args.quick else args.runs
    if args.dbos_child:
        dbos_child(args.dbos_child, runs)
        return
    print(f"answer -> next wave, {runs} runs a side, one at a time")
    print(f"{platform.python_version()}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}")
    print(f"{'side':<46} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}")
    pg = postgres_reachable()
    for store in ("sqlite", "postgresql"):
        for external in (False, True):
            side = (
                f"serve --workers 0 + plait worker, {store}"
                if external
                else f"serve --workers 1, {store}"
            )
            if store == "postgresql" and not pg:
                print(f"{side:<46} not measured (no PostgreSQL at {ADMIN_URL})")
                continue
            if store == "sqlite":
                with tempfile.TemporaryDirectory() as tmp:
                    found = latencies(f"sqlite:///{tmp}/plait.db", runs, external)
            else:
                with postgres_database() as url:
                    found = latencies(url, runs, external)
            report(side, found)
    side = "DBOS send -> recv (same process), postgresql"
    dbos_found = dbos_latencies(runs) if pg else None
    if dbos_found is None:
        print(f"{side:<46} not measured (no dbos, or no PostgreSQL)")
    else:
        report(side, dbos_found)


def report(side: str, found: list[float]) -> None:
    print(
        f"{side:<46} {statistics.median(found):8.1f} {percentile(found, 99):8.1f} {max(found):8.1f}"
    )


if __name__ == "__main__":
    main()
